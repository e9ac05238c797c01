"""The runtime contract every backend is held to: the core never uses a handle after ``free``.

The device's runtime is wrapped in `uops.testing.poison.PoisonedRuntime`, which remembers (and overwrites)
every freed handle and refuses it at the next copy or launch, so a use-after-free that host memory would
hide fails here on every backend.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from uops import AxisType, UOp, dtypes, load_program
from uops.codegen.program import ProgramSpec, get_program
from uops.plugins import Device
from uops.runtime import Buffer, BufferFreedError
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
