"""Kernel opts on ``device`` against numpy, with odd sizes and masked tails: UPCAST, UNROLL, SWAP,
INNER, BLOCK and PACK everywhere, THREAD on CPU-style renderers (``global_max is None``: the runtime calls the kernel
once per chunk), LOCAL, GROUP and GROUPTOP on GPU-style ones (see uops.codegen.opt)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.opt import Opt, OptError, OptOps
from uops.codegen.program import get_program
from uops.plugins import Device
from uops.runtime import Buffer
from uops.testing.kit.helpers import built_for

U, R, L, G, GT, T = OptOps.UPCAST, OptOps.UNROLL, OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.THREAD
S, I, B, P = OptOps.SWAP, OptOps.INNER, OptOps.BLOCK, OptOps.PACK

Case = tuple[UOp, Callable[..., np.ndarray], list[tuple[int, ...]]]


def bufs(n: int) -> list[UOp]:
    """The kernel parameters of ``n`` float32 buffers, slots 0..n-1."""
    return [UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), s) for s in range(n)]


def matmul(m: int, n: int, k: int) -> Case:
    out, a, b = bufs(3)
    i, j, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    dot = (a.index(i * k + r).load() * b.index(r * n + j).load()).reduce(r, op=Ops.ADD)
    return UOp.sink(out.index(i * n + j).store(dot)), lambda x, y: x @ y, [(m, k), (k, n)]


def reduce_2d(m: int, n: int, axis: int, op: Ops) -> Case:
    """out = x.(max or sum)(axis) over an (m, n) x: axis 0 reduces over the strided axis, axis 1 over the
    contiguous one (several rows stream at once when upcast)."""
    out, x = bufs(2)
    kept, reduced = (n, m) if axis == 0 else (m, n)
    o, r = UOp.range(kept, 0, AxisType.GLOBAL), UOp.range(reduced, 1, AxisType.REDUCE)
    red = x.index(r * n + o if axis == 0 else o * n + r).load().reduce(r, op=op)
    ref = np.max if op is Ops.MAX else np.sum
    return UOp.sink(out.index(o).store(red)), lambda a: ref(a, axis=axis), [(m, n)]


def col_max(m: int, n: int) -> Case:
    return reduce_2d(m, n, 0, Ops.MAX)


def col_sum_and_copy(m: int, n: int) -> Case:
    """out[j] = sum_i x[i, j] + x[0, j] * 2 beside out[n + j] = x[m - 1, j]: one store without a reduction."""
    out, x = bufs(2)
    j, r = UOp.range(n, 0, AxisType.GLOBAL), UOp.range(m, 1, AxisType.REDUCE)
    red = x.index(r * n + j).load().reduce(r, op=Ops.ADD) + x.index(j).load() * 2.0
    last = out.index(j + n).store(x.index(j + (m - 1) * n).load())
    return (UOp.sink(out.index(j).store(red), last),
            lambda a: np.concatenate([a.sum(axis=0) + a[0] * 2, a[-1]]), [(m, n)])  # fmt: skip


def row_sum(m: int, n: int) -> Case:
    return reduce_2d(m, n, 1, Ops.ADD)


def row_sq_dev(m: int, n: int) -> Case:
    """out[i] = sum_k (x[i, k] - y[i])^2: a row value broadcast across the reduction's lanes."""
    out, x, y = bufs(3)
    i, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.REDUCE)
    d = x.index(i * n + r).load() - y.index(i).load()
    return (UOp.sink(out.index(i).store((d * d).reduce(r, op=Ops.ADD))),
            lambda a, b: ((a - b[:, None]) ** 2).sum(axis=1), [(m, n), (m,)])  # fmt: skip


def scaled(n: int) -> Case:
    out, x = bufs(2)
    i = UOp.range(n, 0, AxisType.GLOBAL)
    return UOp.sink(out.index(i).store(x.index(i).load() * 2.0 + 1.0)), lambda a: a * 2 + 1, [(n,)]


