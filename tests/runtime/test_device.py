"""Buffer, HostAllocator and the runtime contracts."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from uops.dtypes import dtypes, f32_to_bf16
from uops.runtime import (
    Allocator,
    Buffer,
    BufferFreedError,
    HostAllocator,
    Launch,
    LaunchError,
    LaunchProgram,
    Program,
    Runtime,
    copy_between,
    launch_dims,
)


class CountingHostAllocator(HostAllocator):
    def __init__(self) -> None:
        super().__init__()
        self.allocs = 0
        self.frees = 0

    def alloc(self, nbytes: int) -> np.ndarray:
        self.allocs += 1
        return super().alloc(nbytes)

    def free(self, handle: Any, nbytes: int) -> None:
        self.frees += 1
        super().free(handle, nbytes)


class BytesAllocator(Allocator):
    """Memory that is not host-visible through a view: only copies reach it."""

    def __init__(self) -> None:
        self.live: dict[int, bytearray] = {}
        self.next = 0

    def alloc(self, nbytes: int) -> int:
        self.next += 1
        self.live[self.next] = bytearray(nbytes)
        return self.next

    def free(self, handle: Any, nbytes: int) -> None:
        del self.live[handle]

    def copyin(self, handle: Any, src: memoryview) -> None:
        self.live[handle][:] = bytes(src)

    def copyout(self, dest: memoryview, handle: Any) -> None:
        dest[:] = self.live[handle]


class HostRuntime(Runtime):
    def __init__(self, allocator: Allocator | None = None, device: str = "HOST") -> None:
        self.device = device
        self.allocator = allocator or CountingHostAllocator()

    def load(self, name: str, lib: bytes) -> Program:
        raise NotImplementedError("HostRuntime runs no programs; it exists to test buffers")


def test_contracts_are_abstract() -> None:
    with pytest.raises(TypeError):
        Allocator()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        Runtime()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        Program()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="launch"):
        LaunchProgram()  # type: ignore[abstract]


class RecordingProgram(LaunchProgram):
    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | None:
        self.seen = (bufs, kw)
        return 0.5 if kw["wait"] else None


def test_launch_program_gets_every_keyword_with_the_defaults_filled_in() -> None:
    prg = RecordingProgram()
    assert prg("a", "b", local_size=(4, 1, 1)) is None
    assert prg.seen == (("a", "b"), {"global_size": (1, 1, 1), "local_size": (4, 1, 1), "vals": (), "wait": False})
    assert prg(vals=(3,), wait=True) == 0.5
    assert prg.seen[1]["vals"] == (3,) and prg.seen[1]["global_size"] == (1, 1, 1)


@pytest.mark.parametrize("nbytes", [0, 1, 3, 64, 1000, 1 << 20])
def test_host_allocator_aligned_zeroed(nbytes: int) -> None:
    a = HostAllocator()
    h = a.alloc(nbytes)
    assert h.nbytes == nbytes
    assert h.ctypes.data % 64 == 0
    assert not h.any()


def test_host_allocator_keeps_freed_buffers_for_reuse_within_its_budget() -> None:
    from uops.runtime import KEEP_MIN_BYTES

    a = HostAllocator(keep_bytes=3 * KEEP_MIN_BYTES)
    first = a.alloc(KEEP_MIN_BYTES)
    first[:] = 7
    a.free(first, KEEP_MIN_BYTES)
    assert a.kept_bytes == KEEP_MIN_BYTES
    again = a.alloc(KEEP_MIN_BYTES)
    assert again is first and a.kept_bytes == 0  # the same memory, as it was left (not zeroed)
    assert a.alloc(KEEP_MIN_BYTES) is not first and not a.alloc(KEEP_MIN_BYTES).any()  # nothing kept: new, zeroed
    small = a.alloc(KEEP_MIN_BYTES - 1)
    a.free(small, KEEP_MIN_BYTES - 1)
    assert a.kept_bytes == 0  # too small to keep
    big, other = a.alloc(2 * KEEP_MIN_BYTES), a.alloc(KEEP_MIN_BYTES)
    a.free(big, 2 * KEEP_MIN_BYTES)
    a.free(again, KEEP_MIN_BYTES)
    a.free(other, KEEP_MIN_BYTES)  # 4 x the minimum freed, 3 kept: the least recently freed size goes
    assert a.kept_bytes == 2 * KEEP_MIN_BYTES and a.alloc(2 * KEEP_MIN_BYTES) is not big
    assert {id(a.alloc(KEEP_MIN_BYTES)), id(a.alloc(KEEP_MIN_BYTES))} == {id(again), id(other)}
    huge = a.alloc(4 * KEEP_MIN_BYTES)
    a.free(huge, 4 * KEEP_MIN_BYTES)
    assert a.kept_bytes == 0  # over the whole budget: not kept
    assert HostAllocator().keep_bytes == 0  # the default keeps nothing: every buffer is new and zeroed
    with pytest.raises(ValueError, match="keep_bytes"):
        HostAllocator(keep_bytes=-1)


def test_host_allocator_view_is_zero_copy() -> None:
    a = HostAllocator()
    h = a.alloc(16)
    mv = a.as_memoryview(h, 16)
    mv[3] = 7
    out = bytearray(16)
    a.copyout(memoryview(out), h)
    assert out[3] == 7
    a.copyin(h, memoryview(bytes(range(16))))
    assert mv[15] == 15


def test_host_allocator_size_mismatch() -> None:
    a = HostAllocator()
    h = a.alloc(8)
    with pytest.raises(ValueError, match="size mismatch, buffer has 8 bytes, got 4"):
        a.copyin(h, memoryview(b"abcd"))
    with pytest.raises(ValueError, match="alignment must be a power of two"):
        HostAllocator(align=48)


def test_buffer_is_lazy() -> None:
    rt = HostRuntime()
    b = Buffer(rt, 10, dtypes.float32)
    assert not b.is_allocated and rt.allocator.allocs == 0
    assert b.nbytes == 40 and b.device == "HOST"
    assert (b.numpy() == 0).all()
    assert b.is_allocated and rt.allocator.allocs == 1
    b.numpy()
    assert rt.allocator.allocs == 1


@pytest.mark.parametrize(
    "dt,arr",
    [
        (dtypes.float32, np.linspace(-1, 1, 17, dtype=np.float32)),
        (dtypes.float64, np.arange(5, dtype=np.float64) / 3),
        (dtypes.float16, np.array([0.5, -2, 65504], dtype=np.float16)),
        (dtypes.int8, np.array([-128, 0, 127], dtype=np.int8)),
        (dtypes.uint64, np.array([0, 2**64 - 1], dtype=np.uint64)),
        (dtypes.bool, np.array([True, False, True])),
        (dtypes.bfloat16, f32_to_bf16(np.array([1.5, -3.0, 1e10], dtype=np.float32))),
    ],
)
def test_roundtrip(dt, arr: np.ndarray) -> None:
    b = Buffer(HostRuntime(), arr.size, dt).copyin(arr)
    out = b.numpy()
    assert out.dtype == arr.dtype
    np.testing.assert_array_equal(out, arr)


def test_copyin_accepts_any_shape_and_layout() -> None:
    arr = np.arange(12, dtype=np.int32).reshape(3, 4).T  # not C-contiguous
    b = Buffer(HostRuntime(), 12, dtypes.int32).copyin(arr)
    np.testing.assert_array_equal(b.numpy(), arr.reshape(-1))


def test_numpy_is_a_copy_and_as_numpy_is_a_view() -> None:
    b = Buffer(HostRuntime(), 4, dtypes.int32).copyin(np.arange(4, dtype=np.int32))
    copy = b.numpy()
    copy[0] = 99
    assert b.numpy()[0] == 0
    view = b.as_numpy()
    assert view is not None and view.dtype == np.int32
    view[1] = 42
    assert b.numpy()[1] == 42
    b.copyin(np.full(4, 5, dtype=np.int32))
    assert view[2] == 5


def test_copyin_checks_dtype_and_size() -> None:
    b = Buffer(HostRuntime(), 4, dtypes.float32)
    with pytest.raises(TypeError, match=r"array dtype is float64, buffer holds float32.*astype"):
        b.copyin(np.zeros(4))
    with pytest.raises(ValueError, match="array has 5 elements"):
        b.copyin(np.zeros(5, dtype=np.float32))


def test_bad_buffer_arguments() -> None:
    with pytest.raises(TypeError, match="not pointers"):
        Buffer(HostRuntime(), 4, dtypes.float32.ptr())
    with pytest.raises(ValueError, match="non-negative int"):
        Buffer(HostRuntime(), -1, dtypes.float32)
    with pytest.raises(ValueError, match="no numpy equivalent"):
        Buffer(HostRuntime(), 1, dtypes.void)


def test_use_after_free_is_an_error() -> None:
    rt = HostRuntime()
    b = Buffer(rt, 8, dtypes.float32, name="weights").copyin(np.ones(8, dtype=np.float32))
    b.free()
    assert rt.allocator.frees == 1
    assert "freed" in repr(b)
    uses = [
        b.numpy,
        b.as_numpy,
        b.allocate,
        b.free,
        lambda: b.handle,
        lambda: b.copyin(np.ones(8, dtype=np.float32)),
        lambda: copy_between(b, Buffer(rt, 8, dtypes.float32)),
    ]
    for use in uses:
        with pytest.raises(
            BufferFreedError, match=r"use of buffer <Buffer 'weights' HOST dtypes.float\[8\].*after free"
        ):
            use()
    assert rt.allocator.frees == 1


def test_free_of_unallocated_buffer_allocates_nothing() -> None:
    rt = HostRuntime()
    b = Buffer(rt, 8, dtypes.float32)
    b.free()
    assert rt.allocator.allocs == 0 and rt.allocator.frees == 0
    with pytest.raises(BufferFreedError):
        b.numpy()


def test_garbage_collection_frees_once() -> None:
    rt = HostRuntime()
    b = Buffer(rt, 8, dtypes.float32).allocate()
    del b
    gc.collect()
    assert rt.allocator.frees == 1


def test_copy_between_host_and_non_host_memory() -> None:
    host, opaque = HostRuntime(), HostRuntime(BytesAllocator(), device="OPAQUE")
    src = Buffer(host, 6, dtypes.float32).copyin(np.arange(6, dtype=np.float32))
    mid = Buffer(opaque, 6, dtypes.float32)
    assert mid.as_numpy() is None
    copy_between(src, mid)
    back = Buffer(host, 6, dtypes.float32)
    copy_between(mid, back)
    np.testing.assert_array_equal(back.numpy(), np.arange(6, dtype=np.float32))
    with pytest.raises(ValueError, match="has 24 bytes but"):
        copy_between(src, Buffer(host, 5, dtypes.float32))


def test_launch_dims_pads_to_three_and_checks_every_limit() -> None:
    assert launch_dims("k", (7,), (32, 2), "GPU") == ((7, 1, 1), (32, 2, 1))
    assert launch_dims("k", [3, 4, 5], (1,), "GPU", (8, 8, 8), (4, 4, 4), 64) == ((3, 4, 5), (1, 1, 1))
    refused = {
        ((), (1,)): "global_size must be 1 to 3 positive ints, got ()",
        ((1, 2, 3, 4), (1,)): r"global_size must be 1 to 3 positive ints, got \(1, 2, 3, 4\)",
        ((1,), (0,)): r"local_size must be 1 to 3 positive ints, got \(0,\)",
        ((1,), ("x",)): r"local_size must be 1 to 3 positive ints, got \('x',\)",
        ((9,), (1,)): r"global_size \(9, 1, 1\) exceeds the GPU limit \(8, 8, 8\)",
        ((1,), (1, 1, 5)): r"local_size \(1, 1, 5\) exceeds the GPU limit \(4, 4, 4\)",
        ((1,), (4, 4, 4)): r"local_size \(4, 4, 4\) is 64 threads per block, more than the 32 its bound",
    }
    for (grid, block), message in refused.items():
        with pytest.raises(LaunchError, match=rf"kernel 'k': {message}"):
            launch_dims("k", grid, block, "GPU", (8, 8, 8), (4, 4, 4), 32, "its bound")


def test_buffer_view_shares_memory_keeps_its_buffer_alive_and_checks_its_range() -> None:
    from uops.runtime import BufferViewError

    rt = HostRuntime()
    base = Buffer(rt, 64, dtypes.float32).copyin(np.arange(64, dtype=np.float32))
    inner = base.view(16, 32).view(16, 8)  # offsets compose: elements 32..39 of base
    np.testing.assert_array_equal(inner.numpy(), np.arange(32, 40, dtype=np.float32))
    inner.copyin(np.zeros(8, dtype=np.float32))
    assert base.numpy()[32:40].sum() == 0 and base.numpy()[40] == 40
    with pytest.raises(ValueError, match="outside the buffer"):
        base.view(48, 17)
    with pytest.raises(ValueError, match="non-negative"):
        base.view(-16, 4)
    del base
    gc.collect()
    assert rt.allocator.frees == 0, "a live view keeps its buffer's memory"
    inner.free()
    assert rt.allocator.frees == 0, "a view is never freed through the allocator"
    with pytest.raises(BufferViewError, match="no sub-buffers"):
        Buffer(HostRuntime(BytesAllocator()), 32, dtypes.float32).view(0, 16)


def test_a_buffer_is_freed_only_after_its_queued_copy_ran() -> None:
    from uops.testing.deferred import DeferredRuntime

    inner = HostRuntime()
    deferred = DeferredRuntime(inner)
    b = Buffer(deferred, 8, dtypes.float32).copyin(np.ones(8, dtype=np.float32))
    assert len(deferred.queue.items) == 1
    del b
    gc.collect()
    assert not deferred.queue.items and inner.allocator.frees == 1
