"""Reductions: sum, prod, max/min, any/all, mean, var/std, argmax/argmin.

Each builds one REDUCE_AXIS node; the scheduler decides how it runs (folded when the input is
one repeated value, in two stages when it is large).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uops.dtypes import DType, dtypes
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .args import axes_arg

if TYPE_CHECKING:
    from . import Tensor

Axis = int | Sequence[int] | None


def axes(self: Tensor, axis: Any, what: str = "axis") -> tuple[int, ...]:
    return axes_arg(axis, self.shape, what)


def reduce(self: Tensor, op: Ops, axis: Axis, keepdim: bool) -> Tensor:
    ax = self._axes(axis)
    kept = tuple(1 if i in ax else s for i, s in enumerate(self.shape))
    final = kept if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in ax)
    if not ax:
        return self
    if math.prod(self.shape[a] for a in ax) == 0:
        if op is Ops.MAX:
            raise ValueError(f"max/min of an empty axis: axes {ax} of shape {self.shape} have no elements")
        return type(self).full(final, 0 if op is Ops.ADD else 1, dtype=self.dtype, device=self.device)
    return self._new(UOp(Ops.REDUCE_AXIS, self.dtype, (self.uop,), (op, ax))).reshape(final)


def acc_dtype(self: Tensor) -> DType:
    """The dtype ``sum``/``prod``/``cumsum`` return without ``dtype=``: numpy 2's on 64-bit Linux, so no sum
    wraps where numpy's would not. bool and signed integers count in int64, unsigned in uint64; floats keep
    theirs (float16/bfloat16 accumulate in float32 and round once at the end)."""
    dt = self.dtype
    if dtypes.is_bool(dt) or dt.kind == "i":
        return dtypes.int64
    if dt.kind == "u":
        return dtypes.uint64
    return dt


def _half_acc(self: Tensor) -> Tensor:
    """float16/bfloat16 as float32 for accumulating: the cast happens at the load, inside the kernel."""
    return self.cast(dtypes.float32) if self.dtype in (dtypes.float16, dtypes.bfloat16) else self


def sum(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    out = _half_acc(self.cast(self._acc_dtype()))._reduce(Ops.ADD, axis, keepdim)
    return out.cast(self._acc_dtype())


def prod(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    out = _half_acc(self.cast(self._acc_dtype()))._reduce(Ops.MUL, axis, keepdim)
    return out.cast(self._acc_dtype())


def max(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    if dtypes.is_bool(self.dtype):
        return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
    return self._reduce(Ops.MAX, axis, keepdim)


def min(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return self._order_flip().max(axis, keepdim)._order_flip()


def any(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether some element (along ``axis``) is true (false over no elements)."""
    if math.prod(self.shape[a] for a in self._axes(axis)) == 0:
        return self.cast(dtypes.bool).sum(axis, keepdim) != 0
    return self.cast(dtypes.bool).max(axis, keepdim)


def all(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    """Whether every element (along ``axis``) is true (true over no elements)."""
    if math.prod(self.shape[a] for a in self._axes(axis)) == 0:
        return self.cast(dtypes.bool).sum(axis, keepdim) == 0
    return self.cast(dtypes.bool).min(axis, keepdim)


def _stat_dtypes(dt: DType) -> tuple[DType, DType]:
    """(the dtype mean/var/std compute in, the dtype they return): numpy's for floats (float16 computes in
    float32); integers and bool give the default float (numpy: float64, see docs/dtypes.md)."""
    if dt in (dtypes.float16, dtypes.bfloat16):
        return dtypes.float32, dt
    if dtypes.is_float(dt):
        return dt, dt
    return dtypes.default_float, dtypes.default_float


def _sum_in(self: Tensor, calc: DType, axis: Axis, keepdim: bool) -> Tensor:
    """The sum as ``calc``: integers are summed exactly (int64) and converted once, floats accumulate in ``calc``."""
    if dtypes.is_float(self.dtype):
        return self.cast(calc)._reduce(Ops.ADD, axis, keepdim)
    return self.sum(axis, keepdim).cast(calc)


def _count(self: Tensor, axis: Axis) -> int:
    return math.prod(self.shape[a] for a in self._axes(axis))


def mean(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    n = _count(self, axis)
    calc, out = _stat_dtypes(self.dtype)
    s = _sum_in(self, calc, axis, keepdim)
    return (s / n if n else s * math.nan).cast(out)


def _var(self: Tensor, axis: Axis, keepdim: bool, ddof: int) -> Tensor:
    n = _count(self, axis)
    calc, _ = _stat_dtypes(self.dtype)
    s = _sum_in(self, calc, axis, True)
    d = self.cast(calc) - (s / n if n else s * math.nan)
    ss = (d * d)._reduce(Ops.ADD, axis, keepdim)
    return ss / (n - ddof) if n - ddof > 0 else ss * math.nan


def var(self: Tensor, axis: Axis = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
    """Variance like numpy (``ddof=0``: divide by n)."""
    return _var(self, axis, keepdim, ddof).cast(_stat_dtypes(self.dtype)[1])


def std(self: Tensor, axis: Axis = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
    return _var(self, axis, keepdim, ddof).sqrt().cast(_stat_dtypes(self.dtype)[1])


def argmax(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (int64, as numpy; computed in int32 when the axis is shorter than 2**31)."""
    if axis is None:
        out = self.flatten().argmax(0)
        return out.reshape((1,) * self.ndim) if keepdim else out
    a = self._axis(axis)
    n = self.shape[a]
    if n == 0:
        raise ValueError(f"argmax of an empty axis {a} of shape {self.shape}")
    m = self.max(a, keepdim=True)
    idt = dtypes.int32 if n < 2**31 else dtypes.int64
    rev = type(self).arange(n, 0, -1, dtype=idt, device=self.device)
    rev = rev.reshape((n,) + (1,) * (self.ndim - a - 1))
    hit = self == m
    if dtypes.is_float(self.dtype):  # max is NaN when a NaN is there: the first NaN, as in numpy
        hit = hit | (self != self)
    cand = hit.where(rev, 0)
    return (n - cand.max(a, keepdim=keepdim)).cast(dtypes.int64)


def argmin(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    return self._order_flip().argmax(axis, keepdim)
