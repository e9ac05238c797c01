"""The semantics of every ALU op, written once: on Python scalars and on numpy arrays.

Constant folding (``symbolic``), the value-range analysis (``uop``) and the PYTHON backend all
evaluate through this table, so they cannot drift apart. Every renderer must produce the same
values (the lowering guards integer division where C would trap, see ``codegen.lowerer``).

The IR's definitions, including the cases C leaves undefined:

* Integers wrap modulo ``2**bits`` (ADD, SUB, MUL, NEG, SHL, POW, and the result of IDIV).
* IDIV truncates toward zero and MOD has the dividend's sign, so ``a == (a IDIV b) * b + a MOD b``.
  ``x IDIV 0 == 0`` and ``x MOD 0 == 0`` (numpy's answers for ints); ``INT_MIN IDIV -1 == INT_MIN``
  (it wraps) and ``INT_MIN MOD -1 == 0``.
* Float MOD is C's ``fmod``: exact, with the dividend's sign, NaN for a zero divisor or an infinite
  dividend. (The front end's ``%`` moves the sign to the divisor's, as numpy's remainder does.)
* SHR of a signed integer is arithmetic. SHL/SHR by a count outside ``[0, bits)`` is undefined:
  never folded, and the front end never builds one.
* Floats are IEEE: division by zero gives +-inf or NaN, comparisons with NaN are false (CMPNE
  true), MAX propagates a NaN from either side (numpy's ``maximum``).
* NEG of a bool is logical not; ADD/MUL of bools are OR/AND (the bool result of the int value).
* Integer POW with a negative exponent truncates the exact result toward zero (0 unless the base
  is 1 or -1). Float-only ops (EXP2, LOG2, SIN, SQRT, RECIPROCAL, FDIV) have no integer meaning.
* Float MULACC rounds the product before the sum (no fused rounding).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uops.dtypes import DType, truncate
from uops.ir.ops import GroupOp, Ops

if TYPE_CHECKING:  # numpy is imported on first use of the array side, so `import uops` stays cheap
    import numpy as np

__all__ = ["ALU", "AluDef", "eval_array", "eval_scalar", "idiv", "imod"]

Scalar = bool | int | float


# ----- integer division: the fixed definitions, on Python ints -----
def idiv(a: int, b: int) -> int:
    """Truncating division; 0 for a zero divisor (unbounded: the caller wraps to the dtype)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def imod(a: int, b: int) -> int:
    """The remainder of ``idiv``: the dividend's sign; 0 for a zero divisor."""
    return a - idiv(a, b) * b if b != 0 else 0


# ----- Python scalars: ints (unbounded, wrapped by eval_scalar) -----
def _int_pow(a: int, b: int, dt: DType) -> int:
    if b >= 0:
        return pow(a, b, 1 << (8 * dt.itemsize)) if dt.kind != "b" else int(a or b == 0)
    return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0


def _shift(op: Ops) -> Callable[[DType, int, int], int | None]:
    def f(dt: DType, a: int, b: int) -> int | None:
        if not 0 <= b < 8 * dt.itemsize:
            return None
        return a << b if op is Ops.SHL else a >> b

    return f


