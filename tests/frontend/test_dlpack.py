"""DLPack both ways: zero-copy with numpy (torch and jax when installed), lifetimes, strides, dtypes, refusals."""

from __future__ import annotations

import ctypes
import gc
import importlib.util

import numpy as np
import pytest

import uops
from uops import Tensor
from uops.dtypes import from_numpy
from uops.frontend import dlpack as dl
from uops.frontend.realize import get_buffer


def _address(t: Tensor) -> int:
    buf = get_buffer(t.realize().uop.src[0])
    host = buf.as_numpy()
    assert host is not None
    return int(host.ctypes.data)


def test_numpy_reads_a_tensor_without_a_copy_and_sees_its_memory():
    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a.ctypes.data == _address(t)
    a[0, 0] = 100.0  # exported writable, like torch: the tensor sees the consumer's write
    assert t.numpy()[0, 0] == 100.0


def test_a_lazy_tensor_is_realized_before_export():
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(np.from_dlpack((Tensor(x) * 3).exp()), np.exp(x * 3), rtol=1e-6)


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (4, 1, 2)])
def test_export_shapes(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    a = np.from_dlpack(Tensor(x))
    assert a.shape == x.shape and a.dtype == x.dtype
    np.testing.assert_array_equal(a, x)


def test_strided_views_export_their_strides():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = Tensor(x).realize()
    for view, ref in ((t.T, x.T), (t[:, ::2], x[:, ::2]), (t[1:3, 1:], x[1:3, 1:]), (t.flip(1), x[:, ::-1])):
        a = np.from_dlpack(view)
        np.testing.assert_array_equal(a, ref)
        assert a.strides == ref.strides
    padded = t.pad(((1, 0), None))  # not one strided window: exported from a contiguous copy
    np.testing.assert_array_equal(np.from_dlpack(padded), np.pad(x, ((1, 0), (0, 0))))
    with pytest.raises(BufferError, match="copy=False"):
        padded.__dlpack__(copy=False)


@pytest.mark.parametrize("np_dtype", [np.bool_, np.int8, np.uint16, np.int64, np.uint64, np.float16, np.float32])
def test_dtypes_round_trip(np_dtype):
    x = (np.arange(5) % 2 == 0) if np_dtype is np.bool_ else np.arange(5).astype(np_dtype)
    t = uops.from_dlpack(x)
    assert t.dtype == from_numpy(x.dtype)
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(np.from_dlpack(t), x)


def test_bfloat16_round_trips_between_tensors():
    t = Tensor([1.0, 2.5, -3.0], dtype="bfloat16", device="PYTHON")
    u = uops.from_dlpack(t, device="PYTHON")
    assert u.dtype == uops.dtypes.bfloat16
    np.testing.assert_array_equal(u.numpy(), [1.0, 2.5, -3.0])


def test_versioned_capsule_when_the_consumer_asks_for_it():
    t = Tensor([1.0, 2.0])
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert '"dltensor"' in repr(t.__dlpack__())
    assert '"dltensor"' in repr(t.__dlpack__(max_version=(0, 8)))
    assert t.__dlpack_device__() == (dl.kDLCPU, 0)


def test_import_aliases_numpy_memory_and_keeps_it_alive():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = uops.from_dlpack(x)
    assert _address(t) == x.ctypes.data
    x[0, 0] = -5.0
    assert t.numpy()[0, 0] == -5.0
    ref = x.copy()
    del x
    gc.collect()
    np.testing.assert_array_equal((t + 1).numpy(), ref + 1)


def test_import_strided_and_negative_strides():
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    for v in (x.T, x[:, ::-2], x[::2, 1:4], x[::-1, ::-1]):
        np.testing.assert_array_equal(uops.from_dlpack(v).numpy(), v)
        np.testing.assert_array_equal((uops.from_dlpack(v) * 2).numpy(), v * 2)


def test_import_0d_and_empty():
    assert uops.from_dlpack(np.array(2.5)).numpy() == 2.5
    assert uops.from_dlpack(np.zeros((0, 2))).shape == (0, 2)


def test_read_only_numpy_is_copied_not_aliased():
    x = np.arange(4, dtype=np.float32)
    x.flags.writeable = False
    t = uops.from_dlpack(x)
    assert _address(t) != x.ctypes.data
    np.testing.assert_array_equal(t.numpy(), x)
    with pytest.raises(BufferError, match="read-only"):
        uops.from_dlpack(x, copy=False)


def test_copy_true_gives_private_memory_both_ways():
    x = np.arange(3, dtype=np.float32)
    t = uops.from_dlpack(x, copy=True)
    x[0] = 9.0
    assert t.numpy()[0] == 0.0
    a = np.from_dlpack(Tensor([1.0, 2.0]), copy=True)
    assert a.flags.writeable


def test_the_exported_record_is_released_by_the_consumer():
    before = len(dl._exports)
    a = np.from_dlpack(Tensor(np.ones(4, np.float32)))
    assert len(dl._exports) == before + 1
    del a
    gc.collect()
    assert len(dl._exports) == before
    cap = Tensor([1.0]).__dlpack__()  # dropped unconsumed: the capsule's destructor frees it
    del cap
    gc.collect()
    assert len(dl._exports) == before


def test_a_capsule_is_consumed_once():
    cap = Tensor([1.0, 2.0]).__dlpack__(max_version=(1, 0))
    np.testing.assert_array_equal(uops.from_dlpack(cap).numpy(), [1.0, 2.0])
    with pytest.raises(BufferError, match="consumed only once"):
        uops.from_dlpack(cap)


def test_refusals_are_buffer_errors():
    t = Tensor([1.0])
    with pytest.raises(BufferError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="cannot be exported"):
        t.__dlpack__(dl_device=(dl.kDLCUDA, 0))
    with pytest.raises(TypeError, match="__dlpack__"):
        uops.from_dlpack([1, 2])
    assert issubclass(dl.DLPackError, uops.UopsError)


def test_cuda_memory_is_refused_on_import_and_named_on_export():
    """The CUDA path: its device pointer is exported as kDLCUDA; this machine's consumers refuse it clearly."""
    assert dl._device_type("CUDA") == (dl.kDLCUDA, 0)
    assert dl._device_type("CUDA:1") == (dl.kDLCUDA, 1)

    class FakeCudaProducer:
        """A producer whose capsule says kDLCUDA (its memory is never read)."""

        def __dlpack_device__(self) -> tuple[int, int]:
            return (dl.kDLCPU, 0)  # lies, so the consumer asks no copy and meets the capsule's device

        def __dlpack__(self, **kw: object) -> object:
            cap = Tensor([1.0, 2.0]).__dlpack__(max_version=(1, 0))
            managed = dl.DLManagedTensorVersioned.from_address(dl._py.PyCapsule_GetPointer(cap, b"dltensor_versioned"))
            managed.dl_tensor.device.device_type = dl.kDLCUDA
            return cap

    with pytest.raises(BufferError, match="device type 2"):
        uops.from_dlpack(FakeCudaProducer())
    with pytest.raises(BufferError, match="no DLPack device type"):
        dl._device_type("WEIRD")


def test_struct_layout_matches_the_dlpack_header():
    p = ctypes.sizeof(ctypes.c_void_p)
    assert ctypes.sizeof(dl.DLTensor) == p + 8 + 4 + 4 + 2 * p + 8
    assert dl.DLManagedTensorVersioned.dl_tensor.offset == 8 + 2 * p + 8


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_both_ways():
    import torch

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    t = uops.from_dlpack(x)
    assert _address(t) == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    y = torch.from_dlpack(Tensor(np.eye(3, dtype=np.float32)))
    np.testing.assert_array_equal(y.numpy(), np.eye(3))


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_both_ways():
    import jax.numpy as jnp

    x = jnp.arange(6, dtype=jnp.float32)
    np.testing.assert_array_equal(uops.from_dlpack(x).numpy(), np.arange(6))
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(Tensor(np.ones(3, np.float32)))), np.ones(3))
