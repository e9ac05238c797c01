"""The compiler path on hand-built kernel ASTs, run on every device that can run, against numpy."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import available_devices

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.lowerer import full_rewrite_to_sink
from uops.codegen.program import ProgramSpec, format_stages, get_program, program_stages
from uops.dtypes import to_numpy
from uops.ir.spec import SpecError, verify
from uops.plugins import Device

DEVICES = available_devices()


def glob(slot: int, dt=dtypes.float32) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


def run(ast: UOp, device: str, inputs: list[np.ndarray], out_shape, out_dtype=np.float32, var_vals=None, spec=None):
    d = Device[device]
    spec = spec or get_program(ast, d.renderer, d.compiler)
    al = d.runtime.allocator
    out = np.zeros(out_shape, dtype=out_dtype)
    handles = [al.alloc(max(out.nbytes, 1))] + [al.alloc(max(x.nbytes, 1)) for x in inputs]
    for h, x in zip(handles[1:], inputs):
        al.copyin(h, memoryview(np.ascontiguousarray(x).tobytes()))
    g, loc = spec.launch_dims(var_vals)
    d.runtime.load(spec.name, spec.lib)(*handles, global_size=g, local_size=loc, vals=spec.vals(var_vals))
    res = np.zeros(max(out.nbytes, 1), dtype=np.uint8)
    al.copyout(memoryview(res), handles[0])
    return res[: out.nbytes].view(out_dtype).reshape(out_shape), spec


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_1d(device):
    n = 37
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() + glob(2).index(r).load()))
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    got, _ = run(ast, device, [a, b], (n,))
    np.testing.assert_allclose(got, a + b, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_3d_broadcast(device):
    s = (3, 4, 5)
    r = [UOp.range(n, i, AxisType.GLOBAL) for i, n in enumerate(s)]
    flat = r[0] * 20 + r[1] * 5 + r[2]
    # b has shape (1, 4, 1): strides (0, 1, 0); c is a scalar broadcast: stride 0 everywhere
    val = glob(1).index(flat).load() * glob(2).index(r[1]).load() + glob(3).index(UOp.const(dtypes.int32, 0)).load()
    ast = UOp.sink(glob(0).index(flat).store(val))
    a, b, c = np.random.rand(*s).astype(np.float32), np.random.rand(4).astype(np.float32), np.float32([2.5])
    got, _ = run(ast, device, [a, b, c], s)
    np.testing.assert_allclose(got, a * b[None, :, None] + c[0], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", [Ops.ADD, Ops.MAX])
def test_reduce_full_and_axis(device, op):
    rows, cols = 6, 9
    x = np.random.randn(rows, cols).astype(np.float32)
    ref = np.sum if op is Ops.ADD else np.max
    # along axis 1
    r0, rr = UOp.range(rows, 0, AxisType.GLOBAL), UOp.range(cols, 1, AxisType.REDUCE)
    ast = UOp.sink(glob(0).index(r0).store(glob(1).index(r0 * cols + rr).load().reduce(rr, op=op)))
    got, _ = run(ast, device, [x], (rows,))
    np.testing.assert_allclose(got, ref(x, axis=1), rtol=1e-5, atol=1e-6)
    # full: two reduce ranges, scalar output
    ra, rb = UOp.range(rows, 0, AxisType.REDUCE), UOp.range(cols, 1, AxisType.REDUCE)
    zero = UOp.const(dtypes.int32, 0)
    ast = UOp.sink(glob(0).index(zero).store(glob(1).index(ra * cols + rb).load().reduce(ra, rb, op=op)))
    got, _ = run(ast, device, [x], (1,))
    np.testing.assert_allclose(got[0], ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_as_reduce_of_mul(device):
    m, k, n = 5, 7, 3
    a, b = np.random.randn(m, k).astype(np.float32), np.random.randn(k, n).astype(np.float32)
    i, j, kk = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    prod = glob(1).index(i * k + kk).load() * glob(2).index(kk * n + j).load()
    ast = UOp.sink(glob(0).index(i * n + j).store(prod.reduce(kk, op=Ops.ADD).maximum(0.0)))
    got, _ = run(ast, device, [a, b], (m, n))
    np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_size_runs_at_two_sizes_without_recompiling(device):
    nvar = UOp.variable("n", 1, 1024)
    r = UOp.range(nvar, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() * 2.0))
    d = Device[device]
    spec = get_program(ast, d.renderer, d.compiler)
    assert spec.var_names == ["n"]
    for n in (5, 300):
        x = np.random.rand(n).astype(np.float32)
        got, spec2 = run(ast, device, [x], (n,), var_vals={"n": n}, spec=spec)
        assert spec2 is spec
        np.testing.assert_allclose(got, x * 2)
    with pytest.raises(ValueError, match="outside its declared range"):
        spec.vals({"n": 5000})


@pytest.mark.parametrize("device", DEVICES)
def test_padded_read_is_gated(device):
    # out[i] = x[i-2] for 2 <= i < 2+n, else 7.0: the pad must never read memory
    n = 10
    r = UOp.range(n + 4, 0, AxisType.GLOBAL)
    valid = (r > 1) & (r < n + 2)
    val = valid.where(glob(1).index(r - 2).load(), UOp.const(dtypes.float32, 7.0))
    ast = UOp.sink(glob(0).index(r).store(val))
    d = Device[device]
    sink, _ = full_rewrite_to_sink(ast, d.renderer)
    loads = [u for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert loads and all(len(ld.src[0].src) == 3 for ld in loads), "padded load was not gated"
    x = np.random.rand(n).astype(np.float32)
    got, _ = run(ast, device, [x], (n + 4,))
    np.testing.assert_allclose(got, np.pad(x, 2, constant_values=7.0))


@pytest.mark.parametrize("device", DEVICES)
def test_integer_kernel_c_semantics(device):
    n = 16
    r = UOp.range(n, 0, AxisType.GLOBAL)
    x = glob(1, dtypes.int32).index(r).load()
    val = x // 3 + x % 3 * 100
    ast = UOp.sink(glob(0, dtypes.int32).index(r).store(val))
    xs = np.arange(-8, 8, dtype=np.int32)
    got, _ = run(ast, device, [xs], (n,), out_dtype=np.int32)
    q = np.trunc(xs / 3).astype(np.int32)
    np.testing.assert_array_equal(got, q + (xs - q * 3) * 100)


def test_program_walks_four_forms():
    d = Device["PYTHON"]
    r = UOp.range(8, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load().sqrt()))
    prg = program_stages(ast, d.renderer, d.compiler)
    assert prg.op is Ops.PROGRAM and [s.op for s in prg.src] == [Ops.SINK, Ops.LINEAR, Ops.SOURCE, Ops.BINARY]
    sink, lin, src, binary = prg.src
    assert list(lin.src) == linearize(sink)
    assert any(u.op is Ops.SQRT for u in lin.src)
    assert json.loads(src.arg)["name"] == prg.arg
    assert binary.arg == src.arg.encode()
    verify(prg, "program")
    text = format_stages(prg)
    for title in ("SINK", "LINEAR", "SOURCE", "BINARY"):
        assert f"===== {title}" in text


def test_linear_order_is_valid_and_loops_nest():
    d = Device["CPU"] if "CPU" in DEVICES else None
    if d is None:
        pytest.skip("needs the CPU plugin (clang) for a loop-style lowering")
    i, j, kk = UOp.range(4, 0, AxisType.GLOBAL), UOp.range(3, 1, AxisType.GLOBAL), UOp.range(5, 2, AxisType.REDUCE)
    ast = UOp.sink(glob(0).index(i * 3 + j).store((glob(1).index(i * 5 + kk).load()).reduce(kk, op=Ops.ADD)))
    sink, _ = full_rewrite_to_sink(ast, d.renderer)
    lin = linearize(sink)
    pos = {u: n for n, u in enumerate(lin)}
    for u in lin:
        assert all(pos[s] < pos[u] for s in u.src), f"{u.op} used before defined"
    opens = [u for u in lin if u.op is Ops.RANGE]
    ends = [u for u in lin if u.op is Ops.END]
    assert len(opens) == len(ends) == 3
    # the reduce loop is innermost: opened last, closed first
    assert opens[-1].arg[1] is AxisType.REDUCE and ends[0].src[-1] is opens[-1]
    # the accumulator init sits inside the output loops, before the reduce loop
    acc_stores = [u for u in lin if u.op is Ops.STORE and u.src[0].src[0].op is Ops.AFTER]
    init = acc_stores[0]
    assert init.src[1].op is Ops.CONST and init.src[1].arg == 0
    assert pos[opens[1]] < pos[init] < pos[opens[2]]


def test_stage_check_names_the_node():
    r = UOp.range(4, 0, AxisType.GLOBAL)
    bad = UOp(Ops.ADD, dtypes.float32, (glob(1).index(r).load(), UOp.const(dtypes.int32, 1)))
    with pytest.raises(SpecError, match="ADD") as e:
        verify(UOp.sink(glob(0).index(r).store(bad)), "ast")
    assert "src[1]: CONST" in str(e.value)
    with pytest.raises(SpecError, match="SINK of STOREs"):
        verify(UOp.sink(bad), "ast")


def test_spec_round_trips_through_a_fresh_process(tmp_path):
    d = Device["PYTHON"]
    n = 12
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load().exp2()))
    spec = get_program(ast, d.renderer, d.compiler)
    again = ProgramSpec.from_dict(spec.to_dict())
    assert again.ast is spec.ast and again.uops == spec.uops and again.lib == spec.lib
    path = tmp_path / "kernel.json"
    path.write_text(spec.to_json())
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        from uops.codegen.program import ProgramSpec
        from uops.plugins import Device
        spec = ProgramSpec.from_json(open({str(path)!r}).read())
        d = Device[spec.device]
        al = d.runtime.allocator
        x = np.arange({n}, dtype=np.float32) / 4
        out, inp = al.alloc(x.nbytes), al.alloc(x.nbytes)
        al.copyin(inp, memoryview(x.tobytes()))
        g, l = spec.launch_dims()
        d.runtime.load(spec.name, spec.lib)(out, inp, global_size=g, local_size=l)
        res = np.zeros_like(x); al.copyout(memoryview(res), out)
        print(repr(res.tolist()))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(eval(proc.stdout), np.exp2(np.arange(n, dtype=np.float32) / 4), rtol=1e-6)


def test_unsupported_dtype_is_a_clear_error():
    if "CPU" not in DEVICES:
        pytest.skip("needs the CPU plugin")
    from uops.codegen.lowerer import LoweringError

    r = UOp.range(4, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0, dtypes.bfloat16).index(r).store(glob(1, dtypes.bfloat16).index(r).load()))
    with pytest.raises(LoweringError, match="bfloat16 is not supported by the CPU renderer"):
        get_program(ast, Device["CPU"].renderer, Device["CPU"].compiler)


def test_python_backend_runs_bfloat16_and_float16():
    n = 8
    for dt in (dtypes.float16, dtypes.bfloat16):
        r = UOp.range(n, 0, AxisType.GLOBAL)
        ast = UOp.sink(glob(0, dt).index(r).store(glob(1, dt).index(r).load() * UOp.const(dt, 3.0)))
        x = np.linspace(-2, 2, n).astype(np.float32)
        from uops.dtypes import bf16_to_f32, f32_to_bf16

        host = f32_to_bf16(x) if dt == dtypes.bfloat16 else x.astype(np.float16)
        got, _ = run(ast, "PYTHON", [host], (n,), out_dtype=to_numpy(dt))
        vals = bf16_to_f32(got) if dt == dtypes.bfloat16 else got.astype(np.float32)
        np.testing.assert_allclose(vals, x * 3, rtol=1e-2)


def test_grid_too_tall_for_a_launch_dimension_is_flattened():
    # CUDA's grid allows only 65535 blocks in y and z: a (70000, 2) output must still launch
    from uops.backends.python.renderer import PythonRenderer

    ren = PythonRenderer()
    rows, cols = 70000, 2
    i, j = UOp.range(rows, 0, AxisType.GLOBAL), UOp.range(cols, 1, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(i * cols + j).store(glob(1).index(i * cols + j).load() + 1.0))
    _, dims = full_rewrite_to_sink(ast, ren)
    sizes = [int(g.arg) for g in dims.global_size]
    assert sizes == [rows * cols] and all(s <= m for s, m in zip(sizes, ren.global_max))
    x = np.random.rand(rows, cols).astype(np.float32)
    got, _ = run(ast, "PYTHON", [x], (rows, cols))
    np.testing.assert_allclose(got, x + 1)


@pytest.mark.parametrize("gate_value", [True, False])
def test_constant_gate_is_folded(gate_value):
    r = UOp.range(4, 0, AxisType.GLOBAL)
    gate = UOp.const(dtypes.bool, gate_value)
    val = UOp(Ops.LOAD, dtypes.float32, (glob(1).index(r, gate), UOp.const(dtypes.float32, 5.0)))
    sink, _ = full_rewrite_to_sink(UOp.sink(glob(0).index(r).store(val)), Device["PYTHON"].renderer)
    loads = [u for u in sink.toposort() if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert all(len(ld.src[0].src) == 2 for ld in loads)  # no gate left
    assert len(loads) == (1 if gate_value else 0)
    x = np.arange(4, dtype=np.float32)
    got, _ = run(UOp.sink(glob(0).index(r).store(val)), "PYTHON", [x], (4,))
    np.testing.assert_array_equal(got, x if gate_value else np.full(4, 5.0, np.float32))