# ----- Python scalars: floats (IEEE, rounded to the dtype by eval_scalar) -----
def _fdiv(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _fmod(a: float, b: float) -> float:
    try:
        return math.fmod(a, b)
    except ValueError:  # b == 0 or a infinite
        return math.nan


def _exp2(a: float) -> float:
    try:
        return 2.0**a
    except OverflowError:
        return math.inf


def _log2(a: float) -> float:
    if a > 0:
        return math.log2(a)
    return -math.inf if a == 0 else math.nan


def _pow(a: float, b: float) -> float:
    odd = math.isfinite(b) and b == int(b) and int(b) % 2 == 1
    try:
        return math.pow(a, b)
    except OverflowError:
        return -math.inf if a < 0 and odd else math.inf
    except ValueError:  # 0 ** negative is a pole; a negative base to a non-integer power has no real value
        return (math.copysign(math.inf, a) if odd else math.inf) if a == 0 else math.nan


def _trunc(a: float) -> float:
    return math.copysign(math.trunc(a), a) if math.isfinite(a) else a  # -0.5 -> -0.0, as C's trunc


def _fmax(a: float, b: float) -> float:
    return a if a > b or a != a else b


# ----- numpy arrays (computed in the operands' numpy dtype; wraps like the hardware) -----
def _np_safe_divisor(b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The divisor with 0 and (signed) -1 replaced by 1, and where each was: then no lane traps or overflows."""
    import numpy as np

    zero = np.asarray(b == 0)
    neg1 = np.asarray(b == -1) if b.dtype.kind == "i" else np.zeros_like(zero)
    return np.where(zero | neg1, np.ones_like(b), b), zero, neg1


def _np_idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    safe, zero, neg1 = _np_safe_divisor(b)
    q = (a - np.fmod(a, safe)) // safe  # exact: a - fmod(a, safe) is a multiple of safe
    q = np.where(neg1, np.negative(a), q)
    return np.where(zero, np.zeros_like(q), q)


def _np_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    if a.dtype.kind == "f":
        return np.fmod(a, b)
    return np.fmod(a, _np_safe_divisor(b)[0])  # x % 1 == 0 covers both fixed cases


def _np_shift(op: Ops) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        import numpy as np

        fn = np.left_shift if op is Ops.SHL else np.right_shift
        return fn(a, b.astype(a.dtype))

    return f


def _np_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    if a.dtype.kind == "f":
        return np.power(a, b)
    if a.dtype.kind == "b":
        return a | ~b
    neg = b < 0
    pos = np.power(a, np.where(neg, np.zeros_like(b), b))
    small = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)).astype(a.dtype)
    return np.where(neg, small, pos)


def _np_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.maximum(a, b)


def _np(name: str) -> Callable[..., np.ndarray]:
    """A numpy ufunc by name, looked up on first use."""

    def f(*xs: np.ndarray) -> np.ndarray:
        import numpy as np

        return getattr(np, name)(*xs)

    f.__name__ = f"np.{name}"
    return f


def _np_neg(a: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.logical_not(a) if a.dtype.kind == "b" else np.negative(a)


def _np_where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.where(c, a, b)


def _np_mulacc(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.add(np.multiply(a, b), c)


# ----- the table -----
@dataclass(frozen=True)
class AluDef:
    """One op: ``ints(dt, *ints)`` and ``floats(*floats)`` on Python scalars (None: undefined there),
    ``array(*arrays)`` on numpy arrays of the operands' dtype. Results are not yet rounded to the dtype."""

    ints: Callable[..., Scalar | None] | None
    floats: Callable[..., Scalar | None] | None
    array: Callable[..., np.ndarray]


def _i(f: Callable[..., Scalar | None]) -> Callable[..., Scalar | None]:
    """An int rule that does not need the dtype."""
    return lambda dt, *v: f(*v)


ALU: dict[Ops, AluDef] = {
    Ops.NEG: AluDef(lambda dt, a: (not a) if dt.kind == "b" else -a, lambda a: -a, _np_neg),
    Ops.EXP2: AluDef(None, _exp2, _np("exp2")),
    Ops.LOG2: AluDef(None, _log2, _np("log2")),
    Ops.SIN: AluDef(None, lambda a: math.sin(a) if math.isfinite(a) else math.nan, _np("sin")),
    Ops.SQRT: AluDef(None, lambda a: math.sqrt(a) if a >= 0 else math.nan if a < 0 else a, _np("sqrt")),
    Ops.RECIPROCAL: AluDef(None, lambda a: _fdiv(1.0, a), _np("reciprocal")),
    Ops.TRUNC: AluDef(_i(lambda a: a), _trunc, _np("trunc")),
    Ops.ADD: AluDef(_i(lambda a, b: a + b), lambda a, b: a + b, _np("add")),
    Ops.SUB: AluDef(_i(lambda a, b: a - b), lambda a, b: a - b, _np("subtract")),
    Ops.MUL: AluDef(_i(lambda a, b: a * b), lambda a, b: a * b, _np("multiply")),
    Ops.IDIV: AluDef(_i(idiv), None, _np_idiv),
    Ops.FDIV: AluDef(None, _fdiv, _np("true_divide")),
    Ops.MOD: AluDef(_i(imod), _fmod, _np_mod),
    Ops.MAX: AluDef(_i(max), _fmax, _np_max),
    Ops.CMPLT: AluDef(_i(lambda a, b: a < b), lambda a, b: a < b, _np("less")),
    Ops.CMPNE: AluDef(_i(lambda a, b: a != b), lambda a, b: a != b, _np("not_equal")),
    Ops.CMPEQ: AluDef(_i(lambda a, b: a == b), lambda a, b: a == b, _np("equal")),
    Ops.AND: AluDef(_i(lambda a, b: a & b), None, _np("bitwise_and")),
    Ops.OR: AluDef(_i(lambda a, b: a | b), None, _np("bitwise_or")),
    Ops.XOR: AluDef(_i(lambda a, b: a ^ b), None, _np("bitwise_xor")),
    Ops.SHL: AluDef(_shift(Ops.SHL), None, _np_shift(Ops.SHL)),
    Ops.SHR: AluDef(_shift(Ops.SHR), None, _np_shift(Ops.SHR)),
    Ops.POW: AluDef(_int_pow, _pow, _np_pow),
    Ops.WHERE: AluDef(_i(lambda c, a, b: a if c else b), lambda c, a, b: a if c else b, _np_where),
    Ops.MULACC: AluDef(_i(lambda a, b, c: a * b + c), lambda a, b, c: a * b + c, _np_mulacc),
}
assert set(ALU) == GroupOp.ALU - {Ops.CAST, Ops.BITCAST}, "every ALU op has one definition"


def eval_scalar(op: Ops, dtype: DType, vals: tuple[Scalar, ...], operand: DType | None = None) -> Scalar | None:
    """``op`` on Python values as a ``dtype`` result (wrapped or rounded), or None where the IR leaves it undefined.

    ``operand`` is the dtype of the operands (of the branches for WHERE); by default ``dtype``, or a float
    kind when a value is a float (comparisons need it: their result is bool).
    """
    d = ALU[op]
    src = dtype if operand is None else operand
    if op is Ops.WHERE:
        return truncate(vals[1] if vals[0] else vals[2], dtype)
    if src.kind == "f" or any(v.__class__ is float for v in vals):
        if op is Ops.MULACC:  # the product is rounded to the dtype before the sum
            a, b, c = (float(v) for v in vals)
            return truncate(float(truncate(a * b, dtype)) + c, dtype)
        ff = d.floats
        res = None if ff is None else ff(*(float(v) for v in vals))
    else:
        fi = d.ints
        res = None if fi is None else fi(src.scalar(), *(int(v) for v in vals))
    return None if res is None else truncate(res, dtype)


def eval_array(op: Ops, srcs: list[np.ndarray]) -> np.ndarray:
    """``op`` on numpy arrays of the operands' dtype, not yet rounded to the result dtype."""
    return ALU[op].array(*srcs)
