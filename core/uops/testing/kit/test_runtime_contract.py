"""The runtime contract every backend is held to: the core never uses a handle after ``free``, waits on a
launch's or a copy's event before it reads, and views (sub-buffers) read and write the right bytes.

The device's runtime is wrapped in `uops.testing.poison.PoisonedRuntime`, which remembers (and overwrites)
every freed handle and refuses it at the next copy or launch, so a use-after-free that host memory would
hide fails here on every backend; and in `uops.testing.deferred.DeferredRuntime`, whose launches and
uploads run only when their event is waited on, so a read that does not wait fails here too.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from uops import AxisType, Tensor, UOp, dtypes, load_program
from uops.codegen.program import ProgramSpec, get_program
from uops.compiler.cache import LRU
from uops.frontend import realize
from uops.plugins import Device
from uops.runtime import Buffer, BufferFreedError, BufferViewError, copy_between
from uops.testing.deferred import DeferredRuntime
from uops.testing.kit.helpers import glob
from uops.testing.poison import PoisonedRuntime


def _add_spec(device: str) -> ProgramSpec:
    d = Device[device]
    r = UOp.range(1000, 0, AxisType.GLOBAL)
    store = glob(0).index(r).store(glob(1).index(r).load() + glob(2).index(r).load())
    return get_program(UOp.sink(store), d.renderer, d.compiler)


def test_load_program_frees_its_staged_copies_only_after_the_launch(device: str) -> None:
    """numpy arguments are copied into buffers that live until the kernel is done, then are freed (once)."""
    poisoned = PoisonedRuntime(Device[device].runtime)
    prog = load_program(_add_spec(device), runtime=poisoned)
    a, b = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, dtype=np.float32)
    out = np.zeros(1000, dtype=np.float32)
    for _ in range(2):  # the second launch must not meet the first one's freed handles
        prog(out, a, b)
        gc.collect()
        np.testing.assert_array_equal(out, a + b)
    assert poisoned.allocator.frees == 6, "each staged copy is freed exactly once, after its launch"


def test_a_freed_buffer_is_refused_by_the_poisoned_runtime(device: str) -> None:
    """The check itself: a launch or a copy with a freed handle raises, whatever the backend."""
    poisoned = PoisonedRuntime(Device[device].runtime)
    spec = _add_spec(device)
    bufs = [Buffer(poisoned, 1000, dtypes.float32).allocate() for _ in range(3)]
    handle = bufs[1].handle
    bufs[1].free()
    with pytest.raises(BufferFreedError, match="use after free"):
        poisoned.load(spec.name, spec.lib)(bufs[0].handle, handle, bufs[2].handle)
    with pytest.raises(BufferFreedError, match="use after free"):
        poisoned.allocator.copyout(memoryview(bytearray(4000)), handle)


def test_the_core_waits_on_launch_and_copy_events_before_it_reads(device: str) -> None:
    """With every launch and upload left queued until its event is waited on, results still come back right,
    and through the events: the core never needed ``synchronize``."""
    deferred = DeferredRuntime(Device[device].runtime)
    prog = load_program(_add_spec(device), runtime=deferred)
    a, b = np.arange(1000, dtype=np.float32), np.full(1000, 0.5, dtype=np.float32)
    out = np.zeros(1000, dtype=np.float32)
    prog(out, a, b)  # staged copies: uploaded, launched, read back and freed, each after the work before it
    np.testing.assert_array_equal(out, a + b)
    bufs = [Buffer(deferred, 1000, dtypes.float32) for _ in range(3)]
    bufs[1].copyin(a)
    bufs[2].copyin(b)
    prog(bufs[0], bufs[1], bufs[2])
    prog(bufs[1], bufs[0], bufs[2])  # reads the first launch's result: the queue keeps them in order
    np.testing.assert_array_equal(bufs[1].numpy(), a + 2 * b)
    host = Buffer(Device[device].runtime, 1000, dtypes.float32)
    copy_between(bufs[0], host)
    np.testing.assert_array_equal(host.numpy(), a + b)
    assert deferred.queue.waits > 0 and deferred.queue.syncs == 0, (deferred.queue.waits, deferred.queue.syncs)
    assert not deferred.queue.items, "every queued launch and copy ran"


class _DeferredDevice:
    """A device whose runtime is ``runtime`` and everything else the registered device's."""

    def __init__(self, inner: object, runtime: DeferredRuntime) -> None:
        self.inner, self.runtime = inner, runtime

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_tensor_results_wait_on_launch_events(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Tensor computation on a runtime whose launches complete lazily reads back the finished values."""
    deferred = DeferredRuntime(Device[device].runtime)
    proxy = _DeferredDevice(Device[device], deferred)
    monkeypatch.setattr(realize, "device_handle", lambda d: proxy if d == device else Device[d])
    monkeypatch.setattr(realize, "_programs", LRU(16))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = Tensor(a, device=device)
    r = ((t + 1) * 2).sum(axis=1)
    np.testing.assert_allclose(r.numpy(), ((a + 1) * 2).sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose((r + t[:, 0]).numpy(), ((a + 1) * 2).sum(axis=1) + a[:, 0], rtol=1e-6)
    assert deferred.queue.waits > 0 and not deferred.queue.items


def test_a_view_reads_and_writes_the_right_bytes(device: str) -> None:
    """``Buffer.view``: a launch on three views of one buffer, and a copy into a view, touch only their bytes."""
    rt = Device[device].runtime
    base = Buffer(rt, 3072, dtypes.float32)
    try:
        views = [base.view(i * 1024, 1000) for i in range(3)]
    except BufferViewError as e:
        pytest.skip(f"{device} has no sub-buffers: {e}")
    data = np.arange(3072, dtype=np.float32)
    base.copyin(data)
    np.testing.assert_array_equal(views[1].numpy(), data[1024:2024])
    prog = load_program(_add_spec(device), runtime=rt)
    prog(views[2], views[0], views[1])
    want = data.copy()
    want[2048:3048] = data[:1000] + data[1024:2024]
    np.testing.assert_array_equal(base.numpy(), want)
    views[0].copyin(np.full(1000, -1.0, dtype=np.float32))
    want[:1000] = -1.0
    np.testing.assert_array_equal(base.numpy(), want)
    with pytest.raises(ValueError, match="multiple of 64"):
        base.view(1, 10)
    base.free()
    with pytest.raises(BufferFreedError, match="was freed"):
        views[0].numpy()
