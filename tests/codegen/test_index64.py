"""64-bit index arithmetic where a size or an index can pass int32, int32 where it provably fits.

Big sizes stay cheap here: kernels are compiled and their source read without running, symbolic
sizes (a DEFINE_VAR with a large max) run at small values, and the few runs over 2**31+ elements
read broadcast constants into a one-element output (marked slow: seconds of CPU each).
"""

from __future__ import annotations

import numpy as np
import pytest

from uops import AxisType, Ops, Tensor, UOp, dtypes
from uops.codegen.lowerer import LoweringError, full_rewrite_to_sink, narrow_index
from uops.codegen.program import get_program, kernel_name
from uops.plugins import Device

BIG = [2**31 + 16, 2**32 + 16]
INT32_MAX = 2**31 - 1


def glob(slot: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


def kernels(t: Tensor) -> list:
    return [it for it in t.schedule() if it.kind == "kernel"]


def compile_only(t: Tensor, device: str) -> list:
    """ProgramSpecs of every kernel of ``t``, without opts (compiled, never run: nothing is allocated)."""
    d = Device[device]
    return [get_program(k.ast, d.renderer, d.compiler, []) for k in kernels(t)]


def index_dtypes(spec) -> set:
    """dtypes of every buffer index in a compiled program."""
    return {u.src[1].dtype for u in spec.uops if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL}


def launched_threads(spec) -> int:
    g, loc = spec.launch_dims()
    return int(np.prod(g)) * int(np.prod(loc))


# ----- what the finding saw: wrapped loop bounds and a negative kernel name -----


@pytest.mark.parametrize("n", BIG)
def test_big_elementwise_kernel_is_named_and_bounded_by_its_true_size(device, n):
    x = Tensor.empty(n, dtype=dtypes.int8, device=device)
    ren = Device[device].renderer
    if ren.global_max is not None and ren.local_max is None and n > ren.global_max[0]:
        # one thread per workgroup (PYTHON): more workgroups than the grid allows is a named error
        with pytest.raises(LoweringError, match=f"launch dimension 0 needs {n} workgroups"):
            compile_only(x + 1, device)
        return
    (spec,) = compile_only(x + 1, device)
    assert spec.name == f"E_{n}"
    if Device[device].renderer.global_max is None:  # loops: the bound is the size, in a 64-bit loop variable
        assert f"< {n}ll;" in spec.src and "long long ridx0" in spec.src
    else:  # launch indices: the grid covers every element, within the renderer's limits
        assert launched_threads(spec) == n
        g, _ = spec.launch_dims()
        assert all(a <= b for a, b in zip(g, Device[device].renderer.global_max))
    assert dtypes.int64 in index_dtypes(spec)


def test_kernel_name_of_a_big_range_is_its_size():
    r = UOp.range(2**31 + 16, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0, dtypes.int8).index(r).store(UOp.const(dtypes.int8, 1)))
    assert kernel_name(ast) == "E_2147483664"


@pytest.mark.parametrize("n", BIG)
def test_big_sum_compiles_with_64bit_bounds(device, n):
    # one buffer element read n times (a constant's sum would fold to n * value without a loop)
    specs = compile_only(Tensor([1.0], device=device).expand(n).sum(), device)
    big = [str(n) in s.src or any(u.op is Ops.CONST and u.arg == n for u in s.uops) for s in specs]
    assert any(big), "the element count must appear unwrapped in some kernel"
    for s in specs:
        assert "-" not in s.name
        assert all(u.src[0].vmin > 0 for u in s.uops if u.op in (Ops.RANGE, Ops.SPECIAL))  # no wrapped bound


def test_offset_past_int32_in_a_shrink(device):
    """A view starting at element 2**31 of a big buffer: the offset is 64-bit, the loop over 16 is int32."""
    x = Tensor.empty(2**31 + 16, dtype=dtypes.int8, device=device)
    (spec,) = compile_only(x[2**31 :] + 1, device)
    assert spec.name == "E_16"
    loads = [u for u in spec.uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert loads and all(ld.src[0].src[1].dtype == dtypes.int64 for ld in loads)
    assert all(u.dtype == dtypes.int32 for u in spec.uops if u.op in (Ops.RANGE, Ops.SPECIAL))
    assert any(u.op is Ops.CONST and u.arg == 2**31 and u.dtype == dtypes.int64 for u in spec.uops)


# ----- int32 is kept where it fits -----


def test_small_kernels_keep_int32_index_math(device):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = Tensor(x, device=device)
    cases = [
        (a + 1, x + 1),
        (a.permute(2, 0, 1).contiguous(), x.transpose(2, 0, 1)),
        (a.sum(axis=1), x.sum(axis=1)),
        (a.pad(((1, 1), None, None)) * 2, np.pad(x, ((1, 1), (0, 0), (0, 0))) * 2),
    ]
    for t, want in cases:
        for spec in compile_only(t, device):
            assert index_dtypes(spec) == {dtypes.int32}, spec.src
            assert all(u.dtype == dtypes.int32 for u in spec.uops if u.op in (Ops.RANGE, Ops.SPECIAL))
            if device == "CPU":
                assert "long long" not in spec.src
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)


