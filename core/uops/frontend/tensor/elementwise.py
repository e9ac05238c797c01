"""Elementwise: operand promotion and broadcasting, arithmetic, bitwise and comparison operators,
``where``, ``maximum``/``minimum`` and unary math.

Python scalars are *weak* (numpy 2, NEP 50): they take the tensor's dtype, and one that does not
fit that dtype raises OverflowError, except in comparisons, which numpy answers exactly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, cast

import numpy as np

from uops.dtypes import DType, dtypes, least_upper_dtype
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .args import Scalar, broadcast_shape, check_scalar, fits, scalar_dtype

if TYPE_CHECKING:
    from . import Tensor

_LOG2_E = 1.0 / math.log(2.0)
_LN_2 = math.log(2.0)


def same_device(self: Tensor, other: Tensor) -> None:
    if other.device != self.device:
        raise ValueError(
            f"tensors are on different devices ({self.device} and {other.device}); move one with .to({self.device!r})"
        )


def operands(self: Tensor, other: Tensor | Scalar | np.ndarray, reverse: bool = False) -> tuple[Tensor, Tensor]:
    """Both operands promoted to one dtype and broadcast to one shape (Python scalars are weak)."""
    cls = type(self)
    if isinstance(other, np.ndarray):
        other = cls(other, device=self.device)
    if isinstance(other, cls):
        self._same_device(other)
        dt = least_upper_dtype(self.dtype, other.dtype)
        y = other
    elif isinstance(other, (bool, int, float, np.generic)):
        v = other.item() if isinstance(other, np.generic) else other
        if isinstance(v, bool):
            dt = self.dtype
        elif isinstance(v, int):
            dt = self.dtype if not dtypes.is_bool(self.dtype) else scalar_dtype(v)
        elif isinstance(v, float):
            dt = self.dtype if dtypes.is_float(self.dtype) else dtypes.default_float
        else:
            raise TypeError(f"unsupported operand type {type(other).__name__} for a Tensor operation")
        y = cls(UOp.const(dt, check_scalar(v, dt)), device=self.device)
    else:
        raise TypeError(f"unsupported operand type {type(other).__name__} for a Tensor operation")
    x, y = self.cast(dt), y.cast(dt)
    shape = broadcast_shape(x.shape, y.shape)
    x, y = x.expand(shape), y.expand(shape)
    return (y, x) if reverse else (x, y)


def alu(self: Tensor, op: Ops, *srcs: Tensor, dtype: DType | None = None) -> Tensor:
    return self._new(UOp(op, dtype or self.dtype, (self.uop, *(s.uop for s in srcs))), *srcs)


def as_float(self: Tensor) -> Tensor:
    return self if dtypes.is_float(self.dtype) else self.cast(dtypes.default_float)


# ----- arithmetic -----
def add(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    return a._alu(Ops.ADD if not dtypes.is_bool(a.dtype) else Ops.OR, b)


def sub(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    if dtypes.is_bool(a.dtype):
        raise TypeError("subtracting bool tensors is not supported (numpy neither); use ^ or logical ops")
    return a._alu(Ops.SUB, b)


def mul(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    return a._alu(Ops.MUL if not dtypes.is_bool(a.dtype) else Ops.AND, b)


def div(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    """True division: integers divide as floats."""
    a, b = self._operands(y, reverse)
    a, b = a._float(), b._float()
    return a._alu(Ops.FDIV, b)


def floordiv(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    """numpy's floor division (rounds toward -inf). Floats compute ``floor(a / b)``, so an infinite
    dividend gives +-inf (``inf // 2``) where numpy, going through divmod, gives nan."""
    a, b = self._operands(y, reverse)
    if dtypes.is_float(a.dtype):
        return (a / b).floor()
    if dtypes.is_bool(a.dtype):
        a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
    q = a._alu(Ops.IDIV, b)
    if dtypes.is_unsigned(a.dtype):
        return q
    r = a._alu(Ops.MOD, b)
    fix = (r != 0) & ((r < 0) != (b < 0))
    return q - fix.cast(q.dtype)


def mod(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    """numpy's remainder: the IR's MOD (C's ``%``, exact ``fmod`` for floats) moved to the divisor's sign."""
    a, b = self._operands(y, reverse)
    if dtypes.is_bool(a.dtype):
        a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
    r = a._alu(Ops.MOD, b)
    if dtypes.is_unsigned(a.dtype):
        return r
    fix = (r != 0) & ((r < 0) != (b < 0))
    out = fix.where(r + b, r)
    if dtypes.is_float(a.dtype):  # a zero remainder takes the divisor's sign
        out = (r != 0).where(out, (b < 0).where(-b.zeros_like(), 0.0))
    return out


def pow(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:  # noqa: A001
    int_exponent = y if not reverse and isinstance(y, int) and not isinstance(y, bool) else None
    if int_exponent is not None and int_exponent < 0 and not dtypes.is_float(self.dtype):
        raise ValueError(
            f"integers to negative integer powers are not allowed ({self.dtype.name} ** {y}); cast to float first"
        )
    if int_exponent is not None and dtypes.is_int(self.dtype):
        check_scalar(int_exponent, self.dtype)
    # square-and-multiply: exact for integer dtypes at any exponent, a few roundings for floats
    if int_exponent is not None and 0 <= int_exponent and (int_exponent <= 8 or not dtypes.is_float(self.dtype)):
        x = self.cast(dtypes.default_int) if dtypes.is_bool(self.dtype) else self  # bool ** int is int
        if int_exponent == 0:
            return x.ones_like()
        result: Tensor | None = None
        base, n = x, int_exponent
        while n:
            if n & 1:
                result = base if result is None else result * base
            n >>= 1
            if n:
                base = base * base
        assert result is not None
        return result
    if not reverse and isinstance(y, float) and y == 0.5:
        return self._float().sqrt()
    a, b = self._operands(y, reverse)
    af, bf = a._float(), b._float()
    mag = (bf * af.abs().log2()).exp2()
    is_int = bf.trunc() == bf
    odd = is_int & ((bf * 0.5).trunc() != bf * 0.5)
    neg = mag._alu(Ops.NEG)
    res = (af < 0).where(is_int.where(odd.where(neg, mag), math.nan), mag)
    res = (bf == 0).where(1.0, res)
    return res if dtypes.is_float(a.dtype) else res.round_half_away().cast(a.dtype)


def neg(self: Tensor) -> Tensor:
    if dtypes.is_bool(self.dtype):
        return self.logical_not()
    return self._alu(Ops.NEG)


def bitwise_and(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    return a._alu(Ops.AND, b)


def bitwise_or(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    return a._alu(Ops.OR, b)


def bitwise_xor(self: Tensor, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    a, b = self._operands(y, reverse)
    return a._alu(Ops.XOR, b)


def invert(self: Tensor) -> Tensor:
    if dtypes.is_bool(self.dtype):
        return self.logical_not()
    return self._alu(Ops.XOR, self._new(UOp.const(self.dtype, -1)))


# ----- comparisons -----
def _out_of_range(self: Tensor, y: object) -> bool:
    return isinstance(y, int) and not isinstance(y, bool) and dtypes.is_int(self.dtype) and not fits(y, self.dtype)


def cmp(self: Tensor, op: Ops, y: Tensor | Scalar | np.ndarray, reverse: bool = False) -> Tensor:
    """``self op y`` (``y op self`` when reversed) as bool; an int outside the dtype compares exactly, like numpy."""
    if isinstance(y, np.generic):
        y = y.item()
    if _out_of_range(self, y):
        assert isinstance(y, int)
        above = y > dtypes.max(self.dtype)  # every element is below y (else above it)
        value = {Ops.CMPEQ: False, Ops.CMPNE: True, Ops.CMPLT: above != reverse}[op]
        return type(self).full(self.shape, value, dtype=dtypes.bool, device=self.device)
    a, b = self._operands(y, reverse)
    return a._alu(op, b, dtype=dtypes.bool)


def lt(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    return self._cmp(Ops.CMPLT, y)


def gt(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    return self._cmp(Ops.CMPLT, y, reverse=True)


def le(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    if not _out_of_range(self, y):
        a, b = self._operands(y)
        if dtypes.is_float(a.dtype):  # not (b < a) would be true for NaN; numpy says false
            return (a < b) | (a == b)
    return self._cmp(Ops.CMPLT, y, reverse=True).logical_not()


def ge(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    if not _out_of_range(self, y):
        a, b = self._operands(y)
        if dtypes.is_float(a.dtype):
            return (b < a) | (a == b)
    return self._cmp(Ops.CMPLT, y).logical_not()


def eq(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    return self._cmp(Ops.CMPEQ, y)


def ne(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    return self._cmp(Ops.CMPNE, y)


def logical_not(self: Tensor) -> Tensor:
    b = self.cast(dtypes.bool)
    return b._alu(Ops.CMPNE, self._new(UOp.const(dtypes.bool, True)).expand(b.shape))


def maximum(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    a, b = self._operands(y)
    if dtypes.is_bool(a.dtype):
        return a._alu(Ops.OR, b)
    return a._alu(Ops.MAX, b)


def minimum(self: Tensor, y: Tensor | Scalar | np.ndarray) -> Tensor:
    """Elementwise minimum; NaN on either side gives NaN, like numpy (through maximum)."""
    a, b = self._operands(y)
    if dtypes.is_bool(a.dtype):
        return a._alu(Ops.AND, b)
    return a._order_flip().maximum(b._order_flip())._order_flip()


def where(self: Tensor, x: Tensor | Scalar, y: Tensor | Scalar) -> Tensor:
    """``x`` where this (as bool) is true, else ``y``; all three broadcast."""
    cls = type(self)
    if isinstance(x, cls):
        x_, y_ = x._operands(y)
    elif isinstance(y, cls):
        y_, x_ = y._operands(x)
    else:
        vals = (cast(Scalar, x), cast(Scalar, y))
        dt = least_upper_dtype(*(scalar_dtype(v) for v in vals))
        x_, y_ = (self._new(UOp.const(dt, check_scalar(v, dt))) for v in vals)
    self._same_device(x_)
    cond = self.cast(dtypes.bool)
    shape = broadcast_shape(cond.shape, x_.shape, y_.shape)
    cond, x_, y_ = cond.expand(shape), x_.expand(shape), y_.expand(shape)
    return cond._alu(Ops.WHERE, x_, y_, dtype=x_.dtype)


def order_flip(self: Tensor) -> Tensor:
    """A map reversing the order of values (its own inverse), for min via max."""
    if dtypes.is_bool(self.dtype):
        return self.logical_not()
    if dtypes.is_unsigned(self.dtype):
        return type(self).full(self.shape, dtypes.max(self.dtype), dtype=self.dtype, device=self.device) - self
    if dtypes.is_int(self.dtype):
        return ~self  # -x overflows for the minimum value, ~x does not
    return -self


# ----- unary math -----
def exp2(self: Tensor) -> Tensor:
    return self._float()._alu(Ops.EXP2)


def log2(self: Tensor) -> Tensor:
    return self._float()._alu(Ops.LOG2)


def exp(self: Tensor) -> Tensor:
    return (self._float() * _LOG2_E).exp2()


def log(self: Tensor) -> Tensor:
    return self.log2() * _LN_2


def sqrt(self: Tensor) -> Tensor:
    return self._float()._alu(Ops.SQRT)


def rsqrt(self: Tensor) -> Tensor:
    return self.sqrt().reciprocal()


def reciprocal(self: Tensor) -> Tensor:
    return self._float()._alu(Ops.RECIPROCAL)


def sin(self: Tensor) -> Tensor:
    return self._float()._alu(Ops.SIN)


def cos(self: Tensor) -> Tensor:
    return (self._float() + math.pi / 2).sin()


def tan(self: Tensor) -> Tensor:
    return self.sin() / self.cos()


def trunc(self: Tensor) -> Tensor:
    return self._alu(Ops.TRUNC) if dtypes.is_float(self.dtype) else self


def floor(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype):
        return self
    t = self.trunc()
    return (self < t).where(t - 1, t)


def ceil(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype):
        return self
    t = self.trunc()
    return (self > t).where(t + 1, t)


def round_half_away(self: Tensor) -> Tensor:
    return (self < 0).where((self - 0.5).ceil(), (self + 0.5).floor()) if dtypes.is_float(self.dtype) else self


def abs(self: Tensor) -> Tensor:  # noqa: A001
    if dtypes.is_unsigned(self.dtype) or dtypes.is_bool(self.dtype):
        return self
    return (self < 0).where(-self, self)


def sign(self: Tensor) -> Tensor:
    s = (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype)
    return (self != self).where(self, s) if dtypes.is_float(self.dtype) else s  # sign(NaN) is NaN


def clip(self: Tensor, min_: Scalar | Tensor | None = None, max_: Scalar | Tensor | None = None) -> Tensor:
    if min_ is None and max_ is None:
        raise ValueError("clip needs min_ or max_")
    out = self
    if min_ is not None:
        out = out.maximum(min_)
    if max_ is not None:
        out = out.minimum(max_)
    return out


def square(self: Tensor) -> Tensor:
    return self * self
