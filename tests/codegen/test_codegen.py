"""The compiler path on hand-built kernel ASTs: the four PROGRAM forms, stage checks, lowering details.

Running hand-built kernels on every device is the conformance kit's job (`uops.testing.kit.test_kernels`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.linearizer import linearize
from uops.codegen.lowerer import full_rewrite_to_sink
from uops.codegen.program import format_stages, get_program, program_stages
from uops.dtypes import to_numpy
from uops.ir.spec import SpecError, verify
from uops.plugins import Device
from uops.testing import devices_from_env
from uops.testing.kit.helpers import glob
from uops.testing.kit.helpers import run_kernel as run

DEVICES = devices_from_env()


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
    ast = UOp.sink(glob(0).index(i * 3 + j).store((glob(1).index(i * 15 + j * 5 + kk).load()).reduce(kk, op=Ops.ADD)))
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


@pytest.mark.parametrize("device", ["CPU", "CUDA_EMU", "PYTHON"])
def test_estimates_count_the_math_not_the_opts(device):
    """GFLOP/s in UOPS_DEBUG=2 and `uops compile` divide by these: a register-tiled matmul (vector lanes,
    multiply-adds, its index math) must count the same 2*M*N*K flops as the naive loop nest."""
    from uops.codegen.opt import Opt, OptOps

    m, k, n = 64, 32, 48
    i, j, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    dot = (glob(1).index(i * k + r).load() * glob(2).index(r * n + j).load()).reduce(r, op=Ops.ADD)
    ast = UOp.sink(glob(0).index(i * n + j).store(dot))
    d = Device[device]
    tiled = [Opt(OptOps.UPCAST, 0, 4), Opt(OptOps.UPCAST, 1, 16 if device == "CPU" else 4)]
    for opts in ([], tiled, None):
        if device == "PYTHON" and opts:
            continue  # the interpreter takes no register tiles
        est = get_program(ast, d.renderer, d.compiler, opts).estimates
        assert est.ops == 2 * m * n * k, opts
        assert est.bytes_written == 4 * m * n, opts
        assert 4 * (m * k + k * n) <= est.bytes_read <= 4 * 2 * m * n * k, opts


def test_the_path_is_one_list_of_named_passes(monkeypatch, capsys):
    """get_program runs PASSES in order, each pass named in the trace and by UOPS_DEBUG=3, and the result is the
    PROGRAM node the lowering alone (full_rewrite_to_sink) and the PROGRAM passes make."""
    from uops.codegen.lowerer import LOWERING
    from uops.codegen.program import PASSES, PROGRAM_PASSES, lower_to_program

    d = Device["PYTHON"]
    r = UOp.range(8, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() * 2.0))
    prg, ctx = lower_to_program(ast, d.renderer, d.compiler, trace=True)
    names = [name for name, _ in PASSES]
    assert [name for name, _ in LOWERING + PROGRAM_PASSES] == names and len(set(names)) == len(names)
    assert ctx.trace is not None and [name for name, _ in ctx.trace] == names
    assert prg.op is Ops.PROGRAM and prg.src[0] is full_rewrite_to_sink(ast, d.renderer, [])[0]
    assert get_program(ast, d.renderer, d.compiler).src == prg.src[2].arg
    monkeypatch.setenv("UOPS_DEBUG", "3")
    lower_to_program(ast, d.renderer, d.compiler)
    err = capsys.readouterr().err
    assert all(f"{prg.arg}: {name} " in err for name in names), err


def test_compile_expression_lowers_each_kernel_once(monkeypatch):
    from uops.cli.compile import compile_expression
    from uops.codegen import lowerer

    seen: list[str] = []
    real = lowerer.kernel_name
    monkeypatch.setattr(lowerer, "kernel_name", lambda ast: seen.append("k") or real(ast))
    results = compile_expression("(a+b).sum(axis=1)", Device["PYTHON"].target(), {}, (4, 4))
    assert len(results) == len(seen) == 1
    assert "===== PASSES" in results[0][1] and " vectorize " in results[0][1]


def test_saved_spec_keeps_enum_args():
    """A REDUCE's op (an IntEnum) is saved by name: loaded back it is the op itself, not a number."""
    from uops.codegen.program import ProgramSpec
    from uops.ir.serialize import uops_from_data, uops_to_data

    d = Device["PYTHON"]
    i, k = UOp.range(4, 0, AxisType.GLOBAL), UOp.range(8, 1, AxisType.REDUCE)
    ast = UOp.sink(glob(0).index(i).store(glob(1).index(i * 8 + k).load().reduce(k, op=Ops.MAX)))
    data = uops_to_data([ast])
    assert {"op": "MAX"} in [arg for *_, arg in data["nodes"]]  # by name (a number would load as an int)
    assert uops_from_data(data)[0] is ast
    back = ProgramSpec.from_json(get_program(ast, d.renderer, d.compiler).to_json())
    assert back.ast is ast and back.ast.src[0].src[1].arg is Ops.MAX


