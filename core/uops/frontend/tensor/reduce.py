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
    if dtypes.is_bool(self.dtype):
        return dtypes.default_int
    if dtypes.is_int(self.dtype) and self.dtype.itemsize < 4:
        return dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32
    return self.dtype


def sum(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    if self.dtype in (dtypes.float16, dtypes.bfloat16):
        return self.cast(dtypes.float32)._reduce(Ops.ADD, axis, keepdim).cast(self.dtype)
    return self.cast(self._acc_dtype())._reduce(Ops.ADD, axis, keepdim)


def prod(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    return self.cast(self._acc_dtype())._reduce(Ops.MUL, axis, keepdim)


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


def mean(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    n = math.prod(self.shape[a] for a in self._axes(axis))
    s = self._float().sum(axis, keepdim)
    return s / n if n else s * math.nan


def var(self: Tensor, axis: Axis = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
    """Variance like numpy (``ddof=0``: divide by n)."""
    n = math.prod(self.shape[a] for a in self._axes(axis))
    x = self._float()
    d = x - x.mean(axis, keepdim=True)
    ss = (d * d).sum(axis, keepdim)
    return ss / (n - ddof) if n - ddof > 0 else ss * math.nan


def std(self: Tensor, axis: Axis = None, keepdim: bool = False, ddof: int = 0) -> Tensor:
    return self.var(axis, keepdim, ddof).sqrt()


def argmax(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum (int32)."""
    if axis is None:
        out = self.flatten().argmax(0)
        return out.reshape((1,) * self.ndim) if keepdim else out
    a = self._axis(axis)
    n = self.shape[a]
    if n == 0:
        raise ValueError(f"argmax of an empty axis {a} of shape {self.shape}")
    m = self.max(a, keepdim=True)
    rev = type(self).arange(n, 0, -1, dtype=dtypes.int32, device=self.device)
    rev = rev.reshape((n,) + (1,) * (self.ndim - a - 1))
    hit = self == m
    if dtypes.is_float(self.dtype):  # max is NaN when a NaN is there: the first NaN, as in numpy
        hit = hit | (self != self)
    cand = hit.where(rev, 0)
    return (n - cand.max(a, keepdim=keepdim)).cast(dtypes.int32)


def argmin(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    return self._order_flip().argmax(axis, keepdim)
