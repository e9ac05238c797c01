"""The ALU table (uops.ir.alu) is the one definition of every op: constant folding, the PYTHON backend
and every compiled device must give its answers, numpy's for the cases C leaves undefined.

Kernels that could trap (integer division by zero, INT_MIN // -1) run in a subprocess, so a regression
fails the test instead of killing the run with SIGFPE.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from tests import REPO
from uops import AxisType, Ops, UOp, dtypes
from uops.dtypes import SCALARS, DType, from_numpy, to_numpy
from uops.ir.alu import ALU, eval_array, eval_scalar, idiv, imod
from uops.ir.ops import GroupOp
from uops.ir.symbolic import simplify
from uops.testing.kit.helpers import supports_dtype

INTS = [d for d in SCALARS if dtypes.is_int(d)]
BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ]
BINARY += [Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR]


def in_subprocess(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with the ``tests`` package importable; a crash is a return code."""
    prog = f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300)


def extremes(dt: DType) -> list[int]:
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    return sorted({lo, lo + 1, -1 if lo < 0 else 2, 0, 1, 3, hi - 1, hi})


def operands(dt: DType, op: Ops, seed: int = 0) -> tuple[list[int], list[int]]:
    """Every pair of extreme values, then random pairs over the whole range; shift counts stay in [0, bits)."""
    ex = extremes(dt)
    a = [x for x in ex for _ in ex]
    b = [y for _ in ex for y in ex]
    rng = np.random.default_rng(seed)
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    a += [int(v) for v in rng.integers(lo, hi, size=48, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)]
    b += [int(v) for v in rng.integers(lo, hi, size=48, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)]
    b += [0] * 4  # random dividends over zero divisors
    a += a[-4:]
    if op in (Ops.SHL, Ops.SHR):
        b = [y % (8 * dt.itemsize) for y in b]
    return a, b


def out_dtype(op: Ops, dt: DType) -> DType:
    return dtypes.bool if op in GroupOp.Comparison else dt


