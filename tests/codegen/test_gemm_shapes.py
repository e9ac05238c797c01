"""GEMM shapes: odd, skinny and decode-sized matmuls against numpy, the heuristics' choices for them (register tile
per vector width, which axis is threaded, which input decides the loop order) and the MLP's epilogues staying fused.

The choices are asserted on explicit renderers (AVX2's 32-byte and AVX-512's 64-byte vectors), so they hold on any
host; the results run on this host's CPU and on the emulated backends."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Ops, Tensor
from uops.codegen.heuristics import hand_coded_opts, thread_axis
from uops.codegen.opt import Opt, OptOps, apply_opts
from uops.codegen.program import get_program
from uops.compiler.cache import LRU
from uops.plugins import Device
from uops.renderer import Renderer
from uops.testing.kit.test_opts import matmul, row_sum, run_ast

U, R, T, S, P, B, I = OptOps.UPCAST, OptOps.UNROLL, OptOps.THREAD, OptOps.SWAP, OptOps.PACK, OptOps.BLOCK, OptOps.INNER


def _cpu(vector_bytes: int) -> Renderer:
    from uops_cpu_clang.renderer import ClangRenderer

    return ClangRenderer(Device["CPU"].renderer.target, vector_bytes=vector_bytes)


def _kernels(x: Tensor) -> list:
    return [s for s in x.schedule() if s.kind == "kernel"]


# (M, K, N): a=None marks a 1-D left operand (decode's vector-matrix product)
SHAPES = [
    (1, 1, 1),
    (1, 4096, 4096),  # decode: one token through a 4096^2 projection
    (1, 1000, 77),
    (33, 1000, 77),  # odd: no tile divides
    (8, 2048, 512),  # skinny M, K large
    (512, 1024, 8),  # skinny N
    (7, 13, 11),  # primes
    (37, 101, 53),
    (64, 1, 96),  # K = 1
    (1, 64, 1),
    (257, 33, 1),  # N = 1: a matrix-vector product
    (130, 515, 66),
]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_shapes_match_numpy_on_cpu(m: int, k: int, n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from uops.frontend import realize

    rng = np.random.default_rng(m * 1000 + n)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    want = a.astype(np.float64) @ b
    for threads in ("1", "2"):
        monkeypatch.setenv("UOPS_THREADS", threads)
        monkeypatch.setattr(realize, "_programs", LRU(64))  # opts are chosen per worker count
        got = (Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()), err_msg=threads)
    if m == 1:  # the same product with a 1-D vector on the left
        got = (Tensor(a[0], device="CPU") @ Tensor(b, device="CPU")).numpy()
        np.testing.assert_allclose(got, want[0], rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("vector_bytes", [32, 64])
@pytest.mark.parametrize("m,n,k", [(33, 77, 1000), (1, 512, 777), (24, 96, 130), (5, 3, 301), (130, 66, 515)])
def test_heuristic_opts_for_both_vector_widths_match_numpy(vector_bytes: int, m: int, n: int, k: int) -> None:
    """Each target's chosen opts, compiled for this host (a 64-byte vector is two halves where AVX-512 is missing)."""
    ast, ref, shapes = matmul(m, n, k)
    opts = hand_coded_opts(ast, _cpu(vector_bytes))
    got, want = run_ast("CPU", ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=str(opts))


