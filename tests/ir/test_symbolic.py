"""uops.ir.symbolic: every rule with a case where it fires and one where it must not, plus a property
test (hypothesis) that simplify() never changes a value and never grows the expression."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uops import Ops, UOp, dtypes
from uops.dtypes import DType
from uops.ir.alu import eval_scalar
from uops.ir.rewrite import graph_rewrite
from uops.ir.symbolic import simplify, symbolic, symbolic_simple, tree_size

i32 = dtypes.int32


def var(name: str, lo: int, hi: int) -> UOp:
    return UOp.variable(name, lo, hi)


def c(v: int | float | bool, dt: dtypes = i32) -> UOp:  # type: ignore[valid-type]
    return UOp.const(dt, v)


x, y, z = var("x", 0, 100), var("y", 0, 3), var("z", 0, 7)
s, t = var("s", -50, 50), var("t", -3, 3)
f = var("fi", 0, 10).cast(dtypes.float32)
b = x < 10  # a bool that is not decided by ranges
bv = UOp(Ops.DEFINE_VAR, dtypes.bool, (), ("bv", 0, 1))


# ----------------------------------------------------------------------------------------
# an independent evaluator: C semantics, int32 wraparound
# ----------------------------------------------------------------------------------------
class Undefined(Exception):
    """The C value is undefined here (division by zero, INT_MIN / -1)."""


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v


def _c_div(a: int, b: int) -> int:
    if b == 0:
        raise Undefined("division by zero")
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def evaluate(u: UOp, env: dict[str, int]) -> int | bool:
    vals: dict[UOp, int | bool] = {}
    for n in u.toposort():
        op, a = n.op, [vals[q] for q in n.src]
        bits, signed = 8 * n.dtype.itemsize, n.dtype.kind == "i"
        if op is Ops.CONST:
            v: int | bool = n.arg
        elif op is Ops.DEFINE_VAR:
            v = env[n.arg[0]]
        elif op in (Ops.ADD, Ops.SUB, Ops.MUL):
            r = a[0] + a[1] if op is Ops.ADD else a[0] - a[1] if op is Ops.SUB else a[0] * a[1]
            v = bool(r) if n.dtype.kind == "b" else _wrap(r, bits, signed)
        elif op is Ops.NEG:
            v = _wrap(-a[0], bits, signed)
        elif op in (Ops.IDIV, Ops.MOD):
            q = _c_div(a[0], a[1])
            if _wrap(q, bits, signed) != q:
                raise Undefined("quotient overflows")
            v = q if op is Ops.IDIV else a[0] - q * a[1]
        elif op is Ops.MAX:
            v = max(a[0], a[1])
        elif op is Ops.CMPLT:
            v = a[0] < a[1]
        elif op is Ops.CMPNE:
            v = a[0] != a[1]
        elif op is Ops.CMPEQ:
            v = a[0] == a[1]
        elif op is Ops.WHERE:
            v = a[1] if a[0] else a[2]
        elif op in (Ops.AND, Ops.OR):
            if n.dtype.kind == "b":
                v = (a[0] and a[1]) if op is Ops.AND else (a[0] or a[1])
            else:
                v = a[0] & a[1] if op is Ops.AND else a[0] | a[1]
        elif op is Ops.CAST:
            v = bool(a[0]) if n.dtype.kind == "b" else _wrap(int(a[0]), bits, signed)
        else:
            raise NotImplementedError(f"the test evaluator has no rule for {op}")
        vals[n] = v
    return vals[u]


def same_values(a: UOp, b: UOp, variables: list[UOp], n: int = 64) -> bool:
    rng = random.Random(0)
    for _ in range(n):
        env = {v.arg[0]: rng.randint(v.arg[1], v.arg[2]) for v in variables}
        if evaluate(a, env) != evaluate(b, env):
            return False
    return True


# ----------------------------------------------------------------------------------------
# constant folding
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (c(7) // c(-2), -3),  # C truncation, not floor (-4)
        (c(-7) // c(2), -3),
        (c(-7) % c(2), -1),  # sign of the dividend
        (c(7) % c(-2), 1),
        (c(2**31 - 1) + c(1), -(2**31)),  # wraparound
        (c(65536) * c(65536), 0),
        (c(3).maximum(c(-4)), 3),
        (c(3) < c(4), True),
        (c(3).ne(c(3)), False),
        (c(3).eq(c(3)), True),
        (c(6) & c(3), 2),
        (c(6) | c(3), 7),
        (c(6) ^ c(3), 5),
        (c(1) << c(4), 16),
        (c(-16) >> c(2), -4),
        (-c(-(2**31)), -(2**31)),
        (UOp.const(dtypes.uint8, 250) + UOp.const(dtypes.uint8, 10), 4),
        (UOp.const(dtypes.int8, 127) + UOp.const(dtypes.int8, 1), -128),
    ],
)
def test_int_constant_folding(expr: UOp, want: int) -> None:
    out = simplify(expr)
    assert out.op is Ops.CONST and out.arg == want and out.dtype == expr.dtype


def test_float_folding_uses_the_dtype_precision() -> None:
    third = simplify(UOp.const(dtypes.float32, 1.0) / UOp.const(dtypes.float32, 3.0))
    assert third.op is Ops.CONST and third.arg == float(__import__("numpy").float32(1 / 3)) and third.arg != 1 / 3
    h = simplify(UOp.const(dtypes.float16, 2048.0) + UOp.const(dtypes.float16, 1.0))
    assert h.arg == 2048.0  # 2049 is not a float16
    d = simplify(UOp.const(dtypes.float64, 1.0) / UOp.const(dtypes.float64, 3.0))
    assert d.arg == 1 / 3


@pytest.mark.parametrize(
    "op, val, want",
    [
        (Ops.EXP2, 3.0, 8.0),
        (Ops.LOG2, 8.0, 3.0),
        (Ops.LOG2, 0.0, -math.inf),
        (Ops.SQRT, 2.0, float(__import__("numpy").float32(math.sqrt(2.0)))),
        (Ops.RECIPROCAL, 4.0, 0.25),
        (Ops.RECIPROCAL, 0.0, math.inf),
        (Ops.SIN, 0.5, float(__import__("numpy").float32(math.sin(0.5)))),
        (Ops.EXP2, 200.0, math.inf),  # overflows float32
        (Ops.TRUNC, -2.5, -2.0),
    ],
)
def test_transcendental_folding(op: Ops, val: float, want: float) -> None:
    out = simplify(UOp(op, dtypes.float32, (UOp.const(dtypes.float32, val),)))
    assert out.op is Ops.CONST and out.arg == want


@pytest.mark.parametrize(
    "expr",
    [
        UOp.const(dtypes.float32, 0.0) / UOp.const(dtypes.float32, 0.0),  # NaN
        UOp(Ops.SQRT, dtypes.float32, (UOp.const(dtypes.float32, -1.0),)),  # would be NaN
        UOp(Ops.LOG2, dtypes.float32, (UOp.const(dtypes.float32, -1.0),)),
        c(1) << c(40),
    ],
)
def test_undefined_constants_are_not_folded(expr: UOp) -> None:
    assert simplify(expr) is expr


def test_cast_and_bitcast_of_constants() -> None:
    assert simplify(c(-3).cast(dtypes.float32)).arg == -3.0
    assert simplify(UOp.const(dtypes.float32, -2.7).cast(i32)).arg == -2  # truncation
    assert simplify(c(300).cast(dtypes.uint8)).arg == 44
    assert simplify(c(0).cast(dtypes.bool)).arg is False
    assert simplify(UOp.const(dtypes.float32, 1.0).bitcast(dtypes.uint32)).arg == 0x3F800000
    big = UOp.const(dtypes.float32, 1e20).cast(i32)
    assert simplify(big) is big  # out of range: undefined in C, left alone


def test_folding_follows_the_alu_table_and_never_folds_nan() -> None:
    # the IR defines integer division by zero and INT_MIN // -1, so they fold like any other value
    assert simplify(UOp(Ops.IDIV, i32, (c(7), c(0)))).arg == 0
    assert simplify(UOp(Ops.MOD, i32, (c(7), c(0)))).arg == 0
    assert simplify(UOp(Ops.IDIV, i32, (c(-(2**31)), c(-1)))).arg == -(2**31)
    assert simplify(UOp(Ops.MOD, i32, (c(-(2**31)), c(-1)))).arg == 0
    nan = UOp(Ops.ADD, dtypes.float32, (UOp.const(dtypes.float32, math.inf), UOp.const(dtypes.float32, -math.inf)))
    assert simplify(nan) is nan  # a NaN's sign and payload are the hardware's: left alone
    assert eval_scalar(Ops.WHERE, i32, (False, 1, 2)) == 2
    assert eval_scalar(Ops.SHL, i32, (1, 32)) is None  # undefined: never folded


# ----------------------------------------------------------------------------------------
# identities: each with a case that fires and one that must not
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (x + 0, x),
        (x * 1, x),
        (x * 0, c(0)),
        (x // 1, x),
        (x % 1, c(0)),
        (UOp(Ops.NEG, i32, (-x,)), x),
        (x - x, c(0)),
        (x - 0, x),
        (x * -1, -x),
        (x // -1, -x),
        (x.maximum(x), x),
        (b & b, b),
        (b | b, b),
        (b & True, b),
        (b & False, c(False, dtypes.bool)),
        (b | True, c(True, dtypes.bool)),
        (b | False, b),
        (b.logical_not().logical_not(), b),
        (b.ne(False), b),
        (b.eq(True), b),
        (f * 1.0, f),
        (f - 0.0, f),
        (f / 1.0, f),
        (x + (-y), x - y),
        (x - (-y), x + y),
        (b.where(x, x), x),
        (c(True, dtypes.bool).where(x, y), x),
        (c(False, dtypes.bool).where(x, y), y),
        (bv.logical_not().where(x, y), bv.where(y, x)),
        (b.where(c(True, dtypes.bool), c(False, dtypes.bool)), b),
        (bv.where(c(False, dtypes.bool), c(True, dtypes.bool)), bv.logical_not()),
    ],
)
def test_identity_fires(expr: UOp, want: UOp) -> None:
    assert simplify(expr) is want


@pytest.mark.parametrize(
    "expr",
    [
        f * 0.0,  # NaN * 0 is NaN, and -x * 0 is -0.0
        f + 0.0,  # -0.0 + 0.0 is +0.0
        f - f,  # NaN - NaN
        f.ne(f),
        f.maximum(0.0),  # no range decisions on floats
        x * 2,
        x // 3,
        x % 3,
        b.where(x, y),
    ],
)
def test_identity_does_not_fire(expr: UOp) -> None:
    assert simplify(expr) is expr


def test_constants_move_right() -> None:
    e = UOp(Ops.ADD, i32, (c(3), x))
    assert simplify(e) is x + 3
    m = UOp(Ops.MUL, i32, (c(5), x))
    assert simplify(m) is x * 5
    lt = UOp(Ops.CMPLT, dtypes.bool, (c(3), x))  # not commutative: stays
    assert simplify(lt) is lt


# ----------------------------------------------------------------------------------------
# like terms and constants
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (x * 2 + x * 3, x * 5),
        ((x + 3) + 4, x + 7),
        (x + x, x * 2),
        ((x + 3) + y, (x + y) + 3),
        ((x * 4 + 3) * 2, None),  # stays: no like terms
        ((x + y) - x, y),
        ((x * 3) * 4, x * 12),
        (x - 5, x + -5),
        ((x // 4) * 4 + x % 4, x),
        ((s // 4) * 4 + s % 4, s),  # C identity holds for negatives too
        (((x // 8) * 8 + x % 8) * 3 + y, x * 3 + y),
        ((x // 4) * 8 + (x % 4) * 2, x * 2),
    ],
)
def test_collect_terms(expr: UOp, want: UOp | None) -> None:
    out = simplify(expr)
    assert out is (expr if want is None else want)
    assert tree_size(out) <= tree_size(expr)


def test_collect_terms_negative_cases() -> None:
    assert simplify((x // 4) * 4 + x % 8) is (x // 4) * 4 + x % 8  # different divisors
    assert simplify((x // 4) * 3 + x % 4) is (x // 4) * 3 + x % 4  # wrong scale
    assert simplify(x + y) is x + y


# ----------------------------------------------------------------------------------------
# division and modulo by constants
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        ((x * 4 + y) // 4, x),
        ((x * 4 + y) % 4, y),
        (y % 4, y),
        (y // 4, c(0)),
        (t % 4, t),  # |t| < 4: C keeps t, negatives included
        (t // 4, c(0)),
        ((x % 8) % 4, x % 4),
        ((s % 8) % 4, s % 4),  # holds for negatives in C
        ((x // 4) // 3, x // 12),
        ((s // 4) // 3, s // 12),
        ((x * 8) // 4, x * 2),
        ((x * 4 + y * 8) // 4, x + y * 2),
        ((x * 12 + y * 4 + z) // 4, x * 3 + y + z // 4),  # z in [0,8): partial
        ((x * 12 + y * 4 + z) % 4, z % 4),
        ((x * 16 + y * 4 + y) // 16, x),  # remainder y*5 in [0,16)
        (((x * 4 + y) * 3 + 2) // 3, x * 4 + y),
        ((var("g", 0, 31) * 64 + var("l", 0, 63)) // 64, var("g", 0, 31)),  # global*local split
        ((var("g", 0, 31) * 64 + var("l", 0, 63)) % 64, var("l", 0, 63)),
        ((var("w", 4, 7)) % 4, var("w", 4, 7) + -4),  # one quotient bucket
        (x % -4, x % 4),
        ((x * 8 + z) // 64, x // 8),  # a common factor: the rest z stays in [0, 8)
        ((x * 8 + z) % 64, (x % 8) * 8 + z),
        ((x * 24 + z * 3 + 1) // 48, x // 2),  # the rest 3z+1 in [1, 24)
        ((x * 58 + var("l", 0, 57) + 116) // 3364, (x + 2) // 58),  # a padded row's flat index, row // rows
    ],
)
def test_divmod_fires(expr: UOp, want: UOp) -> None:
    out = simplify(expr)
    assert out is want, f"{out.pretty()}"
    assert same_values(expr, out, [x, y, z, s, t, var("g", 0, 31), var("l", 0, 63), var("w", 4, 7)])


@pytest.mark.parametrize(
    "expr",
    [
        (s * 4 + y) // 4,  # s may be negative: C truncation differs from floor
        (s * 4 + y) % 4,
        (x * 4 + s) // 4,  # the remainder part may be negative
        var("q", 0, 4) % 4,  # x%n -> x needs x < n
        s % 51,  # |s| < 51 holds, but s % 50 does not
        (x % 8) % 3,  # 8 is not a multiple of 3
        (x * 8 + var("q", 0, 8)) // 64,  # the rest reaches 8: no common factor folds
        (s * 8 + z) // 64,  # s may be negative
        x // 3,
    ],
)
def test_divmod_does_not_fire_when_ranges_fail(expr: UOp) -> None:
    out = simplify(expr)
    variables = [x, y, z, s, t, var("q", 0, 4)]
    assert same_values(expr, out, variables)
    if expr.op is not Ops.MOD or expr.src[0] is not s:
        assert out is expr, f"{out.pretty()}"


def test_mod_drops_multiples_but_keeps_a_remainder_that_does_not_fit() -> None:
    q = var("q", 0, 4)  # reaches 4: (x*4+q)%4 is q%4, not q
    assert simplify((x * 4 + q) % 4) is q % 4
    assert simplify((x * 4 + q) // 4) is x + q // 4


def test_mod_of_signed_fits_only_inside_the_divisor() -> None:
    assert simplify(s % 51) is s
    assert simplify(s % 50) is s % 50


def test_divmod_refuses_when_terms_may_wrap() -> None:
    big = var("big", 0, 2**30)
    e = (big * 8 + y) // 8  # big*8 wraps int32: the identity (8b+y)//8 == b no longer holds
    assert simplify(e) is not big
    assert same_values(e, simplify(e), [big, y])


def test_division_by_constant_zero_and_minus_one_follow_the_ir_definition() -> None:
    assert simplify((x * 4) // 0).arg == 0 and simplify(x % 0).arg == 0
    m = var("m", -(2**31), 0)
    assert simplify(m // -1) is UOp(Ops.NEG, i32, (m,))  # wraps at INT_MIN, like INT_MIN IDIV -1
    assert simplify(m % -1).arg == 0


def test_flattened_multi_dim_index_round_trips() -> None:
    i0, i1, i2 = var("i0", 0, 4), var("i1", 0, 2), var("i2", 0, 3)
    flat = (i0 * 3 + i1) * 4 + i2  # shape (5, 3, 4)
    assert simplify(flat % 4) is i2
    assert simplify((flat // 4) % 3) is i1
    assert simplify(flat // 12) is i0
    # a reshape of (5,12) -> (60,) -> (5,12) is the identity
    r = var("r", 0, 4) * 12 + var("k", 0, 11)
    assert simplify(r // 12) is var("r", 0, 4)
    assert simplify(r % 12) is var("k", 0, 11)


# ----------------------------------------------------------------------------------------
# comparisons, max, where
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, want",
    [
        (x < 101, c(True, dtypes.bool)),
        (x < 0, c(False, dtypes.bool)),
        (y < z + 4, c(True, dtypes.bool)),
        ((x + 1) < 5, x < 4),
        ((x * 4) < 10, x < 3),
        ((x * 4 + 8) < 17, x < 3),
        ((x + -1).ne(3), x.ne(4)),
        ((x + 2).eq(5), x.eq(3)),
        (x.ne(101), c(True, dtypes.bool)),
        ((x < 7).logical_not(), UOp(Ops.CMPLT, dtypes.bool, (c(6), x))),
        (x.maximum(y + 200), y + 200),
        (x.maximum(-1), x),
        (x.minimum(200), x),
        (x < x, c(False, dtypes.bool)),
        ((x < 200).where(x, y), x),
        (x.cast(dtypes.int64).eq(UOp.const(dtypes.int64, -1)), c(False, dtypes.bool)),
    ],
)
def test_comparisons_and_max_decided(expr: UOp, want: UOp) -> None:
    out = simplify(expr)
    assert out is want, f"{out.pretty()}"


@pytest.mark.parametrize(
    "expr",
    [
        x < 50,
        x.maximum(50),
        x.maximum(y),
        s < t,
        (var("big", 0, 2**30) * 4) < 12,  # may wrap: not divided through
        f < 100.0,
    ],
)
def test_comparisons_and_max_not_decided(expr: UOp) -> None:
    assert simplify(expr) is expr


# ----------------------------------------------------------------------------------------
# the two rule sets and the lowering's use of them
# ----------------------------------------------------------------------------------------
def test_symbolic_simple_folds_but_does_not_use_ranges() -> None:
    assert graph_rewrite(c(2) * c(3) + x * 1, symbolic_simple) is x + 6
    assert graph_rewrite(y % 4, symbolic_simple) is y % 4
    assert graph_rewrite(y % 4, symbolic) is y


def test_top_down_use_reaches_the_same_result() -> None:
    e = ((x * 4 + y) // 4) * 4 + ((x * 4 + y) % 4)
    assert simplify(graph_rewrite(e, symbolic)) is x * 4 + y
    assert simplify(e) is x * 4 + y


def test_deep_sum_simplifies_without_recursion_error() -> None:
    e = x
    for _ in range(20_000):
        e = e + 1
    assert simplify(e) is x + 20_000


# ----------------------------------------------------------------------------------------
# property: values never change, expressions never grow
# ----------------------------------------------------------------------------------------
@st.composite
def int_expr(draw: st.DrawFn, variables: list[UOp], depth: int) -> UOp:
    if depth <= 0 or draw(st.integers(0, 5)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(variables))
        big = draw(st.integers(0, 9)) == 0
        return c(draw(st.integers(-(2**30), 2**30) if big else st.integers(-12, 12)))
    kind = draw(st.sampled_from(["+", "-", "*", "//", "%", "max", "min", "neg", "where", "+c", "*c"]))
    a = draw(int_expr(variables, depth - 1))
    if kind == "neg":
        return -a
    if kind in ("//", "%"):
        d = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, -1, -3, -4]))
        return a // d if kind == "//" else a % d
    if kind == "+c":
        return a + draw(st.integers(-20, 20))
    if kind == "*c":
        return a * draw(st.sampled_from([2, 3, 4, 8, -2, -1, 0, 1, 16]))
    if kind == "where":
        return draw(bool_expr(variables, depth - 1)).where(a, draw(int_expr(variables, depth - 1)))
    o = draw(int_expr(variables, depth - 1))
    return (
        a + o
        if kind == "+"
        else a - o
        if kind == "-"
        else a * o
        if kind == "*"
        else a.maximum(o)
        if kind == "max"
        else a.minimum(o)
    )


@st.composite
def bool_expr(draw: st.DrawFn, variables: list[UOp], depth: int) -> UOp:
    a, o = draw(int_expr(variables, depth)), draw(int_expr(variables, 0))
    k = draw(st.sampled_from(["lt", "gt", "ne", "eq"]))
    cmp = a < o if k == "lt" else a > o if k == "gt" else a.ne(o) if k == "ne" else a.eq(o)
    r = draw(st.integers(0, 4))
    return cmp.logical_not() if r == 0 else cmp & draw(bool_expr(variables, 0)) if r == 1 else cmp


@st.composite
def case(draw: st.DrawFn, signed: bool) -> tuple[UOp, list[UOp]]:
    variables = []
    for i in range(3):
        lo = draw(st.integers(-40, 10)) if signed else draw(st.integers(0, 10))
        variables.append(var(f"v{i}", lo, lo + draw(st.integers(0, 60))))
    return draw(st.one_of(int_expr(variables, 4), bool_expr(variables, 3))), variables


def _check(e: UOp, variables: list[UOp], seed: int) -> None:
    out = simplify(e)
    assert tree_size(out) <= tree_size(e), f"grew:\n{e.pretty()}\n->\n{out.pretty()}"
    top_down = graph_rewrite(e, symbolic)  # how the lowering applies the rules
    rng = random.Random(seed)
    for i in range(24):
        lo_hi = (lambda v: v.arg[1]) if i == 0 else (lambda v: v.arg[2]) if i == 1 else None
        env = {v.arg[0]: lo_hi(v) if lo_hi else rng.randint(v.arg[1], v.arg[2]) for v in variables}
        try:
            want = evaluate(e, env)
        except Undefined:
            continue
        assert evaluate(out, env) == want, f"{env}\n{e.pretty()}\n->\n{out.pretty()}"
        assert evaluate(top_down, env) == want, f"top-down {env}\n{e.pretty()}\n->\n{top_down.pretty()}"


_prop = settings(max_examples=1200, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@_prop
@given(case(signed=False), st.integers(0, 2**32))
def test_property_nonnegative_variables(cs: tuple[UOp, list[UOp]], seed: int) -> None:
    _check(cs[0], cs[1], seed)


@_prop
@given(case(signed=True), st.integers(0, 2**32))
def test_property_signed_variables(cs: tuple[UOp, list[UOp]], seed: int) -> None:
    _check(cs[0], cs[1], seed)


# ----------------------------------------------------------------------------------------
# the value-range fast path
# ----------------------------------------------------------------------------------------
@_prop
@given(case(signed=True), st.integers(0, 2**32))
def test_property_range_fast_path_is_exact(cs: tuple[UOp, list[UOp]], seed: int) -> None:
    from uops.ir.uop import _compute_range_general

    e = cs[0]
    for u in (*e.toposort(), *simplify(e).toposort()):
        assert u._range() == _compute_range_general(u), u.pretty()
        assert tuple(map(type, u._range())) == tuple(map(type, _compute_range_general(u)))


@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64])
@pytest.mark.parametrize("op", [Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ])
def test_integer_folding_matches_the_alu_table_at_the_edges(dt: DType, op: Ops) -> None:
    # the folding rule's fast path for two ints must give the table's answer: wraparound, C division,
    # INT_MIN / -1 and division by zero included
    from uops.ir.symbolic import _fold_alu

    edges = sorted(
        {dtypes.min(dt), dtypes.min(dt) + 1, -1 if dt.kind == "i" else 0, 0, 1, 3, -3 if dt.kind == "i" else 5}
    )
    edges = sorted({*edges, dtypes.max(dt)})
    out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) else dt
    for a in edges:
        for b in edges:
            u = UOp(op, out_dt, (UOp.const(dt, a), UOp.const(dt, b)))
            want = eval_scalar(op, out_dt, (a, b), dt)
            got = _fold_alu(u)
            if want is None:
                assert got is None, (op, dt, a, b)
            else:
                assert got is not None and got.op is Ops.CONST, (op, dt, a, b)
                assert got.arg == want and type(got.arg) is type(want), (op, dt, a, b)


def test_sum_facts_kept_on_nodes_are_exact() -> None:
    # _collect keeps, on an integer sum, the bases of its flattening when they are distinct with no
    # constant and no (y//c, y%c) pair: check every such fact against a fresh flattening
    from uops.ir.symbolic import _flatten

    rng = random.Random(7)
    xs = [var("a", 0, 9), var("b", 0, 5), var("c", -4, 4)]

    def expr(depth: int) -> UOp:
        if depth == 0 or rng.random() < 0.2:
            return rng.choice(xs) if rng.random() < 0.8 else c(rng.randint(-3, 9))
        a, r = expr(depth - 1), rng.random()
        if r < 0.35:
            return a * rng.choice([1, 2, 4, -1]) + expr(depth - 1)
        if r < 0.5:
            return a - expr(depth - 1)
        if r < 0.65:
            return a + rng.randint(-3, 5)
        if r < 0.8:
            return a // rng.choice([2, 4]) if rng.random() < 0.5 else a % rng.choice([2, 4])
        return (a // 4) * 4 + a % 4 if rng.random() < 0.5 else a * 3

    checked = 0
    for _ in range(400):
        e = expr(5)
        simplify(e)
        for n in e.toposort():
            if n._ref.flat is None:
                continue
            f = _flatten(n, exact=False)
            assert f is not None and not f.rep and f.nconst == 0 and set(f.terms) == set(n._ref.flat), n
            t = f.terms
            divs = {b.src: b for b in t if b.op is Ops.IDIV}
            for b in t:  # no pair to recombine
                if b.op is Ops.MOD and b.src[1].op is Ops.CONST and t[b] and b.src in divs:
                    assert t[divs[b.src]] != t[b] * b.src[1].arg, n
            checked += 1
    assert checked > 50


def test_results_taken_as_final_are_fixed_points() -> None:
    # a sum that _collect rebuilds is marked settled, so simplify's walk does not offer it to the rules
    # again: check each one against a fresh walk that does (no memo), for sums of several dtypes
    from uops.ir.symbolic import _FINAL

    rng = random.Random(11)

    def expr(depth: int, xs: list[UOp], dt: DType) -> UOp:
        if depth == 0 or rng.random() < 0.2:
            return rng.choice(xs) if rng.random() < 0.8 else UOp.const(dt, rng.randint(0, 9))
        a, r = expr(depth - 1, xs, dt), rng.random()
        if r < 0.3:
            return a * rng.choice([2, 3, 4, 16, -1, -3]) + expr(depth - 1, xs, dt)
        if r < 0.45:
            return a - expr(depth - 1, xs, dt)
        if r < 0.55:
            return -a + expr(depth - 1, xs, dt)
        if r < 0.7:
            return a + rng.randint(-3, 5)
        if r < 0.85:
            return a // rng.choice([2, 4, 3]) if rng.random() < 0.5 else a % rng.choice([2, 4, 3])
        return (a // 4) * 4 + a % 4 if rng.random() < 0.5 else a.maximum(expr(depth - 1, xs, dt))

    settled = 0
    for dt in (dtypes.int32, dtypes.int8, dtypes.int64, dtypes.uint32):
        signed = dt.kind == "i"
        xs = [UOp.variable(n, -5 if signed else 0, hi, dt) for n, hi in (("p", 9), ("q", 40), ("r", 3))]
        for _ in range(150):
            for n in simplify(expr(5, xs, dt)).toposort():
                if n._ref.memo is _FINAL:
                    assert graph_rewrite(n, symbolic, bottom_up=True) is n, n.pretty()
                    settled += 1
    assert settled > 100


def test_sums_collected_as_they_are_rebuilt_match_the_rules() -> None:
    # symbolic's walk collects an integer sum while it rebuilds it on new sources (the node the rule would
    # replace is never made): what it gives must be what the rules give the plain node, and a sum it keeps
    # must be a fixed point
    from uops.ir.symbolic import _FINAL, _build_node

    rng = random.Random(3)
    leaves = [var("p", -5, 9), var("q", 0, 40), var("r", 0, 3)]
    leaves += [leaves[1] // 4, leaves[1] % 4, leaves[0].maximum(leaves[2]), -leaves[2], c(0), c(5)]

    def operand() -> UOp:
        e = rng.choice(leaves)
        for _ in range(rng.randint(0, 3)):
            e = rng.choice([e * rng.choice([2, -1, 4]), e + rng.choice(leaves), e - rng.choice(leaves), e + 3])
        return simplify(e)

    kept = collected = 0
    for _ in range(600):
        op = rng.choice([Ops.ADD, Ops.SUB])
        a, b = operand(), operand()
        want = graph_rewrite(UOp(op, i32, (a, b)), symbolic, bottom_up=True)
        got = _build_node(op, i32, (a, b), None)
        assert graph_rewrite(got, symbolic, bottom_up=True) is want, (op, a.pretty(), b.pretty())
        if got.op is op and got.src == (a, b) and got._ref.memo is _FINAL:
            assert want is got
            kept += 1
        elif got is want:
            collected += 1
    assert kept > 50 and collected > 50, (kept, collected)


def test_continued_sums_are_the_rebuilt_ones() -> None:
    # (y + k1) + k2 and (y + k) +/- t*m continue y instead of flattening and rebuilding the sum: for every
    # y as _build writes it, the result must be the very node the rebuild gives
    from uops.ir.symbolic import _build, _collect, _flatten, _spine

    rng = random.Random(5)
    leaves = [var("p", -5, 9), var("q", 0, 40), var("r", 0, 3), var("s", -2, 2)]
    leaves += [leaves[1] // 4, leaves[0].maximum(leaves[2]), leaves[1] % 8]
    checked = 0
    for _ in range(400):
        bases = rng.sample(leaves, rng.randint(1, 4))
        y = _build([(b, rng.choice([1, -1, 2, -3, 16])) for b in bases], 0, leaves[0])
        if _spine(y, None) is None:
            continue
        a = UOp(Ops.ADD, dtypes.int32, (y, c(rng.choice([-3, 1, 7]))))
        t = rng.choice([u for u in leaves if u not in bases and u.op is not Ops.MOD and u.op is not Ops.IDIV] or [a])
        if t is a:
            continue
        tm = t if rng.random() < 0.5 else t * c(rng.choice([2, 5, -4]))
        for x in (
            UOp(Ops.ADD, dtypes.int32, (a, c(rng.choice([-7, 3, -1])))),
            UOp(Ops.ADD, dtypes.int32, (a, tm)),
            UOp(Ops.SUB, dtypes.int32, (a, tm)),
        ):
            f = _flatten(x, exact=False)
            assert f is not None
            want = _build(list(f.terms.items()), f.k, x)
            lo, hi = want._range()
            assert _collect(x) is (want if lo != hi else c(lo)), x.pretty()
            checked += 1
    assert checked > 300


# the total size of the simplified index expressions below, at this seed, when speed work on the
# simplifier began: a faster simplifier must not get there by simplifying less
INDEX_SIZES_BEFORE = 6208


def simplified_index_workload_size() -> int:
    """Simplify 600 random index expressions (fixed seed), check 100 of them by value, return the total node count."""
    rng = random.Random(1234)
    vs = [var("g0", 0, 31), var("g1", 0, 15), var("l0", 0, 15), var("r0", 0, 63), var("r1", 0, 2)]

    def expr(depth: int) -> UOp:
        if depth == 0 or rng.random() < 0.15:
            return rng.choice(vs) if rng.random() < 0.8 else c(rng.randint(0, 9))
        a, r = expr(depth - 1), rng.random()
        if r < 0.3:
            return a * rng.choice([2, 3, 4, 8, 16]) + expr(depth - 1)
        if r < 0.45:
            return a // rng.choice([2, 3, 4, 8])
        if r < 0.6:
            return a % rng.choice([2, 3, 4, 8])
        if r < 0.8:
            return a + rng.randint(-3, 8)
        return a + expr(depth - 1)

    exprs = [expr(5) for _ in range(600)]
    out = [simplify(e) for e in exprs]
    for e, o in zip(exprs[:100], out[:100]):
        env = {v.arg[0]: rng.randint(v.arg[1], v.arg[2]) for v in e.variables}
        assert evaluate(o, env) == evaluate(e, env), (e, o)
    return sum(len(o.toposort()) for o in out)


def test_simplified_index_expressions_are_no_larger_than_before() -> None:
    assert simplified_index_workload_size() <= INDEX_SIZES_BEFORE
