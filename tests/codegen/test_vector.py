"""Vector loads and stores: UPCAST lanes of a contiguous axis become one vector access on every device (checked
against numpy, odd sizes included): aligned, staying scalar where the address is not provably aligned or the
tail is masked, except on a renderer with ``unaligned_vectors`` (CPU), where any run of lanes is one access."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.lowerer import multiple_of
from uops.codegen.opt import Opt, OptOps
from uops.codegen.program import get_program
from uops.plugins import Device
from uops.testing.kit.test_opts import bufs, matmul, row_sq_dev, row_sum, run_ast

U, R, S = OptOps.UPCAST, OptOps.UNROLL, OptOps.SWAP


def shifted(n: int, shift: int) -> tuple[UOp, Callable[..., np.ndarray], list[tuple[int, ...]]]:
    """out[i] = x[i + shift] * 3: the reads start ``shift`` elements past an aligned address."""
    out, x = bufs(2)
    i = UOp.range(n, 0, AxisType.GLOBAL)
    return UOp.sink(out.index(i).store(x.index(i + shift).load() * 3.0)), lambda a: a[shift:] * 3, [(n + shift,)]


def _vector_accesses(device: str, ast: UOp, opts: list[Opt]) -> tuple[list[UOp], list[UOp], str]:
    dev = Device[device]
    spec = get_program(ast, dev.renderer, dev.compiler, opts)
    loads = [u for u in spec.uops if u.op is Ops.LOAD and u.dtype.count > 1]
    stores = [u for u in spec.uops if u.op is Ops.STORE and u.src[1].dtype.count > 1]
    return loads, stores, spec.src


CASES = [
    ("matmul 8x16x5", matmul(8, 16, 5), [Opt(U, 0, 2), Opt(U, 1, 8)], True),
    ("matmul 8x16x300 swapped", matmul(8, 16, 300), [Opt(U, 0, 2), Opt(U, 1, 8), Opt(S, 0, 1)], True),
    ("matmul 7x13x5 masked tail", matmul(7, 13, 5), [Opt(U, 1, 4), Opt(U, 0, 2)], False),
    ("shifted 1003 masked tail", shifted(1003, 0), [Opt(U, 0, 8)], False),
    ("shifted 64 aligned", shifted(64, 8), [Opt(U, 0, 8)], True),
    ("shifted 61 misaligned", shifted(61, 1), [Opt(U, 0, 8)], False),
]


@pytest.mark.parametrize("name,case,opts,vectors", CASES, ids=[c[0] for c in CASES])
def test_vector_accesses_match_numpy(device: str, name: str, case, opts: list[Opt], vectors: bool) -> None:
    """Masked tails: lanes whose gates simplify to one gate share a gated vector access, the others stay
    scalar (both must give numpy's answer)."""
    ast, ref, shapes = case
    got, want = run_ast(device, ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
    loads, stores, _ = _vector_accesses(device, ast, opts)
    if vectors:
        assert stores, f"{name}: the contiguous output lanes should be one vector store on {device}"
    if not Device[device].renderer.unaligned_vectors:
        for u in loads + stores:
            assert multiple_of(u.src[0].src[1], u.dtype.count if u.op is Ops.LOAD else u.src[1].dtype.count), u


@pytest.mark.parametrize(
    "device,vector_type",
    [("CPU", "float8"), ("CUDA", "float4"), ("AMD", "float4"), ("METAL", "float4")],
)
def test_rendered_source_uses_the_vector_type(device: str, vector_type: str) -> None:
    if device not in Device:
        pytest.skip(f"{device} is not installed")
    ast = matmul(8, 16, 4)[0]
    loads, stores, src = _vector_accesses(device, ast, [Opt(U, 0, 2), Opt(U, 1, 8)])
    assert {u.dtype.count for u in loads} == {int(vector_type[-1])}, src
    pointer = Device[device].renderer.render_vector_pointer(dtypes.float32.vec(int(vector_type[-1])))
    assert vector_type in pointer and f"{vector_type} val" in src and f"({pointer})" in src, src


def test_a_misaligned_run_keeps_only_its_aligned_part_as_a_vector() -> None:
    loads, stores, src = _vector_accesses("CUDA", shifted(64, 1)[0], [Opt(U, 0, 4)])
    # x[4*o + 1 ... 4*o + 4]: only 4*o + 2, 4*o + 3 is a run aligned to its width; the rest stays scalar
    assert [u.dtype.count for u in loads] == [2], src
    assert [u.src[1].dtype.count for u in stores] == [4], src


def test_an_unaligned_run_is_one_vector_on_cpu() -> None:
    """x86 vector moves take any address: the CPU renderer reads x[8*o + 1 ... 8*o + 8] as one element-aligned
    vector (an odd-sized matrix's rows are stored whole), and the result is still numpy's."""
    loads, stores, src = _vector_accesses("CPU", shifted(64, 1)[0], [Opt(U, 0, 8)])
    assert [u.dtype.count for u in loads] == [8] and [u.src[1].dtype.count for u in stores] == [8], src
    assert "aligned(4)" in src and "*((float8u*)(data1+" in src, src
    got, want = run_ast("CPU", *shifted(64, 1), [Opt(U, 0, 8)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_python_interpreter_runs_vector_loads_with_a_gate() -> None:
    """A gated vector load (one gate for all lanes) reads the pad vector where the gate is false."""
    out, x = bufs(2)
    i, j = UOp.range(6, 0, AxisType.GLOBAL), UOp.range(4, 1, AxisType.GLOBAL)
    valid = i < 3
    val = x.index(i * 4 + j, valid).load(UOp.const(dtypes.float32, -1.0))
    ast = UOp.sink(out.index(i * 4 + j).store(val + 1.0))
    for device in ("PYTHON", "CPU"):
        got, want = run_ast(
            device, ast, lambda a: np.where(np.arange(24) < 12, a.ravel() + 1, 0.0), [(24,)], [Opt(U, 1, 4)]
        )
        np.testing.assert_allclose(got.ravel(), want)
        loads, _, src = _vector_accesses(device, ast, [Opt(U, 1, 4)])
        assert loads and len(loads[0].src) == 2, src


def test_multiple_of_proves_alignment_from_the_index_terms() -> None:
    r = UOp.range(10, 0, AxisType.LOOP)
    assert multiple_of(r * 16 + 32, 8) and multiple_of(None, 4)
    assert not multiple_of(r * 4 + 2, 4) and not multiple_of(r, 2)


def test_a_saved_vector_program_passes_the_checked_loader() -> None:
    from uops.codegen.program import ProgramSpec
    from uops.frontend.load import load_program

    dev = Device["CPU"]
    spec = get_program(matmul(8, 16, 4)[0], dev.renderer, dev.compiler, [Opt(U, 0, 2), Opt(U, 1, 8)])
    assert "float8" in spec.src
    assert load_program(ProgramSpec.from_dict(spec.to_dict())) is not None


def test_row_sums_keep_their_accumulators_in_vectors_on_cpu() -> None:
    """Several rows streaming at once: each row's accumulator is one vector, loaded, added and stored whole (clang
    then keeps it in a register), and the reduction loop is emitted once, with vector loads of its rows."""
    ast, ref, shapes = row_sum(16, 2048)
    opts = [Opt(U, 0, 8), Opt(R, 0, 8)]
    loads, stores, src = _vector_accesses("CPU", ast, opts)
    assert src.count("for (") == 2, src  # the rows, then the reduction loop inside (nothing emitted twice)
    regs = [u for u in loads if u.src[0].src[0].op is Ops.AFTER]  # accumulator reads, in the loop and after it
    assert len(regs) == 16 and all(u.dtype.count == 8 for u in regs), src
    assert sum(1 for u in stores if u.src[1].op is Ops.ADD) == 8, src  # acc + row: one vector add per row
    assert "val0[0]+" not in src, src  # no lane-by-lane adds
    got, want = run_ast("CPU", ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_a_row_value_broadcast_across_lanes_stays_a_vector_expression_on_cpu() -> None:
    """sum_k (x[i, k] - y[i])^2 with rows upcast: y[i] becomes one broadcast vector per row, the step one
    vector subtract, multiply and add; gpu-style renderers (no vector arithmetic) keep lanes scalar."""
    opts = [Opt(U, 0, 8), Opt(R, 0, 8)]
    _, stores, src = _vector_accesses("CPU", row_sq_dev(16, 2048)[0], opts)
    assert sum(1 for u in stores if u.src[1].op is Ops.ADD and u.src[1].dtype.count == 8) == 8, src
    assert "float8 alu" in src and "-vec" in src, src
    ast, ref, shapes = row_sq_dev(13, 2047)  # an overlapped last row tile, a masked reduction tail
    for device in ("CPU", "PYTHON", "CUDA_EMU"):
        got, want = run_ast(device, ast, ref, shapes, opts)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=device)
    _, cuda_stores, _ = _vector_accesses("CUDA", ast, opts)
    assert not any(u.src[1].op in (Ops.ADD, Ops.MUL) for u in cuda_stores)


def test_a_deep_shared_row_expression_is_vectorized_once() -> None:
    """t = t*t/2 + 1/2, 24 times, then a row sum: every level reads the one before twice, so a vector store's
    lanes must be matched once per shared node (matched per path, this is 2^24 visits and never finishes)."""
    from uops import Tensor

    x = np.random.default_rng(3).random((16, 256), dtype=np.float32)
    t, ref = Tensor(x, device="CPU"), x.copy()
    for _ in range(24):
        t, ref = t * t * 0.5 + 0.5, ref * ref * np.float32(0.5) + np.float32(0.5)
    np.testing.assert_allclose(t.sum(axis=1).numpy(), ref.sum(axis=1), rtol=1e-5)
