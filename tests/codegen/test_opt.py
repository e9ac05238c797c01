"""Kernel opts: the heuristics, opts that do not fit, THREAD worker counts, random opt sequences on fuzzed programs.

The opts each renderer kind takes, run on every device against numpy, are the conformance kit's
(`uops.testing.kit.test_opts`)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, note

from tests.frontend.test_fuzz import Program, check, fuzz_settings, programs
from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.heuristics import hand_coded_opts
from uops.codegen.opt import Opt, OptError, OptOps, apply_opt, apply_opts
from uops.codegen.program import get_program
from uops.compiler.cache import LRU
from uops.plugins import Device
from uops.renderer import Renderer
from uops.testing.kit.test_opts import bufs, col_max, matmul, row_sq_dev, row_sum, run_ast


def _avx2() -> Renderer:
    """The CPU renderer with AVX2's 32-byte vectors, whatever this host has: the decisions asserted below are
    this target's (an AVX-512 host's are tests/test_gemm_shapes.py's)."""
    from uops_cpu_clang.renderer import ClangRenderer

    return ClangRenderer(Device["CPU"].renderer.target)


U, R, L, G, GT, T = OptOps.UPCAST, OptOps.UNROLL, OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP, OptOps.THREAD
S = OptOps.SWAP
I, B, P = OptOps.INNER, OptOps.BLOCK, OptOps.PACK