def _global_loads(sink: UOp, slot: int) -> list[UOp]:
    return [
        u
        for u in sink.toposort()
        if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL and u.src[0].src[0].arg == slot
    ]


def _sized(slot: int, n: int) -> UOp:
    return UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(n), (), slot)


@pytest.mark.parametrize("sized", [True, False])
def test_masked_read_in_bounds_stays_a_select(sized):
    """where(mask, x[r], 0) over a buffer whose size bounds r loads unconditionally (it vectorizes); without a
    known size, and for a padded read (x[r - 1]), the load is gated so nothing outside the buffer is read."""
    n = 8
    r = UOp.range(n, 0, AxisType.GLOBAL)
    src = _sized(1, n) if sized else glob(1)
    masked = (r < 3).where(src.index(r).load(), 0.0)
    padded = (r < 1).where(0.0, _sized(2, n).index(r - 1).load())
    ast = UOp.sink(_sized(0, n).index(r).store(masked + padded))
    sink, _ = full_rewrite_to_sink(ast, Device["PYTHON"].renderer)
    (mload,) = _global_loads(sink, 1)
    (pload,) = _global_loads(sink, 2)
    assert len(mload.src[0].src) == (2 if sized else 3)  # INDEX(buf, idx[, gate])
    assert len(pload.src[0].src) == 3
    x, y = np.arange(1, n + 1, dtype=np.float32), np.arange(10, 10 + n, dtype=np.float32)
    want = np.where(np.arange(n) < 3, x, 0) + np.concatenate([[0], y[:-1]])
    for device in DEVICES:
        got, _ = run(ast, device, [x, y], (n,))
        np.testing.assert_array_equal(got, want, err_msg=device)


@pytest.mark.parametrize("keep_first", [True, False])
def test_masked_update_of_the_stored_element_is_a_gated_store(keep_first):
    """store(out[r], where(m, new, out[r])) writes only where m (either branch order): no read of out at all."""
    n = 8
    r = UOp.range(n, 0, AxisType.GLOBAL)
    old, new = _sized(0, n).index(r).load(), glob(1).index(r).load() * 2.0
    value = (r < 3).where(new, old) if keep_first else (r < 3).where(old, new)
    sink, _ = full_rewrite_to_sink(UOp.sink(_sized(0, n).index(r).store(value)), Device["PYTHON"].renderer)
    assert _global_loads(sink, 0) == []
    (store,) = [u for u in sink.toposort() if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]
    assert len(store.src[0].src) == 3


@pytest.mark.parametrize("device", DEVICES)
def test_masked_in_place_update_leaves_the_rest(device):
    """The front end's masked in-place write (a KV cache row) through the gated store, against numpy."""
    from uops import Tensor

    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = Tensor(base.copy(), device=device).realize()
    rows = Tensor(np.arange(4, dtype=np.int32).reshape(4, 1), device=device)
    new = Tensor(np.full((1, 6), -1.0, np.float32), device=device)
    t.assign((rows == 2).where(new, t))
    t.assign((rows != 0).where(t, t * 10))
    want = base.copy()
    want[2] = -1
    want[0] *= 10
    np.testing.assert_array_equal(t.numpy(), want)
