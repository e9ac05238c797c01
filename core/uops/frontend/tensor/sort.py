"""Sorting as kernels: ``argsort`` and ``sort`` by compare-count ranks, stable, NaNs last.

Why ranks and not a sorting network: an element's place is the number of elements that must come
before it, one broadcast comparison and one reduction along the axis, so the whole sort is a few
fused kernels for any length (n**2 comparisons: meant for the short axes that fit a workgroup).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uops.dtypes import dtypes
from uops.ir.ops import Ops

if TYPE_CHECKING:
    from . import Tensor


def _before(a: Tensor, b: Tensor, descending: bool) -> Tensor:
    """Whether value ``a`` sorts strictly before value ``b`` (NaN after every number, both ways)."""
    if dtypes.is_bool(a.dtype):
        a, b = a.cast(dtypes.uint8), b.cast(dtypes.uint8)
    lt = (b < a) if descending else (a < b)
    if dtypes.is_float(a.dtype):
        lt = lt | ((a == a) & (b != b))
    return lt


def ranks(self: Tensor, axis: int = -1, descending: bool = False) -> Tensor:
    """Each element's position in the stable sort along ``axis`` (int32)."""
    ax = self._axis(axis)
    x = self.transpose(ax, -1) if ax != self.ndim - 1 else self
    n = x.shape[-1]
    xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)  # [..., i, 1] against [..., 1, j]
    idx = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    earlier = idx.unsqueeze(-1) > idx.unsqueeze(0)  # j < i
    eq = ~_before(xi, xj, descending) & ~_before(xj, xi, descending)
    count = (_before(xj, xi, descending) | (eq & earlier)).cast(dtypes.int32)._reduce(Ops.ADD, -1, False)  # < n
    return count.transpose(ax, -1) if ax != self.ndim - 1 else count


def argsort(self: Tensor, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The indices that sort the tensor along ``axis`` (int64 as in numpy, stable; NaNs last)."""
    if self.ndim == 0:
        return type(self).full((), 0, dtype=dtypes.int64, device=self.device)
    ax = self._axis(axis)
    r = self.ranks(ax, descending)
    r = r.transpose(ax, -1) if ax != self.ndim - 1 else r
    n = r.shape[-1]
    pos = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    hit = r.unsqueeze(-2) == pos.unsqueeze(-1)  # [..., p, i]: element i lands at p
    out = hit.where(pos.unsqueeze(0), 0)._reduce(Ops.ADD, -1, False).cast(dtypes.int64)  # one hit a row
    return out.transpose(ax, -1) if ax != self.ndim - 1 else out


def sort(self: Tensor, axis: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    """The tensor sorted along ``axis`` (NaNs last)."""
    if self.ndim == 0:
        return self
    ax = self._axis(axis)
    r = self.ranks(ax, descending)
    r = r.transpose(ax, -1) if ax != self.ndim - 1 else r
    x = self.transpose(ax, -1) if ax != self.ndim - 1 else self
    n = r.shape[-1]
    pos = type(self).arange(n, dtype=dtypes.int32, device=self.device)
    hit = r.unsqueeze(-2) == pos.unsqueeze(-1)
    xs = x.unsqueeze(-2)
    if dtypes.is_bool(x.dtype):
        return _back((hit & xs).any(-1), ax, self.ndim)
    out = hit.where(xs, 0).sum(-1).cast(x.dtype)  # the one element landing at p (others add 0)
    if dtypes.is_float(x.dtype):  # adding zeros turns -0.0 into 0.0: put its sign back
        neg_zero = (hit & (xs == 0) & xs.signbit()).any(-1)
        out = neg_zero.where(-out.abs(), out)
    return _back(out, ax, self.ndim)


def _back(t: Tensor, ax: int, ndim: int) -> Tensor:
    return t.transpose(ax, -1) if ax != ndim - 1 else t
