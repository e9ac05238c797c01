"""Grouped reductions (GROUP/GROUPTOP: a workgroup's threads share one reduction and combine their partials in a
tree through local memory) against numpy on the emulated GPUs and the CPU, with odd sizes and groups, 16-bit
floats and ints; the shape of the rendered combine; and the sources accepted by the real GPU compilers."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from uops import AxisType, Ops, Tensor, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.lowerer import full_rewrite_to_sink, tree_levels
from uops.codegen.opt import Opt, OptError, OptOps
from uops.codegen.program import get_program
from uops.compiler import CompilerUnavailableError
from uops.dtypes import DType, to_numpy
from uops.plugins import Device
from uops.renderer import Renderer
from uops.runtime import Buffer
from uops.testing import available_devices

G, GT, L = OptOps.GROUP, OptOps.GROUPTOP, OptOps.LOCAL
EMULATED = [d for d in ("CUDA_EMU", "AMD_EMU", "METAL_EMU") if d in available_devices()]
GPU_TARGETS = [("CUDA", "sm_75"), ("CUDA", "sm_90"), ("AMD", "gfx942"), ("AMD", "gfx1100"), ("METAL", "metal3.1")]


def reduce_rows(m: int, n: int, kind: str, dt: DType) -> UOp:
    """out[i] = kind (sum, max, min, mean) over k of x[i, k]; min as -max(-x), mean as the sum times 1/n."""
    out = UOp(Ops.DEFINE_GLOBAL, (dtypes.float32 if kind == "mean" else dt).ptr(), (), 0)
    x = UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), 1)
    i, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.REDUCE)
    v = x.index(i * n + r).load()
    if kind == "min":
        red = -((-v).reduce(r, op=Ops.MAX))
    elif kind == "max":
        red = v.reduce(r, op=Ops.MAX)
    elif kind == "mean":
        red = v.cast(dtypes.float32).reduce(r, op=Ops.ADD) * (1.0 / n)
    else:
        red = v.reduce(r, op=Ops.ADD)
    return UOp.sink(out.index(i).store(red))


def run_rows(device: str, m: int, n: int, kind: str, dt: DType, opts: list[Opt]) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's result and numpy's for seeded inputs (small ints, so int sums are exact)."""
    dev = Device[device]
    spec = get_program(reduce_rows(m, n, kind, dt), dev.renderer, dev.compiler, opts)
    rng = np.random.default_rng(3)
    npdt = to_numpy(dt)
    x = (rng.integers(-50, 50, (m, n)) if dt.kind == "i" else rng.standard_normal((m, n))).astype(npdt)
    want = getattr(x.astype(np.float64), kind)(axis=1)
    out_dt = dtypes.float32 if kind == "mean" else dt
    out, inp = Buffer(dev.runtime, m, out_dt), Buffer(dev.runtime, x.size, dt)
    inp.copyin(x.ravel())
    g, loc = spec.launch_dims()
    dev.runtime.load(spec.name, spec.lib)(out.handle, inp.handle, global_size=g, local_size=loc)
    dev.runtime.synchronize()
    return out.numpy().astype(np.float64), want


CASES = [
    ("sum odd group", 5, 1000, "sum", dtypes.float32, [Opt(G, 0, 7)]),
    ("max group 256", 3, 1024, "max", dtypes.float32, [Opt(G, 0, 256)]),
    ("min whole tensor, tail", 1, 4099, "min", dtypes.float32, [Opt(G, 0, 64)]),
    ("mean rows grouptop", 4, 333, "mean", dtypes.float32, [Opt(GT, 0, 16)]),
    ("sum group is the row", 2, 64, "sum", dtypes.float32, [Opt(G, 0, 64)]),
    ("sum size 1", 1, 1, "sum", dtypes.float32, [Opt(G, 0, 2)]),
    ("sum int32", 3, 700, "sum", dtypes.int32, [Opt(G, 0, 32)]),
    ("max int32 local rows", 4, 513, "max", dtypes.int32, [Opt(L, 0, 2), Opt(G, 0, 128)]),
    ("sum float16", 2, 300, "sum", dtypes.float16, [Opt(G, 0, 16)]),
    ("min float16 group 3", 3, 50, "min", dtypes.float16, [Opt(G, 0, 3)]),
]


@pytest.mark.parametrize("device", EMULATED)
@pytest.mark.parametrize("name,m,n,kind,dt,opts", CASES, ids=[c[0] for c in CASES])
def test_grouped_reductions_match_numpy(
    device: str, name: str, m: int, n: int, kind: str, dt: DType, opts: list[Opt]
) -> None:
    try:
        got, want = run_rows(device, m, n, kind, dt, opts)
    except OptError as e:
        assert n == 1, f"{name}: {e}"  # a reduction of one element leaves nothing to group
        return
    tol = 2e-2 if dt == dtypes.float16 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, math.sqrt(n)), err_msg=name)


