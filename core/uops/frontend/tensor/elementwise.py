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

from ..schedule import const_view
from .args import Scalar, broadcast_shape, check_scalar, fits, result_dtype, scalar_dtype

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
        dt = result_dtype(self.device, self.dtype, other.dtype)
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
        x = self.cast(dt)
        y = cls._untracked(const_view(check_scalar(v, dt), dt, x.shape), self.device)
        return (y, x) if reverse else (x, y)
    else:
        raise TypeError(f"unsupported operand type {type(other).__name__} for a Tensor operation")
    x, y = self.cast(dt), y.cast(dt)
    if x.shape != y.shape:
        shape = broadcast_shape(x.shape, y.shape)
        x, y = x._broadcast_to(shape), y._broadcast_to(shape)
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
    # a negative base (-0.0 and -inf too) takes the exponent's oddness; only a finite nonzero one makes NaN
    negative = af.signbit() & (af == af)
    signed = (is_int | (af == 0) | (af.abs() == math.inf)).where(odd.where(neg, mag), math.nan)
    res = negative.where(signed, mag)
    res = ((bf == 0) | (af == 1) | ((af.abs() == 1) & (bf.abs() == math.inf))).where(1.0, res)
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
        kinds = [scalar_dtype(v) for v in vals]
        floats = [d for d in kinds if dtypes.is_float(d)]  # weak scalars: an int beside a float takes the float's
        dt = least_upper_dtype(*(floats or kinds))
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
    if dtypes.is_float(self.dtype):  # by the sign bit: abs(-0.0) is +0.0
        return self.signbit().where(-self, self)
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


# ----- more math (the Array API standard's elementwise set), compositions of the ops above -----
def isnan(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype):
        return type(self).full(self.shape, False, dtype=dtypes.bool, device=self.device)
    return self != self


def isinf(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype):
        return type(self).full(self.shape, False, dtype=dtypes.bool, device=self.device)
    return self.abs() == math.inf


def isfinite(self: Tensor) -> Tensor:
    if not dtypes.is_float(self.dtype):
        return type(self).full(self.shape, True, dtype=dtypes.bool, device=self.device)
    return (self - self) == 0  # nan for inf and nan, 0 otherwise


def signbit(self: Tensor) -> Tensor:
    """Whether the sign bit is set (true for -0.0 and negative NaNs), read from the bits."""
    if not dtypes.is_float(self.dtype):
        return self < 0 if not dtypes.is_unsigned(self.dtype) and not dtypes.is_bool(self.dtype) else self != self
    idt = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[self.dtype.itemsize]
    return self._alu(Ops.BITCAST, dtype=idt) < 0


def copysign(self: Tensor, y: Tensor | Scalar) -> Tensor:
    a, b = self._operands(y)
    a, b = a._float(), b._float()
    return b.signbit().where(-a.abs(), a.abs())


def expm1(self: Tensor) -> Tensor:
    """``exp(x) - 1``, accurate near 0 (Kahan's ``(e - 1) * x / log(e)``)."""
    x = self._float()
    e = x.exp()
    small = (e - 1.0) * x / e.log()
    return (e == 1.0).where(x, (x.abs() < 1.0).where(small, e - 1.0))


def log1p(self: Tensor) -> Tensor:
    """``log(1 + x)``, accurate near 0 (Goldberg's ``log(u) * x / (u - 1)``)."""
    x = self._float()
    u = x + 1.0
    return (u == 1.0).where(x, (x.abs() < 1.0).where(u.log() * x / (u - 1.0), u.log()))


def log10(self: Tensor) -> Tensor:
    return self.log2() * (1.0 / math.log2(10.0))


def sinh(self: Tensor) -> Tensor:
    x = self._float()
    small = x.abs() < 1.0
    em = x.expm1()
    return small.where((em - (-x).expm1()) * 0.5, (x.exp() - (-x).exp()) * 0.5)


def cosh(self: Tensor) -> Tensor:
    x = self._float()
    return (x.exp() + (-x).exp()) * 0.5


def atan(self: Tensor) -> Tensor:
    """Arctangent: |x| > 1 folds to pi/2 - atan(1/x), two half-angle steps bring |t| under 0.2, then its series."""
    x = self._float()
    ax = x.abs()
    big = ax > 1.0
    t = big.where(ax.reciprocal(), ax)
    for _ in range(2):
        t = t / (1.0 + (1.0 + t * t).sqrt())
    t2 = t * t
    s = t * 0.0
    for k in range(12, -1, -1):
        s = s * t2 + ((-1.0) ** k) / (2 * k + 1)
    r = 4.0 * t * s
    r = big.where(math.pi / 2 - r, r)
    return (x != x).where(x, x.signbit().where(-r, r))