def test_only_the_part_that_can_pass_int32_is_wide():
    """A 2**31+16 reduction split into 32769 x 65536: both loop counters fit int32, their flat index does not."""
    specs = compile_only(Tensor([1.0], device="CPU").expand(2**31 + 16).sum(), "CPU")
    first = specs[0].src
    assert "for (int ridx0" in first and "for (int ridx1" in first
    assert "long long" in first  # ridx0*65536 + ridx1 compared with 2147483664


def test_narrow_index_is_exact_at_the_int32_edge():
    """A range of exactly 2**31 (last index 2**31-1) keeps a 64-bit counter: its end does not fit int32."""
    for n, wide in ((2**31 - 1, False), (2**31, True)):
        r = UOp.range(n, 0, AxisType.GLOBAL)
        ast = UOp.sink(glob(0, dtypes.int8).index(r).store(UOp.const(dtypes.int8, 1)))
        sink, _ = full_rewrite_to_sink(ast, Device["CPU"].renderer)
        (rng,) = [u for u in sink.toposort() if u.op is Ops.RANGE]
        assert rng.dtype == (dtypes.int64 if wide else dtypes.int32), n


def test_narrowing_keeps_values():
    """Narrowed graphs compute what the wide ones do: checked by evaluating both at many points."""
    i = UOp.variable("i", 0, 1000, dtypes.int64)
    j = UOp.variable("j", -50, 50, dtypes.int64)
    exprs = [i * 3 + j, (i * 2**22 + j) // 7, (i - j) % 13, (i * 2**21).maximum(j * 2**30), -(i + j)]
    out = UOp(Ops.DEFINE_GLOBAL, dtypes.int64.ptr(), (), 0)
    sink = UOp.sink(*[out.index(UOp.const(dtypes.int64, k)).store(e) for k, e in enumerate(exprs)])
    narrow = narrow_index(sink)
    stored = [s.src[1] for s in narrow.src]
    assert all(s.dtype == dtypes.int64 for s in stored)  # what is stored keeps the buffer's dtype
    assert any(u.dtype == dtypes.int32 for u in narrow.toposort() if u.op is Ops.DEFINE_VAR)
    for iv, jv in ((0, 0), (1000, 50), (1000, -50), (7, -3), (513, 17)):
        for e, got in zip(exprs, stored):
            assert _eval(got, {"i": iv, "j": jv}) == _eval(e, {"i": iv, "j": jv})


def _eval(u: UOp, env: dict[str, int]) -> int:
    """C semantics of the integer ops used above, with wrapping to the node's dtype."""
    vals: dict[UOp, int] = {}
    for n in u.toposort():
        s = [vals[x] for x in n.src]
        if n.op is Ops.CONST:
            v = n.arg
        elif n.op is Ops.DEFINE_VAR:
            v = env[n.arg[0]]
        elif n.op is Ops.CAST:
            v = s[0]
        elif n.op is Ops.ADD:
            v = s[0] + s[1]
        elif n.op is Ops.SUB:
            v = s[0] - s[1]
        elif n.op is Ops.MUL:
            v = s[0] * s[1]
        elif n.op is Ops.NEG:
            v = -s[0]
        elif n.op is Ops.MAX:
            v = max(s)
        elif n.op is Ops.IDIV:
            v = int(s[0] / s[1]) if abs(s[0]) < 2**52 else (abs(s[0]) // abs(s[1])) * (1 if s[0] * s[1] >= 0 else -1)
        elif n.op is Ops.MOD:
            v = s[0] - int(s[0] / s[1]) * s[1]
        else:
            raise AssertionError(f"no rule for {n.op}")
        bits = n.dtype.itemsize * 8
        vals[n] = (v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)
    return vals[u]


# ----- symbolic sizes: a variable with a large max makes the index 64-bit; run at small values -----


def test_symbolic_size_with_a_large_max_runs_everywhere(device):
    n = UOp.variable("n", 1, INT32_MAX, dtypes.index)
    i, j = UOp.range(n, 0, AxisType.GLOBAL), UOp.range(16, 1, AxisType.GLOBAL)
    flat = i * 16 + j  # up to 2**35: wide
    ast = UOp.sink(glob(0).index(flat).store(glob(1).index(flat).load() * 2.0 + j.cast(dtypes.float32)))
    d = Device[device]
    spec = get_program(ast, d.renderer, d.compiler, [])
    assert dtypes.int64 in index_dtypes(spec)
    assert all(v.dtype == dtypes.int32 for v in spec.vars)  # kernel arguments stay int32
    al = d.runtime.allocator
    prog = d.runtime.load(spec.name, spec.lib)
    for nv in (1, 5, 37):
        x = np.random.rand(nv, 16).astype(np.float32)
        hout, hin = al.alloc(x.nbytes), al.alloc(x.nbytes)
        al.copyin(hin, memoryview(x.tobytes()))
        g, loc = spec.launch_dims({"n": nv})
        prog(hout, hin, global_size=g, local_size=loc, vals=spec.vals({"n": nv}))
        res = np.zeros(x.size, np.float32)
        al.copyout(memoryview(res), hout)
        np.testing.assert_allclose(res.reshape(nv, 16), x * 2 + np.arange(16, dtype=np.float32), rtol=1e-6)


def test_variable_beyond_int32_is_a_clear_error():
    n = UOp.variable("huge_n", 1, 2**40, dtypes.index)
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(UOp.const(dtypes.float32, 1.0)))
    with pytest.raises(LoweringError, match="huge_n.*int32"):
        full_rewrite_to_sink(ast, Device["CPU"].renderer)


def test_hand_written_int32_ast_is_taken_as_written():
    r = UOp.range(UOp.const(dtypes.int32, 8), 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r * 2).store(UOp.const(dtypes.float32, 1.0)))
    sink, _ = full_rewrite_to_sink(ast, Device["CPU"].renderer)
    assert all(u.dtype != dtypes.int64 for u in sink.toposort())


