"""The stash pass (uops.codegen.stash): a row kernel's costly summand is stored into the output once and read back,
not computed again; where it must not apply, the kernel is left as it is."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.opt import Opt, OptOps
from uops.codegen.stash import stash_row_values
from uops.plugins import Device
from uops.testing.kit.test_opts import bufs, run_ast


def _softmax_rows(m: int, n: int, out_slot: int = 0, x_slot: int = 1) -> UOp:
    """out[i, j] = exp(x[i, j] - max_k x[i, k]) / sum_k exp(x[i, k] - max), as the scheduler fuses it."""
    b = bufs(2)
    out, x = b[out_slot], b[x_slot]
    i, j = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL)
    r1, r2 = UOp.range(n, 2, AxisType.REDUCE), UOp.range(n, 3, AxisType.REDUCE)
    mx = x.index(i * n + r1).load().reduce(r1, op=Ops.MAX)

    def e(k: UOp) -> UOp:
        return ((x.index(i * n + k).load() - mx) * (1 / math.log(2))).exp2()

    return UOp.sink(out.index(i * n + j).store(e(j) / e(r2).reduce(r2, op=Ops.ADD)))


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _count(ast: UOp, op: Ops) -> int:
    return sum(u.op is op for u in ast.toposort())


@pytest.mark.parametrize("m,n", [(7, 300), (16, 2048), (3, 17)])
def test_a_softmax_row_computes_its_exponential_once_and_matches_numpy(m: int, n: int) -> None:
    ast = _softmax_rows(m, n)
    cpu = Device["CPU"].renderer
    stashed = stash_row_values(ast, cpu)
    assert (_count(ast, Ops.EXP2), _count(stashed, Ops.EXP2)) == (2, 1)
    assert _count(stashed, Ops.AFTER) == 2  # the reads of the stored values wait for their stores
    got, want = run_ast("CPU", ast, _softmax_ref, [(m, n)], None)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    with_pass, without = (_lowered_exp2s(ast, keep) for keep in (True, False))
    assert with_pass < without and without - with_pass in (1, 2), (with_pass, without)  # the output loop's ones


def _lowered_exp2s(ast: UOp, stash: bool) -> int:
    """EXP2s in the kernel lowered with the heuristics' opts, with or without the stash pass."""
    from uops.codegen.heuristics import hand_coded_opts
    from uops.codegen.lowerer import LOWERING, LowerContext, run_passes

    ren = Device["CPU"].renderer
    passes = [p for p in LOWERING if stash or p[0] != "stash"]
    return _count(run_passes(ast, LowerContext(ren, hand_coded_opts(ast, ren)), passes), Ops.EXP2)


@pytest.mark.parametrize(
    "opts",
    [
        [Opt(OptOps.THREAD, 0, 2)],  # 9 rows in 2 chunks: the last chunk's extra row must not store into row 0
        [Opt(OptOps.UNROLL, 0, 16)],  # a masked unroll of the max: what reads the max is not gated by its lanes
        [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 1, 4)],
        [Opt(OptOps.INNER, 1, 40), Opt(OptOps.UNROLL, 1, 8), Opt(OptOps.UPCAST, 0, 4)],
    ],
    ids=str,
)
def test_the_stashed_softmax_matches_numpy_under_opts_that_split_its_axes(opts: list[Opt]) -> None:
    ast = _softmax_rows(9, 40)
    assert stash_row_values(ast, Device["CPU"].renderer, opts) is not ast
    got, want = run_ast("CPU", ast, _softmax_ref, [(9, 40)], opts)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_where_the_pass_does_not_apply_the_kernel_is_left_as_it_is() -> None:
    cpu = Device["CPU"].renderer
    softmax = _softmax_rows(8, 64)
    assert stash_row_values(softmax, Device["CUDA"].renderer) is softmax  # threads, not a loop over the row
    out, x = bufs(2)
    i, j, r = UOp.range(8, 0, AxisType.GLOBAL), UOp.range(64, 1, AxisType.GLOBAL), UOp.range(64, 2, AxisType.REDUCE)
    cheap = UOp.sink(out.index(i * 64 + j).store(x.index(i * 64 + j).load() / x.index(i * 64 + r).load().reduce(r)))
    assert stash_row_values(cheap, cpu) is cheap  # a load costs less to read again than to store and load
    in_place = _softmax_rows(8, 64, out_slot=0, x_slot=0)
    assert stash_row_values(in_place, cpu) is in_place  # the output is also the input: a stored value would clobber it
    half = UOp(Ops.DEFINE_GLOBAL, dtypes.float16.ptr(), (), 0)
    store = softmax.src[0]
    narrowed = UOp.sink(half.index(store.src[0].src[1]).store(store.src[1].cast(dtypes.float16)))
    assert stash_row_values(narrowed, cpu) is narrowed  # float16 would round the value the last pass reads back
    partial = [Opt(OptOps.INNER, 1, 32)]
    assert stash_row_values(softmax, cpu, partial) is softmax  # a row in two chunks: each would redo the reductions


@pytest.mark.parametrize("shape", [(5, 77), (2, 3, 129), (1, 4096)])
def test_tensor_softmax_and_an_in_place_softmax_match_numpy(shape: tuple[int, ...]) -> None:
    from uops import Tensor

    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32) * 4
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    t = Tensor(x, device="CPU")
    np.testing.assert_allclose(t.softmax(-1).numpy(), want, rtol=1e-5, atol=1e-7)
    t.assign(t.softmax(-1))
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-7)
