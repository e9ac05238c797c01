"""Tensor behaviour that is the core's alone (errors, PYTHON-only dtypes, deep graphs).

The per-device checks of every Tensor op live in the conformance kit, `uops.testing.kit.test_tensor`,
which the suite runs for every available device.
"""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.plugins import PluginError
from uops.testing import devices_from_env
from uops.testing.kit.helpers import close, rnd

DEVICES = devices_from_env()


def test_getitem_errors():
    t = Tensor(rnd(2, 3), device="PYTHON")
    with pytest.raises(IndexError, match="index 2 is out of range for axis 0 with size 2"):
        t[2]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0]


def test_clear_errors():
    t = Tensor(rnd(2, 3), device="PYTHON")
    with pytest.raises(ValueError, match=r"shapes \(2, 3\) and \(4,\) do not broadcast"):
        t + Tensor(rnd(4), device="PYTHON")
    with pytest.raises(
        ValueError, match=r"matmul inner dimensions differ: \(2, 3\) has 3 columns, \(2, 3\) has 2 rows"
    ):
        t @ t
    with pytest.raises(IndexError, match=r"axis 2 is out of range for a tensor of shape \(2, 3\)"):
        t.sum(axis=2)
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\) \(6 elements\) to \(4, 2\)"):
        t.reshape(4, 2)
    with pytest.raises(ValueError, match=r"cannot reshape tensor of shape \(2, 3\)"):
        t.reshape(4, -1)
    if "CPU" in DEVICES:
        with pytest.raises(ValueError, match="different devices"):
            t + Tensor(rnd(2, 3), device="CPU")
    with pytest.raises(ValueError, match="not a permutation"):
        t.permute(0, 0)
    with pytest.raises(ValueError, match=r"cannot expand shape \(2, 3\) to \(2, 4\)"):
        t.expand(2, 4)
    with pytest.raises(PluginError, match="unknown device 'NOPE'"):
        Tensor([1.0], device="nope")


def test_unsupported_dtype_is_a_clear_error():
    from uops.renderer import DTypeNotSupportedError

    if "CPU" not in DEVICES:
        pytest.skip("needs the CPU plugin (bfloat16 is not supported there)")
    t = Tensor(np.ones(4, np.float32), device="CPU").cast(dtypes.bfloat16)
    with pytest.raises(DTypeNotSupportedError, match="device CPU does not support dtype bfloat16"):
        t.realize()


def test_bfloat16_on_python_backend():
    a = np.array([1.0, 2.5, -3.0], dtype=np.float32)
    t = Tensor(a, device="PYTHON", dtype=dtypes.bfloat16)
    assert t.dtype == dtypes.bfloat16
    close(t * 2, a * 2)


def test_deep_elementwise_chain_is_one_kernel_without_recursion_error():
    x = Tensor(np.ones(4, np.float32), device="PYTHON")
    y = x
    for _ in range(3000):
        y = y + 1
    assert len(y.schedule()) == 1
    np.testing.assert_array_equal(y.numpy(), np.full(4, 3001.0))


def test_assign_gives_every_holder_the_new_value():
    t = Tensor(np.zeros((2, 3), np.float32), device="CPU")
    holder = [t]
    t.assign(t + np.arange(3, dtype=np.float32))  # the right side reads the tensor it replaces
    np.testing.assert_array_equal(holder[0].numpy(), np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    t.assign(1)  # a scalar broadcasts and takes the tensor's dtype
    assert t.dtype == dtypes.float32
    np.testing.assert_array_equal(t.numpy(), np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"shape \(4,\) does not fit a tensor of shape \(2, 3\)"):
        t.assign(Tensor(np.zeros(4, np.float32), device="CPU"))


def test_a_scalar_operand_is_one_constant_under_one_view_and_a_vector_operand_is_broadcast():
    """What an elementwise op's operands become: a Python scalar one CONST under one view of the other operand's
    shape (no chain of movements); a matrix @ vector the vector broadcast over the rows; a shape that changed in
    place is seen at once."""
    from uops.ir.ops import Ops

    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="PYTHON")
    y = (t * 2.5).uop
    const = y.src[1]
    assert const.op is Ops.VIEW and len(const.src) == 1 and const.src[0].op is Ops.CONST
    assert const.arg.shape == (2, 3) and const.src[0].arg == 2.5
    np.testing.assert_array_equal((2.5 - t).numpy(), 2.5 - t.numpy())
    v = Tensor(np.array([1.0, -2.0, 0.5], np.float32), device="PYTHON")
    mv = t @ v
    assert mv.shape == (2,) and sum(u.op is Ops.VIEW for u in mv.uop.toposort()) <= 5  # 9 as a (2, 1, 3) product
    np.testing.assert_allclose(mv.numpy(), t.numpy() @ v.numpy(), rtol=1e-6)
    assert t.shape == (2, 3)
    t.uop = t.reshape(3, 2).uop
    assert t.shape == (3, 2)


def test_host_data_goes_straight_into_a_loaded_host_device_buffer():
    from uops.frontend import realize as R
    from uops.plugins import Device

    Device["CPU"].runtime  # noqa: B018 (loaded: the one-copy path needs it)
    arr = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = Tensor(arr, dtype=dtypes.float32, device="CPU")
    node = t.uop.src[0]
    assert node not in R.pending and R._buffers[node].is_allocated
    arr[0, 0] = 99.0  # the caller's array is copied, never aliased
    np.testing.assert_array_equal(t.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
    b = Tensor(np.array([1.5, -2.25, 3.0], dtype=np.float32), dtype=dtypes.bfloat16, device="CPU")
    np.testing.assert_array_equal(b.numpy(), [1.5, -2.25, 3.0])
    np.testing.assert_array_equal(Tensor(np.zeros((0, 3), np.float32), device="CPU").numpy(), np.zeros((0, 3)))


def test_host_data_waits_as_a_copy_where_the_runtime_is_not_loaded_or_a_jit_records():
    from uops import jit
    from uops.frontend import realize as R
    from uops.plugins import Device

    handle = Device["PYTHON"]
    handle.__dict__.pop("runtime", None)  # as in a process that has not run anything on it yet
    assert handle.loaded_runtime is None
    t = Tensor(np.arange(4, dtype=np.int32), device="PYTHON")
    assert t.uop.src[0] in R.pending
    np.testing.assert_array_equal((t + 1).numpy(), [1, 2, 3, 4])
    assert handle.loaded_runtime is not None

    @jit
    def shifted(x: Tensor) -> Tensor:
        return x + Tensor(np.array([10.0, 20.0], np.float32), device="CPU")  # recorded: replays upload it again

    x = Tensor(np.array([1.0, 2.0], np.float32), device="CPU")
    for _ in range(4):
        np.testing.assert_array_equal(shifted(x).numpy(), [11.0, 22.0])
    assert shifted.replays >= 1