def atan2(self: Tensor, x: Tensor | Scalar) -> Tensor:
    """The angle of (x, y) with C's special cases (signed zeros and infinities)."""
    y, xx = self._operands(x)
    y, xx = y._float(), xx._float()
    base = (y / xx).atan()
    neg_x = xx.signbit()
    pi_y = y.signbit().where(y.full_like(-math.pi), math.pi)  # a tensor branch keeps float64 exact
    r = neg_x.where(base + pi_y, base)
    r = (xx == 0).where(y.signbit().where(y.full_like(-math.pi / 2), math.pi / 2), r)
    zero_y = y == 0
    r = zero_y.where(neg_x.where(pi_y, y), r)
    both_inf = y.isinf() & xx.isinf()
    q = neg_x.where(y.full_like(3 * math.pi / 4), math.pi / 4)
    r = both_inf.where(y.signbit().where(-q, q), r)
    return ((y != y) | (xx != xx)).where(math.nan, r)


def asin(self: Tensor) -> Tensor:
    x = self._float()
    r = x.atan2((1.0 - x * x).sqrt())
    return (x.abs() > 1.0).where(math.nan, r)


def acos(self: Tensor) -> Tensor:
    x = self._float()
    r = (1.0 - x * x).sqrt().atan2(x)
    return (x.abs() > 1.0).where(math.nan, r)


def asinh(self: Tensor) -> Tensor:
    x = self._float()
    ax = x.abs()
    big = ax > 1e8
    r = big.where(ax.log() + math.log(2.0), (ax + ax * ax / (1.0 + (1.0 + ax * ax).sqrt())).log1p())
    return (x == 0).where(x, x.signbit().where(-r, r))


def acosh(self: Tensor) -> Tensor:
    x = self._float()
    big = x > 1e8
    r = big.where(x.log() + math.log(2.0), (x + (x * x - 1.0).sqrt()).log())
    return (x < 1.0).where(math.nan, r)


def atanh(self: Tensor) -> Tensor:
    x = self._float()
    r = 0.5 * ((2.0 * x) / (1.0 - x)).log1p()
    return (x.abs() > 1.0).where(math.nan, (x == 0).where(x, r))


def hypot(self: Tensor, y: Tensor | Scalar) -> Tensor:
    a, b = self._operands(y)
    a, b = a._float().abs(), b._float().abs()
    m, n = a.maximum(b), a.minimum(b)
    r = n / m
    out = (m == 0).where(0.0, m * (1.0 + r * r).sqrt())
    return (a.isinf() | b.isinf()).where(math.inf, out)


def logaddexp(self: Tensor, y: Tensor | Scalar) -> Tensor:
    a, b = self._operands(y)
    a, b = a._float(), b._float()
    m = a.maximum(b)
    d = -(a - b).abs()
    out = m + d.exp().log1p()
    return ((a == b) & a.isinf()).where(a, out)


def round_half_even(self: Tensor) -> Tensor:
    """Round to nearest, ties to even (numpy's and the Array API standard's ``round``)."""
    if not dtypes.is_float(self.dtype):
        return self
    f = self.floor()
    d = self - f
    up = (d > 0.5) | ((d == 0.5) & ((f * 0.5).floor() * 2.0 != f))
    r = up.where(f + 1.0, f)
    r = self.signbit().where(-r.abs(), r.abs())  # -0.4 rounds to -0.0
    return (self.isinf() | (self != self) | (self == 0)).where(self, r)


def left_shift(self: Tensor, y: Tensor | Scalar) -> Tensor:
    a, b = self._operands(y)
    return (b >= 8 * a.dtype.itemsize).where(0, a._alu(Ops.SHL, b))


def right_shift(self: Tensor, y: Tensor | Scalar) -> Tensor:
    """Arithmetic shift for signed integers (floor division by 2**y), logical for unsigned."""
    a, b = self._operands(y)
    wide = b >= 8 * a.dtype.itemsize
    fill = (a < 0).where(-1, 0) if not dtypes.is_unsigned(a.dtype) else a.zeros_like()
    return wide.where(fill, a._alu(Ops.SHR, b))