def test_strided_reductions_stream_rows_through_an_inner_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sum over axis 0 on CPU: the contiguous output axis is an INNER loop, rows unrolled; a sum of loads that fits in
    L2 runs on one core, a bigger one in one chunk per thread."""
    monkeypatch.setenv("UOPS_THREADS", "2")
    ast = col_max(256, 2048)[0]
    cpu = Device["CPU"].renderer
    opts = hand_coded_opts(ast, cpu)
    assert opts == [Opt(I, 0, 2048), Opt(R, 0, 8)], opts
    src = get_program(ast, cpu, Device["CPU"].compiler, opts).src
    assert src.count("for (") == 4, src  # accumulators cleared, rows with the INNER loop inside, stores
    assert "acc0[2048]" in src, src  # the eight unrolled rows are added up before their element's accumulator
    assert hand_coded_opts(col_max(2048, 2048)[0], cpu) == [Opt(I, 0, 1024), Opt(R, 0, 8), Opt(T, 0, 2)]
    assert hand_coded_opts(col_max(4096, 4096)[0], cpu) == [Opt(I, 0, 2048), Opt(R, 0, 8), Opt(T, 0, 2)]
    assert not any(o.op is I for o in hand_coded_opts(ast, Device["CUDA"].renderer))


def test_batched_vector_matrix_keeps_its_lanes_unrolled_by_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """p @ V per head (decode attention): the value columns fill the vectors, so the reduction is not unrolled
    (its accumulators would interleave with the lanes); the result still matches numpy."""
    monkeypatch.setenv("UOPS_THREADS", "1")
    heads, ctx, dim = 6, 256, 64
    out, p, v = bufs(3)
    h, d = UOp.range(heads, 0, AxisType.GLOBAL), UOp.range(dim, 1, AxisType.GLOBAL)
    r = UOp.range(ctx, 2, AxisType.REDUCE)
    dot = (p.index(h * ctx + r).load() * v.index(h * ctx * dim + r * dim + d).load()).reduce(r, op=Ops.ADD)
    ast = UOp.sink(out.index(h * dim + d).store(dot))
    for ren in (_avx2(), Device["CPU"].renderer):
        opts = hand_coded_opts(ast, ren)
        assert any(o.op is U and o.axis == 1 for o in opts), opts
        assert not any(o.op is R for o in opts), opts
    got, want = run_ast(
        "CPU", ast, lambda pn, vn: (pn @ vn).reshape(heads, dim), [(heads, 1, ctx), (heads, ctx, dim)], None
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _times_transposed(m: int, n: int, k: int, epilogue: bool = False) -> UOp:
    """``x @ w.T``: both inputs read contiguously along the reduction."""
    out, a, b, c, ids = bufs(5)
    i, j, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    dot = (a.index(i * k + r).load() * b.index(j * k + r).load()).reduce(r, op=Ops.ADD)
    if epilogue:  # a bias, and a residual read through token ids (a fused embedding): row-contiguous, not reduced
        dot = dot + c.index(j).load() + c.index(ids.index(i).load().cast(dtypes.int32) * n + j).load()
    return UOp.sink(out.index(i * n + j).store(dot))


def test_a_matmul_with_transposed_weights_is_packed_like_a_plain_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """``x @ w.T`` with torch's (out, in) weights: its columns become the vector axis once PACK copies the
    strips into (K, columns) panels; a few rows (decode) keep the unrolled stream along the contiguous K."""
    monkeypatch.setenv("UOPS_THREADS", "1")
    nt = _times_transposed
    for ren in (_avx2(), Device["CPU"].renderer):
        opts = hand_coded_opts(nt(256, 384, 256), ren)
        assert {o.axis for o in opts if o.op is U} == {0, 1} and any(o.op is P for o in opts), opts
        assert hand_coded_opts(nt(256, 384, 256, epilogue=True), ren) == opts
        few = hand_coded_opts(nt(3, 384, 256), ren)
        assert any(o.op is R for o in few) and not any(o.op is P for o in few), few
    for m, n, k in ((256, 384, 256), (33, 100, 77), (8, 64, 384), (3, 96, 128)):
        got, want = run_ast("CPU", nt(m, n, k), lambda x, w: x @ w.T, [(m, k), (n, k)], None)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_product_read_along_a_long_reduction_is_vectorized_along_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``x @ w.T`` with a few rows and a long K (both inputs contiguous along it): the reduction is unrolled by one
    vector (one vector accumulator per output of the tile), with a tile of each input's outputs inside the register
    budget; a short reduction, a K no vector divides and the packed many-row case keep their own opts."""
    monkeypatch.setenv("UOPS_THREADS", "1")
    from uops_cpu_clang.renderer import ClangRenderer

    for vector_bytes, tile in ((32, {0: 4, 1: 2}), (64, {0: 4, 1: 4})):
        ren = ClangRenderer(Device["CPU"].renderer.target, vector_bytes=vector_bytes)
        opts = hand_coded_opts(_times_transposed(4, 40, 2048), ren)
        assert Opt(R, 0, vector_bytes // 4) in opts and {o.axis: o.amount for o in opts if o.op is U} == tile, opts
        for m, n, k in ((4, 40, 512), (4, 40, 2050), (256, 384, 2048)):
            assert Opt(R, 0, vector_bytes // 4) not in hand_coded_opts(_times_transposed(m, n, k), ren), (m, n, k)
    for m, n, k in ((4, 40, 2048), (7, 33, 1024), (2, 3, 4096)):
        got, want = run_ast("CPU", _times_transposed(m, n, k), lambda x, w: x @ w.T, [(m, k), (n, k)], None)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_row_sums_stream_several_rows_where_the_row_alone_cannot_keep_the_loads_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sum over the contiguous axis on CPU: a row its full unroll divides streams alone (more rows would only be
    more memory streams); rows that share an operand (a matrix-vector product's vector) or whose unroll is short
    stream eight at once, one vector accumulator each. A max or an exp in the step (computed lane by lane) keeps
    one row at a time."""
    monkeypatch.setenv("UOPS_THREADS", "1")
    cpu = _avx2()
    assert hand_coded_opts(row_sum(2048, 2048)[0], cpu) == [Opt(R, 0, 16)]
    assert hand_coded_opts(row_sq_dev(1000, 512)[0], cpu) == [Opt(R, 0, 16)]
    assert hand_coded_opts(row_sum(2048, 64)[0], cpu) == [Opt(R, 0, 16)]
    assert hand_coded_opts(row_sum(1024, 2050)[0], cpu)[0] == Opt(U, 0, 8)  # no unroll divides 2050
    assert hand_coded_opts(row_sum(13, 2050)[0], cpu)[0] == Opt(U, 0, 2)  # 8 or 4 would recompute over 1/8
    out, x, v = bufs(3)
    i, r = UOp.range(1024, 0, AxisType.GLOBAL), UOp.range(2048, 1, AxisType.REDUCE)
    matvec = UOp.sink(out.index(i).store((x.index(i * 2048 + r).load() * v.index(r).load()).reduce(r, op=Ops.ADD)))
    assert hand_coded_opts(matvec, cpu) == [Opt(U, 0, 8), Opt(R, 0, 8)]
    row = x.index(i * 2048 + r).load()
    for red in (row.reduce(r, op=Ops.MAX), row.exp2().reduce(r, op=Ops.ADD)):
        opts = hand_coded_opts(UOp.sink(out.index(i).store(red)), cpu)
        assert not any(o.op is U for o in opts), opts
    assert not any(o.op is U for o in hand_coded_opts(row_sum(2048, 2050)[0], Device["CUDA"].renderer))
    monkeypatch.setenv("UOPS_THREADS", "2")
    assert hand_coded_opts(row_sum(256, 2048)[0], cpu) == [Opt(R, 0, 16)]  # one core: fits in L2
    assert hand_coded_opts(row_sum(2048, 2048)[0], cpu) == [Opt(R, 0, 16), Opt(T, 0, 2)]
    assert hand_coded_opts(row_sum(256, 2050)[0], cpu)[-1] != Opt(T, 0, 2)  # rows streamed, one core
    assert hand_coded_opts(row_sq_dev(2048, 2048)[0], cpu)[-1] == Opt(T, 0, 2)  # more than loads: threaded
    for ast, ref, shapes in (
        row_sum(64, 2048),
        row_sum(13, 2050),
        (matvec, lambda a, b: a @ b, [(1024, 2048), (2048,)]),
    ):
        got, want = run_ast("CPU", ast, ref, shapes, None)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_heuristics_produce_register_tiles_and_threads() -> None:
    ast, ref, shapes = matmul(64, 64, 64)
    cpu, cuda = _avx2(), Device["CUDA"].renderer
    opts = hand_coded_opts(ast, cpu)
    ups = {o.axis: o.amount for o in opts if o.op is U}
    assert ups.get(1, 1) >= 8 and ups.get(0, 1) >= 2, opts  # a tile, widest on the contiguous axis
    assert not any(o.op is T for o in opts), opts  # 64^3 is done before the workers wake up
    if cpu.threads > 1:
        assert any(o.op is T for o in hand_coded_opts(matmul(256, 256, 256)[0], cpu))
    short_k = hand_coded_opts(matmul(64, 64, 128)[0], cpu)
    assert not any(o.op in (S, P, B) for o in short_k), short_k  # B's strip stays in L1 as it is
    assert not any(o.op in (S, P, B) for o in hand_coded_opts(matmul(64, 64, 512)[0], cpu))  # B (128 KiB) in L2
    mid_k = hand_coded_opts(matmul(64, 512, 512)[0], cpu)
    # column tiles outermost, after the rows are split across cores, each strip of B packed into one panel
    assert mid_k[-2:] == [Opt(S, 0, 1), Opt(P, 1, 0)], mid_k
    long_k = hand_coded_opts(matmul(64, 64, 16384)[0], cpu)
    assert long_k[-3:] == [Opt(B, 0, 8192), Opt(S, 0, 1), Opt(P, 1, 0)], long_k  # blocks where a strip would not fit
    odd_k = hand_coded_opts(matmul(64, 64, 16383)[0], cpu)
    assert odd_k[-3:] == [Opt(B, 0, 5461), Opt(S, 0, 1), Opt(P, 1, 0)], odd_k  # blocks that divide: none masked
    for (n, k), opts in (((512, 512), mid_k), ((64, 16384), long_k), ((64, 16383), odd_k)):
        got, want = run_ast("CPU", *matmul(64, n, k), opts)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    gpu_opts = hand_coded_opts(ast, cuda)
    assert any(o.op is L for o in gpu_opts) and not any(o.op is T for o in gpu_opts)
    small_out = col_max(4096, 4)[0]
    out, x = bufs(2)
    r = UOp.range(4096, 0, AxisType.REDUCE)
    row_sum = UOp.sink(out.index(UOp.const(dtypes.index, 0)).store(x.index(r).load().reduce(r)))
    assert any(o.op is G for o in hand_coded_opts(row_sum, cuda))
    assert hand_coded_opts(small_out, Device["PYTHON"].renderer) == []


@pytest.mark.parametrize(
    "opts,device,message",
    [
        ([Opt(U, 5, 2)], "CPU", "2 output axes, no axis 5"),
        ([Opt(R, 1, 2)], "CPU", "1 reduce axes, no axis 1"),
        ([Opt(U, 0, 64)], "CPU", "larger than axis"),
        ([Opt(U, 0, 1)], "CPU", "at least 2"),
        ([Opt(S, 0, 0)], "CPU", "SWAP needs another output axis"),
        ([Opt(S, 1, 2)], "CPU", "SWAP needs another output axis"),
        ([Opt(L, 0, 4)], "CPU", "no workgroups"),
        ([Opt(G, 0, 4)], "CPU", "no workgroups"),
        ([Opt(T, 0, 2)], "PYTHON", "THREAD is for CPU-style"),
        ([Opt(T, 0, 2), Opt(T, 1, 2)], "CPU", "already split across threads"),
        ([Opt(U, 0, 16), Opt(U, 1, 16), Opt(R, 0, 2)], "CPU", "register lanes exceed"),
        ([Opt(G, 0, 4), Opt(GT, 0, 2)], "PYTHON", "only one reduce axis can be grouped"),
        ([Opt(I, 0, 4), Opt(I, 1, 4)], "CPU", "already has an INNER loop"),
        ([Opt(I, 0, 4), Opt(G, 0, 4)], "PYTHON", "grouped reduction does not combine"),
        ([Opt(G, 0, 4), Opt(I, 0, 4)], "PYTHON", "does not combine with a grouped reduction"),
        ([Opt(L, 0, 32), Opt(L, 1, 32), Opt(G, 0, 32)], "PYTHON", "threads per workgroup"),
        ([Opt(B, 0, 8), Opt(B, 0, 2)], "CPU", "already blocked"),
        ([Opt(B, 0, 32)], "CPU", "leaves one block"),
        ([Opt(B, 0, 8), Opt(I, 0, 4)], "CPU", "BLOCKed reduction does not combine with INNER"),
        ([Opt(I, 0, 4), Opt(B, 0, 8)], "CPU", "does not combine with INNER or GROUP"),
        ([Opt(B, 0, 8), Opt(G, 0, 4)], "PYTHON", "does not combine with GROUP"),
        ([Opt(S, 0, 1), Opt(P, 1, 0), Opt(U, 0, 2)], "CPU", "PACK comes after every other opt"),
        ([Opt(P, 1, 2)], "CPU", "PACK takes amount 0"),
        ([Opt(P, 2, 0)], "CPU", "reductions read 2 inputs, no input 2"),
        ([Opt(U, 1, 4), Opt(P, 1, 0)], "CPU", "depends on output axis 1, inside axis 0 .*SWAP"),
        ([Opt(I, 0, 4), Opt(P, 0, 0)], "CPU", "does not combine with INNER"),
        ([Opt(L, 0, 4), Opt(P, 0, 0)], "PYTHON", "does not combine with INNER, LOCAL or GROUP"),
    ],
)
def test_opts_that_do_not_fit_raise_opt_error(opts: list[Opt], device: str, message: str) -> None:
    ast = matmul(32, 32, 32)[0]
    with pytest.raises(OptError, match=message):
        apply_opts(ast, opts, Device[device].renderer)


def test_block_needs_a_plain_sum_stored_directly() -> None:
    cpu = Device["CPU"].renderer
    with pytest.raises(OptError, match="a sum over the axis directly"):
        apply_opts(col_max(64, 8)[0], [Opt(B, 0, 16)], cpu)  # a max: its blocks cannot be added up
    out, x = bufs(2)
    j, r = UOp.range(8, 0, AxisType.GLOBAL), UOp.range(64, 1, AxisType.REDUCE)
    scaled_sum = x.index(r * 8 + j).load().reduce(r) * 2.0
    with pytest.raises(OptError, match="a sum over the axis directly"):
        apply_opts(UOp.sink(out.index(j).store(scaled_sum)), [Opt(B, 0, 16)], cpu)
    in_place = (x.index(r * 8 + j).load() * out.index(j).load()).reduce(r)
    with pytest.raises(OptError, match="reads a buffer it writes"):
        apply_opts(UOp.sink(out.index(j).store(in_place)), [Opt(B, 0, 16)], cpu)


def test_pack_refuses_copies_that_do_not_fit_or_are_not_reused() -> None:
    cpu = Device["CPU"].renderer
    with pytest.raises(OptError, match="exceeds CPU's 524288 bytes"):
        apply_opts(matmul(8, 64, 16384)[0], [Opt(U, 1, 16), Opt(S, 0, 1), Opt(P, 1, 0)], cpu)
    out, x = bufs(2)
    i, r = UOp.range(8, 0, AxisType.GLOBAL), UOp.range(64, 1, AxisType.REDUCE)
    row_sums = UOp.sink(out.index(i).store(x.index(i * 64 + r).load().reduce(r)))
    with pytest.raises(OptError, match="no loop reuses a copy"):
        apply_opts(row_sums, [Opt(P, 0, 0)], cpu)
    twice = (x.index(i * 64 + r).load() * x.index(r).load()).reduce(r)
    with pytest.raises(OptError, match="read at 2 indices"):
        apply_opts(UOp.sink(out.index(i).store(twice)), [Opt(P, 0, 0)], cpu)
    padded = (i < 3).where(x.index(r).load(), 0.0).reduce(r)  # the lowering gates the load by i < 3
    with pytest.raises(OptError, match="no loop reuses a copy"):
        apply_opts(UOp.sink(out.index(i).store(padded)), [Opt(P, 0, 0)], cpu)
    with pytest.raises(OptError, match="reductions read 0 inputs"):
        apply_opts(UOp.sink(out.index(i).store(x.index(i).load())), [Opt(P, 0, 0)], cpu)


def test_a_packed_panel_is_one_copy_per_column_tile_read_by_vector_loads() -> None:
    """On CPU the copy runs between the column loop and the row loop (so every row tile reads one panel) and the
    panel is read with 8-wide vector loads."""
    ren, comp = _avx2(), Device["CPU"].compiler
    spec = get_program(matmul(64, 64, 64)[0], ren, comp, [Opt(U, 0, 4), Opt(U, 1, 16), Opt(S, 0, 1), Opt(P, 1, 0)])
    src = spec.src
    assert "float smem0[1024] __attribute__((aligned(32)));" in src, src
    col_loop, copy_at, row_loop = src.index("for (int ridx0 "), src.index("*(smem0+"), src.index("for (int ridx1 ")
    assert col_loop < copy_at < row_loop, src
    assert "float8 val" in src and "*((float8u*)(smem0+" in src, src


def test_inner_loops_are_bounded_and_flat() -> None:
    cpu = Device["CPU"].renderer
    with pytest.raises(OptError, match="16384 accumulators exceed the INNER limit"):
        apply_opts(col_max(64, 16384)[0], [Opt(I, 0, 4096), Opt(U, 0, 4)], cpu)
    with pytest.raises(OptError, match="accumulators exceed the INNER limit"):
        apply_opts(col_max(64, 16384)[0], [Opt(U, 0, 4), Opt(I, 0, 4096)], cpu)
    # unrolled rows join before the one accumulator of each element: no more accumulators than INNER's length
    apply_opts(col_max(64, 8192)[0], [Opt(R, 0, 4), Opt(I, 0, 8192)], cpu)
    out, x = bufs(2)
    j, r, s = UOp.range(8, 0, AxisType.GLOBAL), UOp.range(8, 1, AxisType.REDUCE), UOp.range(8, 2, AxisType.REDUCE)
    nested = (x.index(r * 8 + j).load() + x.index(s * 8 + j).load().reduce(s)).reduce(r)
    with pytest.raises(OptError, match="reduction inside another"):
        apply_opts(UOp.sink(out.index(j).store(nested)), [Opt(I, 0, 4)], cpu)


def test_opts_must_be_opt_objects() -> None:
    with pytest.raises(TypeError, match="list of Opt"):
        apply_opts(matmul(4, 4, 4)[0], [("UPCAST", 0, 2)], Device["CPU"].renderer)  # type: ignore[list-item]


def test_thread_count_comes_from_uops_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from uops_cpu_clang.renderer import cpu_threads

    monkeypatch.setenv("UOPS_THREADS", "3")
    assert cpu_threads() == 3
    monkeypatch.setenv("UOPS_THREADS", "zero")
    with pytest.raises(ValueError, match="UOPS_THREADS must be a positive integer"):
        cpu_threads()
    monkeypatch.delenv("UOPS_THREADS")
    assert cpu_threads() >= 1


def test_a_threaded_kernel_is_right_with_any_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    ast, ref, shapes = matmul(37, 16, 9)
    for n in ("1", "2", "3", "5"):  # 3: four chunks claimed unevenly
        monkeypatch.setenv("UOPS_THREADS", n)
        got, want = run_ast("CPU", ast, ref, shapes, [Opt(T, 0, 4), Opt(U, 1, 4)])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _random_opts(seed: int) -> Callable[[UOp, object], list[Opt]]:
    from uops.codegen.search import actions

    def pick(ast: UOp, ren) -> list[Opt]:  # type: ignore[no-untyped-def]
        rng = random.Random(seed)
        opts: list[Opt] = []
        cands = actions(ren)
        for _ in range(rng.randint(1, 3)):
            for _try in range(20):
                o = rng.choice(cands)
                try:
                    apply_opts(ast, [*opts, o], ren)
                except OptError:
                    continue
                opts.append(o)
                break
        return opts

    return pick


@fuzz_settings(25)
@given(p=programs(max_steps=5), seed=__import__("hypothesis").strategies.integers(0, 2**16))
def test_random_opt_sequences_on_fuzzed_programs(device: str, p: Program, seed: int) -> None:
    from uops.codegen import program
    from uops.frontend import realize

    note(f"program:\n{p!r}\nseed {seed}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program, "hand_coded_opts", _random_opts(seed))
        mp.setattr(realize, "_programs", LRU(64))  # the random opts must compile afresh
        check(p, device)


def test_debug_2_prints_each_launch_with_opts_and_rates() -> None:
    import os
    import subprocess
    import sys

    script = "from uops import Tensor; import numpy as np; a = Tensor(np.ones((64, 64), np.float32)); (a @ a).numpy()"
    env = {**os.environ, "UOPS_DEBUG": "2", "UOPS_BEAM": "0"}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "r_64_64_64" in ln)
    assert "GFLOP/s" in line and "GB/s" in line and "opts=[Opt(UPCAST" in line


def test_uops_compile_prints_the_chosen_opts() -> None:
    from tests.cli.test_cli import uops

    r = uops("compile", "a@b", "--opts", "--default-shape", "32,32")
    assert r.returncode == 0, r.stderr
    assert re.search(r"opts: \[Opt\(UPCAST, 0, [48]\), Opt\(UPCAST, 1, (16|32)\)", r.stdout), r.stdout


@pytest.mark.parametrize("shape,axis", [((7,), None), ((13,), None), ((1000003,), None), ((7, 1000003), 0),
                                        ((1000003, 7), 0), ((13, 7), 0)])  # fmt: skip
def test_threaded_sums_on_odd_sizes(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], axis: int | None) -> None:
    """Full sums (partials on threads, then a combine kernel) and strided sums, with any worker count."""
    from uops import Tensor
    from uops.frontend import realize

    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    want = x.astype(np.float64).sum(axis=axis)
    for n in ("1", "2", "3"):
        monkeypatch.setenv("UOPS_THREADS", n)
        monkeypatch.setattr(realize, "_programs", LRU(64))  # opts are chosen per worker count
        t = Tensor(x, device="CPU")
        got = t.sum(axis=axis) if axis is not None else t.sum()
        first = [s for s in got.schedule() if s.kind == "kernel"][0]
        opts = hand_coded_opts(first.ast, Device["CPU"].renderer)
        if x.size > 1 << 18 and n != "1" and axis is None:  # strided sums: see STREAM_THREAD_MIN_WORK
            assert any(o.op is T for o in opts), opts
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-3, err_msg=f"{n} threads, {opts}")


@pytest.mark.parametrize("m,n,k", [(1023, 1031, 1025), (1009, 1009, 1009), (257, 257, 257), (1000, 1000, 1000)])
def test_odd_sized_matmuls_get_a_register_tile(m: int, n: int, k: int) -> None:
    """Sizes without a divisor of the tile still get the 4x16 tile on CPU (masked, the last tile overlapping the
    one before it) and packed panels from a reduction of 512; a GPU-style renderer upcasts and takes a workgroup."""
    ast = matmul(m, n, k)[0]
    opts = hand_coded_opts(ast, _avx2())
    assert opts[:2] == [Opt(U, 0, 4), Opt(U, 1, 16)], opts
    assert any(o.op is P for o in opts) == (k >= 512), opts
    gpu = hand_coded_opts(ast, Device["CUDA"].renderer)
    assert any(o.op is U for o in gpu) and any(o.op is L for o in gpu), gpu


def test_an_overlapped_tile_gates_nothing_in_its_loops() -> None:
    """1009^3 with the 1024^3 opts: no load or store is gated (a masked tile once cost 8x), the row stores are
    whole vectors at odd addresses, and the result is numpy's; with BLOCK the tail is masked and gated instead."""
    ast, ref, shapes = matmul(37, 41, 29)
    opts = [Opt(U, 0, 4), Opt(U, 1, 16), Opt(T, 0, 2), Opt(S, 0, 1), Opt(P, 1, 0)]
    src = get_program(ast, _avx2(), Device["CPU"].compiler, opts).src
    assert " ? " not in src.replace("?alu", "") and "if (" not in src, src
    assert "*((float8u*)(data0+" in src, src
    blocked = [Opt(U, 0, 4), Opt(U, 1, 16), Opt(B, 0, 10), Opt(S, 0, 1), Opt(P, 1, 0)]
    for device in ("CPU", "PYTHON", "CUDA_EMU"):
        for o in (opts if device == "CPU" else [x for x in opts if x.op is not T], blocked):
            got, want = run_ast(device, ast, ref, shapes, o)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{device} {o}")
    with pytest.raises(OptError, match="writes some outputs twice"):
        tiled = apply_opt(ast, Opt(U, 1, 16), Device["CPU"].renderer, overlap=True)
        apply_opt(tiled, Opt(B, 0, 10), Device["CPU"].renderer)


@pytest.mark.parametrize(
    "shape,kernel,stride,padding",
    [((64, 16, 8, 8), 2, None, 0), ((4, 8, 15, 17), 2, None, 0), ((4, 8, 23, 29), 3, 2, 1), ((4, 8, 16, 16), 3, 1, 1)],
)
def test_small_windows_are_unrolled_whole_with_outputs_in_lanes(shape, kernel, stride, padding) -> None:
    """A pool's window (a reduction of 16 elements or fewer): each window axis unrolled whole and the last output
    axes upcast, where the heuristics had no opts at all; max and average pools still match numpy."""
    from uops import Tensor

    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    t = Tensor(x, device="CPU")
    for pooled in (t.max_pool2d(kernel, stride=stride, padding=padding), t.avg_pool2d(kernel, stride, padding)):
        (item,) = [k for k in pooled.schedule() if k.kind == "kernel"]
        opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
        assert [o.op for o in opts[:2]] == [R, R] and all(o.amount == kernel for o in opts[:2]), opts
        assert any(o.op is U for o in opts), opts
    s = stride or kernel
    xp = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)], constant_values=-np.inf)
    ho, wo = (xp.shape[2] - kernel) // s + 1, (xp.shape[3] - kernel) // s + 1
    win = np.stack([xp[:, :, i : i + s * ho : s, j : j + s * wo : s] for i in range(kernel) for j in range(kernel)])
    np.testing.assert_array_equal(t.max_pool2d(kernel, stride=stride, padding=padding).numpy(), win.max(0))
    win0 = np.where(np.isinf(win), 0, win)
    np.testing.assert_allclose(t.avg_pool2d(kernel, stride, padding).numpy(), win0.mean(0), rtol=1e-5, atol=1e-6)
    big = hand_coded_opts(matmul(64, 64, 64)[0], Device["CPU"].renderer)
    assert not any(o.op is R and o.amount == 64 for o in big)  # a long reduction keeps its loop
    (few,) = [k for k in Tensor(x[:1, :2, :6, :6], device="CPU").max_pool2d(2).schedule() if k.kind == "kernel"]
    assert hand_coded_opts(few.ast, Device["CPU"].renderer) == []  # 18 outputs: microseconds either way