def run_ast(
    device: str, ast: UOp, ref: Callable[..., np.ndarray], shapes: list[tuple[int, ...]], opts: list[Opt] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Compile ``ast`` with ``opts`` (None: the heuristics), run it on ``device``; (result, numpy's)."""
    dev = Device[device]
    if opts is not None and built_for(device) < (1, 1):
        opts = [o for o in opts if o.op is not T]  # THREAD (a trailing core_id per chunk) came with plugin API 1.1
    spec = get_program(ast, dev.renderer, dev.compiler, opts)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = ref(*xs)
    out = Buffer(dev.runtime, want.size, dtypes.float32)
    ins = [Buffer(dev.runtime, x.size, dtypes.float32) for x in xs]
    for b, x in zip(ins, xs):
        b.copyin(x.ravel())
    prog = dev.runtime.load(spec.name, spec.lib)
    g, loc = spec.launch_dims()
    prog(out.handle, *[b.handle for b in ins], global_size=g, local_size=loc)
    dev.runtime.synchronize()
    return out.numpy().reshape(want.shape), want


def claimed(device: str) -> frozenset[OptOps]:
    """The opts ``device``'s renderer kind takes."""
    if Device[device].renderer.global_max is None:
        return frozenset({U, R, S, I, B, P, T})
    return frozenset({U, R, S, I, B, P, L, G, GT})


CASES = [
    ("matmul 7x13x5", matmul(7, 13, 5), [[Opt(U, 0, 4)], [Opt(U, 1, 3), Opt(U, 0, 2)], [Opt(R, 0, 2)], [Opt(S, 0, 1)]]),
    ("matmul 9x12x300 swapped tile", matmul(9, 12, 300), [[Opt(U, 0, 2), Opt(U, 1, 4), Opt(S, 0, 1), Opt(U, 0, 3)]]),
    ("matmul 16^3", matmul(16, 16, 16), [[Opt(U, 0, 4), Opt(U, 1, 8), Opt(R, 0, 4)], [Opt(R, 0, 16)]]),
    ("matmul 13x7x1003", matmul(13, 7, 1003), [[Opt(R, 0, 8), Opt(U, 0, 4)], [Opt(R, 0, 3)]]),
    ("col max 13x7", col_max(13, 7), [[Opt(U, 0, 4)], [Opt(R, 0, 4), Opt(U, 0, 7)]]),
    (
        "col max 13x7 inner",
        col_max(13, 7),
        [[Opt(I, 0, 4)], [Opt(I, 0, 7), Opt(R, 0, 4)], [Opt(U, 0, 2), Opt(I, 0, 3)]],
    ),
    ("row sum 13x2047", row_sum(13, 2047), [[Opt(U, 0, 8), Opt(R, 0, 8)], [Opt(U, 0, 4), Opt(R, 0, 16)]]),
    ("row sum 7x13", row_sum(7, 13), [[Opt(U, 0, 4), Opt(R, 0, 8)], [Opt(U, 0, 7), Opt(R, 0, 4)]]),
    ("row sq dev 13x2047", row_sq_dev(13, 2047), [[Opt(U, 0, 8), Opt(R, 0, 8)], [Opt(U, 0, 2), Opt(R, 0, 4)]]),
    (
        "col sum 2047x13 inner",
        col_sum_and_copy(2047, 13),
        [[Opt(I, 0, 13), Opt(R, 0, 8)], [Opt(I, 0, 8), Opt(R, 0, 7)]],
    ),
    ("col sum 7x13 inner", col_sum_and_copy(7, 13), [[Opt(I, 0, 13)], [Opt(R, 0, 2), Opt(I, 0, 5)], [Opt(I, 0, 4)]]),
    ("matmul 7x13x5 inner", matmul(7, 13, 5), [[Opt(I, 1, 4), Opt(U, 0, 2)], [Opt(R, 0, 2), Opt(I, 0, 7)]]),
    ("matmul 7x13x5 blocked", matmul(7, 13, 5), [[Opt(B, 0, 2)], [Opt(U, 0, 4), Opt(B, 0, 3), Opt(S, 0, 1)]]),
    (
        "matmul 13x7x1003 blocked tile",
        matmul(13, 7, 1003),
        [[Opt(B, 0, 64), Opt(U, 0, 4), Opt(R, 0, 4)], [Opt(U, 1, 7), Opt(U, 0, 2), Opt(B, 0, 100), Opt(R, 0, 3)]],
    ),
    (
        "matmul 7x13x5 packed",
        matmul(7, 13, 5),
        [[Opt(U, 0, 2), Opt(U, 1, 4), Opt(S, 0, 1), Opt(P, 1, 0)],
         [Opt(S, 0, 1), Opt(U, 1, 3), Opt(R, 0, 2), Opt(P, 1, 0)],
         [Opt(U, 0, 4), Opt(U, 1, 4), Opt(P, 0, 0)]],
    ),
    (
        "matmul 13x7x1003 blocked and packed",
        matmul(13, 7, 1003),
        [[Opt(B, 0, 100), Opt(U, 1, 7), Opt(U, 0, 2), Opt(S, 0, 1), Opt(P, 1, 0)],
         [Opt(U, 0, 4), Opt(B, 0, 64), Opt(R, 0, 4), Opt(P, 0, 0)]],
    ),
]  # fmt: skip
CPU_OPTS = [[Opt(T, 0, 2)], [Opt(T, 0, 3), Opt(U, 0, 2)], [Opt(U, 0, 2), Opt(T, 0, 4)]]
GPU_OPTS = [[Opt(L, 0, 4)], [Opt(G, 0, 4)], [Opt(GT, 0, 3), Opt(L, 0, 2)], [Opt(U, 0, 2), Opt(G, 0, 2)]]


@pytest.mark.parametrize("name,case,opt_lists", CASES, ids=[c[0] for c in CASES])
def test_opts_match_numpy(device: str, name: str, case: Case, opt_lists: list[list[Opt]]) -> None:
    ast, ref, shapes = case
    extra = CPU_OPTS if T in claimed(device) else GPU_OPTS
    for opts in [*opt_lists, *extra, None]:
        try:
            got, want = run_ast(device, ast, ref, shapes, opts)
        except OptError:
            assert opts is not None and any(o.op in (G, GT) for o in opts)
            assert name.startswith("col") or any(o.op is I for o in opts)
            continue  # grouping needs a REDUCE that the opts still leave room for
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} with {opts}")


@pytest.mark.parametrize("n", [7, 13, 1000003])
def test_masked_tails_on_odd_sizes(device: str, n: int) -> None:
    ast, ref, shapes = scaled(n)
    opts = [Opt(U, 0, 4), Opt(T, 0, 2)] if T in claimed(device) else [Opt(U, 0, 4), Opt(L, 0, 2)]
    got, want = run_ast(device, ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("m,n", [(7, 13), (13, 7), (1000003, 3)])
def test_inner_loops_on_odd_sizes(device: str, m: int, n: int) -> None:
    """A strided sum with INNER chunks that do not divide the row (masked tails), threaded on CPU."""
    if m > 1000 and device != "CPU":
        pytest.skip("a million-row loop is for native code; the other devices run the small cases")
    ast, ref, shapes = col_sum_and_copy(m, n)
    cpu = T in claimed(device)
    for opts in ([Opt(I, 0, 2), Opt(R, 0, 4)], [Opt(I, 0, 2), Opt(T, 0, 2)] if cpu else [Opt(I, 0, n)]):
        got, want = run_ast(device, ast, ref, shapes, opts)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=f"{opts}")


@pytest.mark.parametrize("k", [7, 13, 1000003])
def test_blocked_reductions_on_odd_sizes(device: str, k: int) -> None:
    """BLOCK: blocks that do not divide the reduction (a masked last block) add up to the whole sum, with a
    register tile and split across threads or a workgroup."""
    if k > 1000 and device != "CPU":
        pytest.skip("a million-long reduction is for native code; the other devices run the small cases")
    ast, ref, shapes = matmul(5, 9, k)
    split = Opt(T, 0, 2) if T in claimed(device) else Opt(L, 0, 2)
    for opts in ([Opt(B, 0, 2)], [Opt(U, 1, 4), Opt(B, 0, max(2, k // 3)), split, Opt(S, 0, 1)]):
        got, want = run_ast(device, ast, ref, shapes, opts)
        # float32 sums of a million products in another order than numpy's pairwise one differ by ~1e-4
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2, err_msg=f"{opts}")


@pytest.mark.parametrize("k", [7, 13, 1000003])
def test_packed_panels_on_odd_sizes(device: str, k: int) -> None:
    """PACK: a panel of B copied per column tile (masked column and row tails: the copy keeps the gate and pad),
    over a reduction blocked where the panel would not fit, split across threads on CPU; and A's tile packed in
    the default loop order."""
    if k > 1000 and device != "CPU":
        pytest.skip("a million-long reduction is for native code; the other devices run the small cases")
    ast, ref, shapes = matmul(5, 9, k)
    tile = [Opt(U, 1, 4), Opt(U, 0, 2), *([Opt(B, 0, 1000)] if k > 1000 else [])]
    split = [Opt(T, 0, 2)] if T in claimed(device) else []
    for opts in ([*tile, *split, Opt(S, 0, 1), Opt(P, 1, 0)], [*tile, *split, Opt(P, 0, 0)]):
        got, want = run_ast(device, ast, ref, shapes, opts)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2, err_msg=f"{opts}")


def test_opts_of_the_other_kind_are_refused(device: str) -> None:
    """An opt the renderer kind does not take is an OptError naming the device, never a wrong kernel."""
    ast, _, _ = matmul(8, 8, 8)
    other = {U, R, L, G, GT, T} - claimed(device)
    ren = Device[device].renderer
    for op in sorted(other, key=lambda o: o.name):
        axis = 0
        with pytest.raises(OptError, match=ren.device):
            get_program(ast, ren, Device[device].compiler, [Opt(op, axis, 2)])