@pytest.mark.parametrize("device", [*EMULATED, "CPU"])
def test_tensor_reductions_with_the_heuristics_match_numpy(device: str) -> None:
    """Rows long enough and whole tensors that the GPU heuristics group (by 256), and the CPU's own path."""
    if device not in available_devices():
        pytest.skip(f"{device} is not available here")
    x = np.random.default_rng(4).standard_normal((48, 1024)).astype(np.float32)
    t = Tensor(x, device=device)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), x.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(t.max(axis=1).numpy(), x.max(axis=1))
    np.testing.assert_allclose(t.reshape(-1).min().numpy(), x.min())
    np.testing.assert_allclose(t.mean().numpy(), x.mean(), rtol=1e-4, atol=1e-5)


def test_tree_levels_combine_every_partial_in_ceil_log2_levels() -> None:
    """Simulated: for every size, the levels leave partial 0 holding the sum of all of them."""
    for size in range(1, 300):
        levels = tree_levels(size)
        assert len(levels) == (math.ceil(math.log2(size)) if size > 1 else 0)
        vals = [1 << i for i in range(size)]
        for stride, active in levels:
            assert all(i + stride < size for i in range(active))
            vals = [v + vals[i + stride] if i < active else v for i, v in enumerate(vals)]
        assert vals[0] == (1 << size) - 1, size


def _combine(ren: Renderer, dt: DType, opts: list[Opt]) -> tuple[int, int, list[int]]:
    """(barriers, shuffles, loop trip counts) of a grouped row sum lowered for ``ren``."""
    uops = linearize(full_rewrite_to_sink(reduce_rows(4, 2048, "sum", dt), ren, opts)[0])
    loops = [int(u.src[0].arg) for u in uops if u.op is Ops.RANGE]
    return sum(u.op is Ops.BARRIER for u in uops), sum(u.op is Ops.SHUFFLE for u in uops), loops


@pytest.mark.parametrize("device,arch", GPU_TARGETS)
def test_rendered_combine_is_shuffles_or_a_tree(device: str, arch: str) -> None:
    """A group of whole warps of 32-bit values: two butterflies of shuffles around one barrier. Other groups (16-bit
    values, several rows per workgroup), and every group on a renderer without ``shuffle_width`` (the default
    of a third-party dialect): a tree, one barrier per level plus one. Never a loop over the group's partials."""
    if device not in Device.names():
        pytest.skip(f"the {device} plugin is not installed")
    ren = Device[device].target(arch).renderer
    assert ren.shuffle_width == 32
    assert _combine(ren, dtypes.float32, [Opt(G, 0, 256)]) == (1, 10, [8])
    assert _combine(ren, dtypes.float32, [Opt(G, 0, 32)]) == (0, 5, [64])
    levels = math.ceil(math.log2(256))
    assert _combine(ren, dtypes.float16, [Opt(G, 0, 256)]) == (1 + levels, 0, [8])
    assert _combine(ren, dtypes.float32, [Opt(L, 0, 2), Opt(G, 0, 128)]) == (1 + 7, 0, [16])
    assert _combine(ren, dtypes.float32, [Opt(G, 0, 48)]) == (1 + 6, 0, [43])
    portable = type("Portable", (type(ren),), {"shuffle_width": 0})(arch)
    assert _combine(portable, dtypes.float32, [Opt(G, 0, 256)]) == (1 + levels, 0, [8])


SHUFFLE_SPELLING = {"CUDA": "__shfl_xor_sync", "AMD": "__builtin_amdgcn_ds_swizzle", "METAL": "simd_shuffle_xor"}


@pytest.mark.parametrize("device,arch", GPU_TARGETS)
def test_real_gpu_compilers_accept_the_grouped_kernels(device: str, arch: str) -> None:
    """NVRTC, clang for amdgcn and the Metal check compile a grouped sum (shuffles) and a float16 min (a tree)."""
    if device not in Device.names():
        pytest.skip(f"the {device} plugin is not installed")
    target = Device[device].target(arch)
    try:
        spec = get_program(reduce_rows(4, 2048, "sum", dtypes.float32), target.renderer, target.compiler,
                           [Opt(G, 0, 256)])  # fmt: skip
        tree = get_program(reduce_rows(3, 50, "min", dtypes.float16), target.renderer, target.compiler, [Opt(G, 0, 3)])
    except CompilerUnavailableError as e:
        pytest.skip(f"{device} compiler unavailable: {e}")
    assert spec.lib and tree.lib, f"{device} {arch}: no binary"
    assert spec.src.count(SHUFFLE_SPELLING[device]) == 10, spec.src
    assert len(re.findall(r"barrier|__syncthreads", tree.src)) >= 3, tree.src