@pytest.mark.parametrize("device", ["PYTHON", "CUDA_EMU"])
@pytest.mark.parametrize("m,n,k", [(33, 77, 100), (1, 40, 257), (9, 1, 64), (1, 1, 1)])
def test_odd_and_skinny_matmuls_on_the_emulated_backends(device: str, m: int, n: int, k: int) -> None:
    ast, ref, shapes = matmul(m, n, k)
    got, want = run_ast(device, ast, ref, shapes, None)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_the_register_tile_fills_the_vector_registers() -> None:
    """AVX-512: 16 zmm accumulators, 4x64 where the rows are many and a 64-column strip of B packs whole, else 8x32;
    AVX2: 4x16 (8 ymm). Neither unrolls the reduction on top of the tile (more accumulators than registers spill:
    33x1000x77 ran 16x slower with an UNROLL of 4)."""
    flat, tall, avx2 = [Opt(U, 0, 4), Opt(U, 1, 64)], [Opt(U, 0, 8), Opt(U, 1, 32)], [Opt(U, 0, 4), Opt(U, 1, 16)]
    shapes = {(1024, 1024, 1024): flat, (512, 4096, 1024): flat, (1023, 1031, 1025): flat, (512, 1024, 4096): tall,
              (8, 4096, 4096): tall}  # fmt: skip
    for (m, n, k), wide in shapes.items():
        for vector_bytes, tile in ((64, wide), (32, avx2)):
            opts = hand_coded_opts(matmul(m, n, k)[0], _cpu(vector_bytes))
            assert opts[:2] == tile, (vector_bytes, m, n, k, opts)
            assert not any(o.op is R for o in opts), opts