# ----- GPU launch dimensions with a 64-bit global index -----


def _cuda() -> tuple:
    cuda = pytest.importorskip("uops_cuda.renderer", reason="the uops-cuda plugin is not installed")
    comp = pytest.importorskip("uops_cuda.compiler")
    if comp.nvrtc_available() is not None:
        pytest.skip(f"NVRTC unavailable: {comp.nvrtc_available()}")
    return cuda.CUDARenderer(), comp.NVRTCCompiler("sm_90")


@pytest.mark.parametrize("shape", [(2**31 + 16,), (2**32 + 16,), (2**20, 2**12), (3, 2**31 + 16)])
def test_cuda_big_launch_fits_the_grid_and_compiles(shape):
    ren, comp = _cuda()
    ast = kernels(Tensor.empty(*shape, dtype=dtypes.int8, device="CPU") + 1)[0].ast
    spec = get_program(ast, ren, comp, [])
    g, loc = spec.launch_dims()
    assert int(np.prod(g)) * int(np.prod(loc)) == int(np.prod(shape))
    assert all(a <= b for a, b in zip(g, ren.global_max))
    assert "int gidx0 = blockIdx.x" in spec.src  # the block index fits int32 ...
    assert "long long" in spec.src  # ... the flat index gidx*local+lidx does not
    assert spec.lib  # NVRTC accepted the source


def test_cuda_grid_beyond_its_limit_is_a_clear_error():
    ren, comp = _cuda()
    # 2**31+1 = 3 * 715827883: no power-of-two block size divides it, so it needs 2**31+1 blocks
    ast = kernels(Tensor.empty(2**31 + 1, dtype=dtypes.int8, device="CPU") + 1)[0].ast
    with pytest.raises(LoweringError, match="launch dimension 0 needs 2147483649 workgroups"):
        get_program(ast, ren, comp, [])


# ----- runs over 2**31+ elements (seconds of CPU; output one element) -----


@pytest.mark.slow
def test_sum_of_2_31_plus_16_ones_on_cpu():
    n = 2**31 + 16
    got = Tensor([1.0], device="CPU").expand(n).sum().numpy()
    np.testing.assert_allclose(got, float(n), rtol=1e-6)
    assert Tensor.ones(n, device="CPU").sum().numpy() == pytest.approx(float(n), rel=1e-6)


@pytest.mark.slow
def test_int64_count_past_int32_on_cpu():
    n = 2**31 + 16
    got = Tensor([1], dtype=dtypes.int8, device="CPU").expand(n).cast(dtypes.int64).sum().numpy()
    assert int(got) == n