# ----------------------------------------------------------------------------------------
# the table itself: the fixed definitions, and its two sides agreeing
# ----------------------------------------------------------------------------------------
def test_every_alu_op_has_one_definition() -> None:
    assert set(ALU) == GroupOp.ALU


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_the_cases_c_leaves_undefined_are_fixed_like_numpy(dt: DType) -> None:
    lo = int(dtypes.min(dt))
    assert eval_scalar(Ops.IDIV, dt, (7, 0)) == 0 and eval_scalar(Ops.MOD, dt, (7, 0)) == 0
    assert eval_scalar(Ops.IDIV, dt, (lo, -1)) == lo and eval_scalar(Ops.MOD, dt, (lo, -1)) == 0
    assert eval_scalar(Ops.IDIV, dt, (-7, 2)) == -3 and eval_scalar(Ops.MOD, dt, (-7, 2)) == -1  # C truncation
    npdt = to_numpy(dt)
    a, b = np.array([7, lo, lo, -7], npdt), np.array([0, -1, 0, 2], npdt)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(eval_array(Ops.IDIV, [a, b]), [0, lo, 0, -3])
        np.testing.assert_array_equal(eval_array(Ops.MOD, [a, b]), [0, 0, 0, -1])
        # numpy's floor division agrees wherever floor and truncation coincide, and on the fixed cases
        np.testing.assert_array_equal((a // b)[:3], [0, lo, 0])
        np.testing.assert_array_equal((a % b)[:3], [0, 0, 0])


def test_python_int_division_helpers() -> None:
    for a in (-7, -6, 0, 6, 7):
        for b in (-3, -1, 1, 3):
            assert idiv(a, b) == math.trunc(a / b) and idiv(a, b) * b + imod(a, b) == a
    assert idiv(5, 0) == 0 and imod(5, 0) == 0


@pytest.mark.parametrize("a,b", [(1e10, 3.0), (5e7, 0.3), (-1e10, 3.0), (7.5, -2.0), (1.0, 0.0), (math.inf, 2.0)])
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_float_mod_is_fmod_on_both_sides(dt: DType, a: float, b: float) -> None:
    npdt = to_numpy(dt)
    with np.errstate(all="ignore"):
        want = np.fmod(npdt.type(a), npdt.type(b))
    got = eval_scalar(Ops.MOD, dt, (float(npdt.type(a)), float(npdt.type(b))))
    np.testing.assert_array_equal(np.asarray(got, npdt), want)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(eval_array(Ops.MOD, [np.array([a], npdt), np.array([b], npdt)]), [want])


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
@pytest.mark.parametrize("op", BINARY)
def test_table_scalar_array_and_constant_folding_agree(dt: DType, op: Ops) -> None:
    a, b = operands(dt, op)
    npdt, odt = to_numpy(dt), out_dtype(op, dt)
    with np.errstate(all="ignore"):
        arr = eval_array(op, [np.array(a, npdt), np.array(b, npdt)]).astype(to_numpy(odt))
    for x, y, z in zip(a, b, arr.tolist()):
        want = eval_scalar(op, odt, (x, y), dt)
        assert want == z, (op, dt, x, y, want, z)
        folded = simplify(UOp(op, odt, (UOp.const(dt, x), UOp.const(dt, y))))
        assert folded.op is Ops.CONST and folded.arg == want, (op, dt, x, y, folded)


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_wraparound_and_neg_match_numpy(dt: DType) -> None:
    npdt = to_numpy(dt)
    ex = extremes(dt)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op, fn in ((Ops.ADD, np.add), (Ops.SUB, np.subtract), (Ops.MUL, np.multiply)):
            for x in ex:
                for y in ex:
                    assert eval_scalar(op, dt, (x, y)) == int(fn(npdt.type(x), npdt.type(y))), (op, x, y)
        for x in ex:
            assert eval_scalar(Ops.NEG, dt, (x,)) == int(np.negative(npdt.type(x)))


def test_value_ranges_use_the_table_for_known_values() -> None:
    a, b = UOp.const(dtypes.int32, 6), UOp.const(dtypes.int32, 3)
    assert UOp(Ops.XOR, dtypes.int32, (a, b))._range() == (5, 5)
    assert UOp(Ops.IDIV, dtypes.int32, (a, UOp.const(dtypes.int32, 0)))._range() == (0, 0)


# ----------------------------------------------------------------------------------------
# every device gives the table's answers (IR kernels, one per dtype, all ops at once)
# ----------------------------------------------------------------------------------------
def eval_on_device(device: str, dt_name: str, columns: dict[str, tuple[list[int], list[int]]]) -> dict[str, list]:
    """Run ``op(a, b)`` elementwise as one compiled kernel per op on ``device``; the results as lists."""
    from uops.codegen.program import get_program
    from uops.plugins import Device

    dt = from_numpy(np.dtype(dt_name))
    d = Device[device]
    al = d.runtime.allocator
    out: dict[str, list] = {}
    names = sorted(columns)
    n = len(columns[names[0]][0])
    odts = {name: out_dtype(Ops[name], dt) for name in names}
    g = [UOp(Ops.DEFINE_GLOBAL, odts[name].ptr(n), (), i) for i, name in enumerate(names)]
    ins = [UOp(Ops.DEFINE_GLOBAL, dt.ptr(n), (), len(names) + i) for i in range(2 * len(names))]
    r = UOp.range(n, 0, AxisType.GLOBAL)
    stores = []
    for i, name in enumerate(names):
        val = UOp(Ops[name], odts[name], (ins[2 * i].index(r).load(), ins[2 * i + 1].index(r).load()))
        stores.append(g[i].index(r).store(val))
    spec = get_program(UOp.sink(*stores), d.renderer, d.compiler)
    npdt = to_numpy(dt)
    hs = [al.alloc(max(1, n * odts[name].itemsize)) for name in names]
    for name in names:
        for col in columns[name]:
            h = al.alloc(n * dt.itemsize)
            al.copyin(h, memoryview(np.array(col, npdt).tobytes()))
            hs.append(h)
    gsz, lsz = spec.launch_dims()
    d.runtime.load(spec.name, spec.lib)(*hs, global_size=gsz, local_size=lsz)
    for i, name in enumerate(names):
        res = np.zeros(n, to_numpy(odts[name]))
        al.copyout(memoryview(res).cast("B"), hs[i])
        out[name] = res.tolist()
    return out


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_every_device_agrees_with_the_table(device: str, dt: DType) -> None:
    cols = {op.name: operands(dt, op, seed=dt.itemsize) for op in BINARY}
    npname = to_numpy(dt).name
    r = in_subprocess(
        f"""
        import json
        from tests.ir.test_alu import eval_on_device
        print(json.dumps(eval_on_device({device!r}, {npname!r}, {cols!r})))
        """
    )
    assert r.returncode == 0, f"{device} {dt.name}: exit {r.returncode}\n{r.stderr[-3000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for op in BINARY:
        a, b = cols[op.name]
        odt = out_dtype(op, dt)
        want = [eval_scalar(op, odt, (x, y), dt) for x, y in zip(a, b)]
        bad = [(x, y, w, g) for x, y, w, g in zip(a, b, want, got[op.name]) if w != g]
        assert not bad, f"{device} {op.name} {dt.name}: (a, b, table, device) {bad[:6]}"


def test_constant_divisors_stay_a_plain_division() -> None:
    from uops.codegen.program import get_program
    from uops.plugins import Device

    d = Device["PYTHON"]
    n = 8
    g = [UOp(Ops.DEFINE_GLOBAL, dtypes.int32.ptr(n), (), i) for i in range(2)]
    r = UOp.range(n, 0, AxisType.GLOBAL)
    x = g[1].index(r).load()

    def lowered(val: UOp) -> list[Ops]:
        return [u.op for u in get_program(UOp.sink(g[0].index(r).store(val)), d.renderer, d.compiler).uops]

    i = r.cast(dtypes.int32)  # 0..7
    for divisor in (UOp.const(dtypes.int32, 3), UOp.const(dtypes.int32, -3), i + 1):  # ranges without 0 or -1
        ops = lowered(UOp(Ops.IDIV, dtypes.int32, (x, divisor)))
        assert Ops.IDIV in ops and Ops.WHERE not in ops, divisor
    assert Ops.WHERE in lowered(UOp(Ops.IDIV, dtypes.int32, (x, i - 1)))  # -1..6 holds 0 (and -1)
    # -1 needs no guard when the dividend cannot be INT_MIN
    assert Ops.WHERE not in lowered(UOp(Ops.IDIV, dtypes.int32, (i, -i - 1)))


# ----------------------------------------------------------------------------------------
# the numbered findings, through the Tensor API, on every device
# ----------------------------------------------------------------------------------------
def tensor_divmod(device: str, dt_name: str, a: list[int], b: list[int]) -> dict[str, list[int]]:
    from uops import Tensor

    x, y = Tensor(np.array(a, dt_name), device=device), Tensor(np.array(b, dt_name), device=device)
    return {"floordiv": (x // y).numpy().tolist(), "mod": (x % y).numpy().tolist()}


@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_finding1_integer_tensor_divisors_with_zero_and_int_min_do_not_crash(device: str, dt: DType) -> None:
    # SIGFPE on CPU and CUDA_EMU: a tensor divisor containing 0, and INT_MIN // -1; numpy gives 0, INT_MIN, 0
    npdt = to_numpy(dt)
    ex = extremes(dt)
    a = [x for x in ex for _ in ex]
    b = [y for _ in ex for y in ex]
    r = in_subprocess(
        f"""
        import json
        from tests.ir.test_alu import tensor_divmod
        print(json.dumps(tensor_divmod({device!r}, {npdt.name!r}, {a!r}, {b!r})))
        """
    )
    assert r.returncode == 0, f"{device} {dt.name}: exit {r.returncode}\n{r.stderr[-3000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    with np.errstate(all="ignore"):
        an, bn = np.array(a, npdt), np.array(b, npdt)
        np.testing.assert_array_equal(np.array(got["floordiv"], npdt), an // bn)
        np.testing.assert_array_equal(np.array(got["mod"], npdt), an % bn)


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_finding3_floordiv_and_mod_at_the_dtype_minimum(device: str, dt: DType) -> None:
    # PYTHON gave int32 -2**31 // 3 == 715827882 (an overflowing abs), and x // 0 unlike CPU
    from uops import Tensor

    npdt = to_numpy(dt)
    lo = int(dtypes.min(dt))
    a = np.array([lo, lo, lo + 1, -7, 7, 5, lo], npdt)
    b = np.array([3, -3, 2, 2, 0, -1, 7], npdt)
    x, y = Tensor(a, device=device), Tensor(b, device=device)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((x // y).numpy(), a // b)
        np.testing.assert_array_equal((x % y).numpy(), a % b)
        np.testing.assert_array_equal((x // 3).numpy(), a // 3)
        np.testing.assert_array_equal((x % 3).numpy(), a % 3)


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
def test_finding6_float_mod_with_a_large_quotient_is_exact(device: str, dt: DType) -> None:
    from uops import Tensor

    if not supports_dtype(device, dt):
        pytest.skip(f"{device} does not support {dt}")
    npdt = to_numpy(dt)
    a = np.array([1e10, 5e7, -1e10, 7.5, -7.5, 3.0, -3.0, 0.0, -0.0, -1.0, 1.0, 2.5, 1e30], npdt)
    b = np.array([3.0, 0.3, 3.0, -2.0, 2.0, 3.0, 3.0, -2.0, 2.0, np.inf, -np.inf, 0.5, 7.0], npdt)
    got = (Tensor(a, device=device) % Tensor(b, device=device)).numpy()
    want = a % b
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # a zero takes the divisor's sign
    for s in (3.0, 0.3, -7.0):
        np.testing.assert_array_equal((Tensor(a, device=device) % s).numpy(), a % npdt.type(s))
    assert float((Tensor(np.array([1e10], npdt), device=device) % 3).numpy()[0]) == 1.0


FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e300, -1e300, 1e-310, math.inf, -math.inf, math.nan]


FLOAT_OPS = sorted((op for op, d in ALU.items() if d.floats is not None and op not in GroupOp.Ternary), key=str)


@pytest.mark.parametrize("op", FLOAT_OPS, ids=str)
def test_float_scalar_and_array_sides_agree_on_special_values(op: Ops) -> None:
    # IEEE rules on both sides: NaN, infinities, signed zeros, overflow, poles
    nargs = 1 if op in GroupOp.Unary else 2
    pairs = [(x,) for x in FLOAT_SPECIALS] if nargs == 1 else [(x, y) for x in FLOAT_SPECIALS for y in FLOAT_SPECIALS]
    out = dtypes.bool if op in GroupOp.Comparison else dtypes.float64
    cols = [np.array([p[k] for p in pairs], np.float64) for k in range(nargs)]
    with np.errstate(all="ignore"):
        arr = eval_array(op, cols)
    for p, z in zip(pairs, arr.tolist()):
        got = eval_scalar(op, out, p)
        assert got is not None, (op, p)
        same = (got != got and z != z) or (got == z and math.copysign(1, got) == math.copysign(1, z))
        # ordinary finite results come from two libms (math's, numpy's SIMD loops): one ulp apart at most
        ordinary = isinstance(got, float) and math.isfinite(got) and got != 0 and math.isfinite(z) and z != 0
        assert same or (ordinary and abs(got - z) <= math.ulp(got)), (op, p, got, z)


def test_spec_accepts_float_mod_and_names_float_idiv() -> None:
    from uops.ir.spec import SpecError, verify

    f = UOp.const(dtypes.float32, 2.0)
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(1), (), 0)
    zero = UOp.const(dtypes.int32, 0)
    verify(UOp.sink(g.index(zero).store(UOp(Ops.MOD, dtypes.float32, (f, f)))), "lowered")
    with pytest.raises(SpecError, match="IDIV is integer division"):
        verify(UOp.sink(g.index(zero).store(UOp(Ops.IDIV, dtypes.float32, (f, f)))), "lowered")


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64], ids=lambda d: d.name)
def test_signed_wraparound_with_constant_operands(device: str, dt: DType) -> None:
    # clang -O2 folded `x + INT_MIN` as if signed overflow could not happen (-9 + INT_MIN gave -9):
    # the IR defines wraparound, so the C compilers are told so (-fwrapv)
    from uops import Tensor

    npdt = to_numpy(dt)
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    a = np.array([-9, -7, 0, 5, lo, hi], npdt)
    x = Tensor(a, device=device)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal((x + lo).numpy(), a + npdt.type(lo))
        np.testing.assert_array_equal((x + hi).numpy(), a + npdt.type(hi))
        np.testing.assert_array_equal((x * hi).numpy(), a * npdt.type(hi))
        np.testing.assert_array_equal((x - lo).numpy(), a - npdt.type(lo))
        np.testing.assert_array_equal((-(x + lo)).numpy(), -(a + npdt.type(lo)))