def test_odd_sizes_take_the_register_tile_that_wastes_least(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the usual tile overlaps the outputs by more than an eighth (33x77 in 8x32 tiles computes 40x96), the
    tile with the fewest estimated cycles is taken: a row count that divides the rows, a narrower column tile; 24
    columns take a whole vector rather than 8 lanes of one. A shape the usual tile fits keeps it, as does one where
    the saving is small (63x67 in 8x16 tiles on AVX-512), and a tall one keeps its row tile (each row is a stream of
    A: 4096x4096x8 in 16x8 tiles ran 2.4x slower). One of 2^20 multiply-adds or more is split over the cores.
    Kernel alone, 2-core EPYC: 33x1000x77 0.066 ms before (8x32, one core), 0.031 after; 70x70x24 in 8x8 tiles
    0.0045 ms, in 8x16 0.0034; AVX2 code for 63x65x67 0.0078 ms in 4x16 tiles, 0.0068 in 7x8."""
    monkeypatch.setenv("UOPS_THREADS", "2")
    picks = {(33, 77, 1000): ([Opt(U, 0, 11), Opt(U, 1, 16)], [Opt(U, 0, 3), Opt(U, 1, 16)]),
             (7, 300, 512): ([Opt(U, 0, 7), Opt(U, 1, 32)], [Opt(U, 0, 7), Opt(U, 1, 8)]),
             (65, 65, 65): ([Opt(U, 0, 13), Opt(U, 1, 16)], [Opt(U, 0, 5), Opt(U, 1, 8)]),
             (63, 67, 65): ([Opt(U, 0, 8), Opt(U, 1, 16)], [Opt(U, 0, 7), Opt(U, 1, 8)]),
             (64, 64, 64): ([Opt(U, 0, 4), Opt(U, 1, 64)], [Opt(U, 0, 4), Opt(U, 1, 16)]),
             (70, 24, 70): ([Opt(U, 0, 8), Opt(U, 1, 16)], [Opt(U, 0, 4), Opt(U, 1, 8)]),
             (4096, 8, 4096): ([Opt(U, 0, 8), Opt(U, 1, 8)], [Opt(U, 0, 4), Opt(U, 1, 8)])}  # fmt: skip
    for (m, n, k), tiles in picks.items():
        for vector_bytes, tile in zip((64, 32), tiles, strict=True):
            opts = hand_coded_opts(matmul(m, n, k)[0], _cpu(vector_bytes))
            assert opts[:2] == tile, (vector_bytes, m, n, k, opts)
            assert any(o.op is T for o in opts) == (m * n * k >= 1 << 20), (vector_bytes, m, n, k, opts)
    rng = np.random.default_rng(33)
    for m, n, k in [mnk for mnk in picks if mnk[0] < 4096]:
        a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        np.testing.assert_allclose((Tensor(a, device="CPU") @ Tensor(b, device="CPU")).numpy(), a @ b, rtol=1e-4,
                                   atol=1e-3)  # fmt: skip


def test_wide_kernels_ask_clang_for_the_wide_registers() -> None:
    """A kernel with 64-byte vectors carries min_vector_width(512) (else clang splits them into 256-bit halves); one
    whose memory accesses are 8 wide keeps its accumulators 8 wide too (eight rows of float8 loads once paired into
    float16 accumulators whose lanes were then added one by one, 5x slower)."""
    ren, comp = _cpu(64), Device["CPU"].compiler
    src = get_program(matmul(64, 64, 64)[0], ren, comp, [Opt(U, 0, 8), Opt(U, 1, 32)]).src
    assert "min_vector_width(512)" in src and "float16 val" in src, src
    rows = get_program(row_sum(64, 512)[0], ren, comp, [Opt(U, 0, 8), Opt(R, 0, 8)]).src
    assert "float16" not in rows and "float8 alu" in rows, rows
    assert "min_vector_width" not in get_program(matmul(64, 64, 64)[0], _cpu(32), comp, [Opt(U, 1, 16)]).src


def test_decode_is_a_strided_reduction_threaded_over_its_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Vector x matrix: the matrix walks K with stride N, so its columns stream through an INNER loop of
    accumulators (not an UNROLL of K, which read one element per 16 KiB row: 30x slower), split across the cores."""
    monkeypatch.setenv("UOPS_THREADS", "2")
    x, w = Tensor.empty(4096, device="CPU"), Tensor.empty(4096, 4096, device="CPU")
    (kernel,) = _kernels(x @ w)
    for vector_bytes in (32, 64):
        opts = hand_coded_opts(kernel.ast, _cpu(vector_bytes))
        assert opts[0].op is I and not any(o.op is R and o.amount > 8 for o in opts), opts
        assert opts[-1] == Opt(T, 0, 2), opts
    # the matrix-vector product keeps reading rows: several at once, each unrolled along K
    (mv,) = _kernels(w @ x)
    opts = hand_coded_opts(mv.ast, _cpu(64))
    assert opts[:2] == [Opt(U, 0, 8), Opt(R, 0, 16)], opts


def test_threading_splits_the_axis_with_even_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """24 rows in tiles of 8 leave 3 row tiles for 2 cores: the 128 column tiles are split instead (timed 1.8x
    faster); a tall matrix splits its rows; a GEMM under 2^20 multiply-adds is not split at all (the workers cost
    more than they save). Chunks that copy nothing twice come four per core (claimed as workers come free); row
    chunks of a packed tile, which would each copy every strip of B, one per core."""
    monkeypatch.setenv("UOPS_THREADS", "2")
    ren = _cpu(64)
    skinny = hand_coded_opts(matmul(24, 4096, 4096)[0], ren)
    assert Opt(T, 1, 8) in skinny, skinny
    tall = hand_coded_opts(matmul(4096, 8, 4096)[0], ren)
    assert Opt(T, 0, 8) in tall, tall
    # a packed tile splits its column tiles when they share out as evenly as the rows (each core packs its strips)
    square = hand_coded_opts(matmul(1024, 1024, 1024)[0], ren)
    assert Opt(T, 1, 8) in square and square[-1] == Opt(P, 1, 0), square
    # 768 columns are 12 tiles of 64: six chunks, as many per core (eight of uneven size ran 1.33x slower)
    assert Opt(T, 1, 6) in hand_coded_opts(matmul(512, 768, 1024)[0], ren)
    odd = hand_coded_opts(matmul(1023, 1031, 1025)[0], ren)  # 33 column tiles split unevenly, 128 row tiles do not
    assert Opt(T, 0, 2) in odd, odd
    assert not any(o.op is T for o in hand_coded_opts(matmul(63, 67, 65)[0], ren))
    tiled = apply_opts(matmul(24, 4096, 64)[0], [Opt(U, 0, 8), Opt(U, 1, 32)], ren)
    assert thread_axis(tiled, 2) == 1 and thread_axis(tiled, 3) == 0 and thread_axis(tiled, 200) is None
    assert thread_axis(tiled, 3, prefer=1) == 0  # a preference only breaks ties


def test_packing_and_blocks_only_where_they_pay() -> None:
    """B that stays in L2 is read in place; a masked (overlapped) tile is never BLOCKed (a blocked reduction would
    gate every tail load: 10x slower at 1023x1025x1031); a strip of B up to 512 KiB is packed whole."""
    ren = _cpu(64)
    assert not any(o.op in (S, P, B) for o in hand_coded_opts(matmul(33, 77, 1000)[0], ren))
    odd = hand_coded_opts(matmul(1023, 1031, 1025)[0], ren)
    assert any(o.op is P for o in odd) and not any(o.op is B for o in odd), odd
    mlp_down = hand_coded_opts(matmul(512, 1024, 4096)[0], ren)
    assert mlp_down[-2:] == [Opt(S, 0, 1), Opt(P, 1, 0)] and not any(o.op is B for o in mlp_down), mlp_down


def test_overlapping_windows_are_read_in_place_not_packed() -> None:
    """A 3x3 convolution in the flattened form (out channels x positions, summed over in channels and the kernel's
    rows and columns): its input's strip is compact (steps of Wp and 1 under 64 column lanes) and is not packed;
    the same tile over a matrix of the same size still packs its strip; both match numpy."""
    from uops import AxisType, Ops, UOp
    from uops.testing.kit.test_opts import bufs

    def conv(cout: int, cin: int, wp: int, rows: int) -> UOp:
        out, x, w = bufs(3)
        line = rows + 2 * wp + 2
        co, p = UOp.range(cout, 0, AxisType.GLOBAL), UOp.range(rows, 1, AxisType.GLOBAL)
        ci, kh, kw = (UOp.range(n, 2 + i, AxisType.REDUCE) for i, n in enumerate((cin, 3, 3)))
        prod = x.index(ci * line + kh * wp + kw + p).load() * w.index(co * cin * 9 + ci * 9 + kh * 3 + kw).load()
        return UOp.sink(out.index(co * rows + p).store(prod.reduce(ci, kh, kw, op=Ops.ADD)))

    ren = _cpu(64)
    opts = hand_coded_opts(conv(64, 64, 58, 8 * 58 * 58), ren)
    assert any(o.op is S for o in opts) and not any(o.op is P for o in opts), opts
    assert any(o.op is P for o in hand_coded_opts(matmul(64, 8 * 58 * 58, 576)[0], ren))
    cout, cin, wp, rows = 8, 4, 10, 3 * 10 * 10
    ast = conv(cout, cin, wp, rows)

    def ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        win = np.stack(
            [x[c, kh * wp + kw : kh * wp + kw + rows] for c in range(cin) for kh in range(3) for kw in range(3)]
        )
        return w.reshape(cout, cin * 9) @ win

    got, want = run_ast("CPU", ast, ref, [(cin, rows + 2 * wp + 2), (cout, cin, 3, 3)], hand_coded_opts(ast, ren))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_mlp_is_two_kernels_with_bias_and_relu_fused_and_tiled() -> None:
    """x @ w1 + b1, relu, @ w2 + b2: one kernel per matmul, its bias and activation in the kernel's stores, and the
    epilogue does not cost the matmul its register tile or its packed panel."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    w1, b1 = rng.standard_normal((96, 640)).astype(np.float32), rng.standard_normal(640).astype(np.float32)
    w2, b2 = rng.standard_normal((640, 48)).astype(np.float32), rng.standard_normal(48).astype(np.float32)
    tx, tw1, tb1, tw2, tb2 = (Tensor(v, device="CPU") for v in (x, w1, b1, w2, b2))
    out = ((tx @ tw1 + tb1).relu()) @ tw2 + tb2
    ks = _kernels(out)
    assert len(ks) == 2, ks
    first = ks[0].ast
    stored = [st.src[1] for st in first.toposort() if st.op is Ops.STORE]
    assert all(v.op is Ops.MAX or any(u.op is Ops.MAX for u in v.toposort()) for v in stored)  # relu in the store
    assert any(u.op is Ops.REDUCE for u in first.toposort())
    opts = hand_coded_opts(first, _cpu(64))
    assert opts[:2] == [Opt(U, 0, 4), Opt(U, 1, 64)], opts
    want = np.maximum(x.astype(np.float64) @ w1 + b1, 0) @ w2 + b2
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-3)
