"""The compiler path on hand-built kernel ASTs, compiled and run on ``device`` through its own
runtime (no frontend in between), against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.codegen.lowerer import full_rewrite_to_sink
from uops.codegen.program import get_program
from uops.plugins import Device
from uops.testing.kit.helpers import glob
from uops.testing.kit.helpers import run_kernel as run


def test_elementwise_1d(device):
    n = 37
    r = UOp.range(n, 0, AxisType.GLOBAL)
    ast = UOp.sink(glob(0).index(r).store(glob(1).index(r).load() + glob(2).index(r).load()))
    a, b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    got, _ = run(ast, device, [a, b], (n,))
    np.testing.assert_allclose(got, a + b, rtol=1e-6)


def test_elementwise_3d_broadcast(device):
    s = (3, 4, 5)
    r = [UOp.range(n, i, AxisType.GLOBAL) for i, n in enumerate(s)]
    flat = r[0] * 20 + r[1] * 5 + r[2]
    # b has shape (1, 4, 1): strides (0, 1, 0); c is a scalar broadcast: stride 0 everywhere
    val = glob(1).index(flat).load() * glob(2).index(r[1]).load() + glob(3).index(UOp.const(dtypes.int32, 0)).load()
    ast = UOp.sink(glob(0).index(flat).store(val))
    a, b, c = np.random.rand(*s).astype(np.float32), np.random.rand(4).astype(np.float32), np.array([2.5], np.float32)
    got, _ = run(ast, device, [a, b, c], s)
    np.testing.assert_allclose(got, a * b[None, :, None] + c[0], rtol=1e-6)


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


def test_matmul_as_reduce_of_mul(device):
    m, k, n = 5, 7, 3
    a, b = np.random.randn(m, k).astype(np.float32), np.random.randn(k, n).astype(np.float32)
    i, j, kk = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL), UOp.range(k, 2, AxisType.REDUCE)
    prod = glob(1).index(i * k + kk).load() * glob(2).index(kk * n + j).load()
    ast = UOp.sink(glob(0).index(i * n + j).store(prod.reduce(kk, op=Ops.ADD).maximum(0.0)))
    got, _ = run(ast, device, [a, b], (m, n))
    np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)


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
