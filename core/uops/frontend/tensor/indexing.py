"""Indexing by data: integer-tensor (advanced) indexing, gather/scatter, cumsum, tril/triu, masked_fill, topk.

Each is lowered to kernels on the device, never a round trip through the host, fused with what
produces the index and what consumes the result: gathers (``x[idx]``, gather) are one gated load
per element (the tensor-level ``INDEX`` node); scatter, cumsum and topk are arange-compares (the
index compared with every position, the one-hot selection reduced).

Out-of-range indices: an index known on the host (a Python int, a list, a numpy array) is checked
there and raises IndexError, as numpy does. A device tensor's index in ``[-n, n)`` counts from the
end when negative, as in numpy; one outside it matches no position, so it reads zeros (gather,
``x[idx]``) or writes nothing (scatter, ``x[idx] = v``) — never memory outside the buffer.

Repeated indices: ``x[idx] = v`` lands the last of the values for one position, as numpy does;
``scatter`` lands the largest (torch leaves the order undefined; a max is the same on every device).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from uops.dtypes import dtypes
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .. import autograd
from . import movement
from .args import broadcast_shape

if TYPE_CHECKING:
    from . import Tensor


def _basic_item(it: Any) -> bool:
    return it is None or it is Ellipsis or isinstance(it, (int, np.integer, slice))


def is_basic(index: Any) -> bool:
    """Whether an index is numpy's basic kind (ints, slices, None, ...): a view, no data read."""
    items = index if isinstance(index, tuple) else (index,)
    return all(_basic_item(it) and not isinstance(it, (bool, np.bool_)) for it in items)


def _positions(self: Tensor, n: int) -> Tensor:
    return type(self).arange(n, dtype=dtypes.int32, device=self.device)


def _wrap(idx: Tensor, n: int) -> Tensor:
    """Negative indices count from the end; the rest stay as they are (out of range: matches nothing)."""
    if not dtypes.is_int(idx.dtype) or dtypes.is_bool(idx.dtype):
        raise TypeError(f"indices must be an integer tensor, got {idx.dtype.name}")
    i = idx.cast(dtypes.int32) if idx.dtype.itemsize < 4 or dtypes.is_unsigned(idx.dtype) else idx
    return i if dtypes.is_unsigned(idx.dtype) else (i < 0).where(i + n, i)


def _host_index(self: Tensor, it: Any, axis: int, size: int) -> list[Any]:
    """A list or numpy array index as device tensors, checked here (the values are on the host)."""
    arr = np.asarray(it)
    if arr.dtype == np.bool_:
        if arr.ndim == 0:
            raise TypeError("a bool scalar index is not supported; use where or masked_fill")
        return [_host_index(self, a, axis + d, self.shape[axis + d])[0] for d, a in enumerate(np.nonzero(arr))]
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"index arrays must hold integers or bools, got {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = arr[(arr < -size) | (arr >= size)]
    if bad.size:
        raise IndexError(f"index {int(bad.reshape(-1)[0])} is out of bounds for axis {axis} with size {size}")
    return [type(self)((arr % max(size, 1)).astype(np.int32), device=self.device)]


def getitem(self: Tensor, index: Any) -> Tensor:
    """numpy indexing: basic (a view) or advanced with integer tensors, lists or arrays (and host bool masks).

    Advanced indices broadcast together; their result dims replace theirs when they are adjacent, and go
    first when a slice separates them (numpy's rule). An int next to an advanced index counts as one."""
    if is_basic(index):
        return movement.getitem(self, index)
    basic, adv = resolve(self, index)
    y = movement.getitem(self, basic)
    return IndexPlan(y, adv).take(y)


def resolve(self: Tensor, index: Any) -> tuple[tuple[Any, ...], list[tuple[int, Tensor]]]:
    """An advanced index split into numpy's two steps: a basic index (a view of ``self``) and the integer
    tensors that then index some dims of that view, as ``(dim in the view, wrapped index)`` pairs.

    Host indices (ints, lists, arrays, bool masks) are checked here and raise IndexError when out of range."""
    cls = type(self)
    items = list(index) if isinstance(index, tuple) else [index]
    ells = [i for i, it in enumerate(items) if it is Ellipsis]
    if len(ells) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    # how many dims of self each item consumes (a host bool mask: as many as it has)
    used = [
        0
        if it is None or it is Ellipsis
        else np.ndim(it)
        if isinstance(it, (list, np.ndarray)) and np.asarray(it).dtype == np.bool_
        else 1
        for it in items
    ]
    if sum(used) > self.ndim:
        raise IndexError(f"too many indices ({sum(used)}) for a tensor of shape {self.shape}")
    if ells:
        e = ells[0]
        items[e : e + 1] = [slice(None)] * (self.ndim - sum(used))
    else:
        items += [slice(None)] * (self.ndim - sum(used))
    basic: list[Any] = []
    adv: list[tuple[int, Tensor]] = []  # (dim in the basic result, index tensor)
    d_in, d_out = 0, 0
    for it in items:
        if it is None:
            basic.append(None)
            d_out += 1
        elif isinstance(it, slice):
            basic.append(it)
            d_in += 1
            d_out += 1
        elif isinstance(it, cls):
            if dtypes.is_bool(it.dtype):
                raise TypeError(
                    "indexing by a bool tensor gives a data-dependent shape; use masked_fill, where, "
                    "or a host (numpy) mask"
                )
            basic.append(slice(None))
            adv.append((d_out, _wrap(it, self.shape[d_in])))
            d_in += 1
            d_out += 1
        elif isinstance(it, (int, np.integer)) and not isinstance(it, (bool, np.bool_)):
            size = self.shape[d_in]
            if not -size <= int(it) < size:
                raise IndexError(f"index {int(it)} is out of range for axis {d_in} with size {size}")
            basic.append(slice(None))
            adv.append((d_out, cls(int(it) % size, device=self.device, dtype=dtypes.int32)))
            d_in += 1
            d_out += 1
        elif isinstance(it, (list, tuple, np.ndarray, bool, np.bool_)):
            for t in _host_index(self, it, d_in, self.shape[d_in]):
                basic.append(slice(None))
                adv.append((d_out, t))
                d_in += 1
                d_out += 1
        else:
            raise TypeError(f"unsupported index {it!r}: use ints, slices, None, ..., integer tensors or lists")
    return tuple(basic), adv


class IndexPlan:
    """How integer tensors index some dims of ``y``: the other (``rest``) dims first, then one linear position
    over the indexed dims (``lin``, -1 where an index is out of range); ``order`` permutes that layout
    (rest dims, then the index's broadcast ``shape``) into numpy's."""

    def __init__(self, y: Tensor, adv: list[tuple[int, Tensor]]):
        self.dims = [d for d, _ in adv]
        self.shape = broadcast_shape(*(t.shape for _, t in adv))
        self.rest = [d for d in range(y.ndim) if d not in self.dims]
        self.sizes = [y.shape[d] for d in self.dims]
        self.n = math.prod(self.sizes)
        self.rshape = tuple(y.shape[d] for d in self.rest)
        lin: Tensor | None = None
        ok: Tensor | None = None
        strides = [math.prod(self.sizes[i + 1 :]) for i in range(len(self.sizes))]
        for (_, t), s, stride in zip(adv, self.sizes, strides):
            t = t.expand(self.shape) if t.shape != self.shape else t
            inside = (t >= 0) & (t < s)
            ok = inside if ok is None else ok & inside
            term = t * stride if stride != 1 else t
            lin = term if lin is None else lin + term
        assert lin is not None and ok is not None
        self.lin = ok.where(lin, -1).reshape(math.prod(self.shape))
        rest, k = len(self.rest), len(self.shape)
        adjacent = self.dims == list(range(self.dims[0], self.dims[0] + len(self.dims)))
        if not adjacent or not self.rest:
            self.order = list(range(rest, rest + k)) + list(range(rest))
        else:
            before = sum(1 for d in self.rest if d < self.dims[0])
            self.order = list(range(before)) + [rest + i for i in range(k)] + list(range(before, rest))

    def flat(self, y: Tensor) -> Tensor:
        """``y`` as (rest dims..., n): the indexed dims as one."""
        return y.permute(self.rest + self.dims).reshape(self.rshape + (self.n,))

    def result_shape(self) -> tuple[int, ...]:
        """The shape of ``y[index]`` (numpy's placement of the index dims)."""
        canonical = self.rshape + self.shape
        return tuple(canonical[i] for i in self.order)

    def take(self, y: Tensor) -> Tensor:
        """``y[index]``: one gated load per element."""
        p = self.lin.shape[0]
        flat = self.lin.expand(self.rshape + (p,)) if self.rshape else self.lin
        out = indexed_load(self.flat(y), len(self.rshape), flat).reshape(self.rshape + self.shape)
        return out.permute(self.order)

    def put(self, y: Tensor, value: Tensor) -> Tensor:
        """A copy of ``y`` with ``value`` (of ``result_shape``) written where the index points.

        Repeated positions: the last write lands, as in numpy (``scatter`` keeps the largest instead). A device
        index outside its axis writes nothing. Lowered without a scatter store: every position of ``y`` finds
        the last index element naming it (``_last``), then gathers its row of ``value`` (one load per element)
        or keeps its old value. Adjacent index dims stay where they are (reshapes only), so the write reads each
        old element where it stores."""
        p = self.lin.shape[0]
        if p == 0 or self.n == 0:
            return y
        last = self._last(y)
        k = len(self.dims)
        adjacent = self.dims == list(range(self.dims[0], self.dims[0] + k))
        if adjacent:  # numpy keeps the index dims in place
            a = self.dims[0]
            before, after = y.shape[:a], y.shape[a + k :]
            old = y.reshape(before + (self.n,) + after) if k > 1 else y
            v = value.reshape(before + (p,) + after)
        else:  # the index dims go first in numpy's result; here they go last
            a, before, after = len(self.rest), self.rshape, ()
            old = y.permute(self.rest + self.dims).reshape(self.rshape + (self.n,))
            v = value.permute(_inverse(self.order)).reshape(self.rshape + (p,))
        pick = last.reshape((1,) * len(before) + (self.n,) + (1,) * len(after)).expand(old.shape)
        new = (pick >= 0).where(indexed_load(v, a, pick), old)
        if not adjacent:
            return new.reshape(self.rshape + tuple(self.sizes)).permute(_inverse(self.rest + self.dims))
        return new if k == 1 else new.reshape(y.shape)

    def _last(self, y: Tensor) -> Tensor:
        """For each of the ``n`` positions the last index element naming it, or -1 (n,): an arange-compare of
        every pair (one integer kernel), or for a large product the sort of the index (``sort_index``)."""
        cls, dev, n = type(y), y.device, self.n
        lin = self.lin.cast(dtypes.int32)
        p = lin.shape[0]
        if n * p <= autograd.SORT_INDEX_ABOVE:
            here = lin.reshape(1, p) == cls.arange(n, dtype=dtypes.int32, device=dev).reshape(n, 1)
            return here.where(cls.arange(p, dtype=dtypes.int32, device=dev), -1).max(-1)
        perm, _, at = autograd.sort_index(lin.uop, n, dev)
        found = cls(at, device=dev)
        if perm is None:
            return found
        return (found >= 0).where(indexed_load(cls(perm, device=dev), 0, found), -1)


def _inverse(order: list[int]) -> list[int]:
    return sorted(range(len(order)), key=lambda i: order[i])


def _along(self: Tensor, axis: int, idx: Tensor, what: str) -> tuple[int, Tensor]:
    a = self._axis(axis)
    if not isinstance(idx, type(self)):
        idx = type(self)(np.asarray(idx), device=self.device)
    if idx.ndim != self.ndim:
        raise ValueError(
            f"{what}: the index needs {self.ndim} dims like the tensor (shape {self.shape}), got {idx.shape}"
        )
    self._same_device(idx)
    return a, _wrap(idx, self.shape[a])


def gather(self: Tensor, axis: int, index: Tensor) -> Tensor:
    """``out[..., i, ...] = self[..., index[..., i, ...], ...]`` along ``axis`` (torch's gather; the other dims of
    ``index`` broadcast against the tensor's, as in numpy's take_along_axis)."""
    a, idx = _along(self, axis, index, "gather")
    keep = tuple(1 if d == a else s for d, s in enumerate(self.shape))
    shape = broadcast_shape(keep, tuple(1 if d == a else s for d, s in enumerate(idx.shape)))
    out_shape = shape[:a] + (idx.shape[a],) + shape[a + 1 :]
    src = self.expand(shape[:a] + (self.shape[a],) + shape[a + 1 :])
    return indexed_load(src, a, idx.expand(out_shape))


def indexed_load(src: Tensor, axis: int, index: Tensor) -> Tensor:
    """``out[..., i, ...] = src[..., index[..., i, ...], ...]`` as one gated load per element (``index`` has the
    output's shape; ``src`` that shape but for ``axis``). An index outside ``[0, n)`` reads zero.

    Why a node of its own and not an arange-compare: it reads one element where the compare reads all ``n``
    (an embedding of 4096 rows: thousands of times less work)."""
    if index.dtype != dtypes.int32:
        index = index.cast(dtypes.int32)
    return src._new(UOp(Ops.INDEX, src.dtype, (src.uop, index.uop), axis))


def take_along_axis(self: Tensor, indices: Tensor, axis: int) -> Tensor:
    """numpy's spelling of gather."""
    return gather(self, axis, indices)


def _scatter_terms(
    self: Tensor, axis: int, index: Tensor, src: Tensor | float, what: str
) -> tuple[int, Tensor, Tensor]:
    a, idx = _along(self, axis, index, what)
    cls = type(self)
    if isinstance(src, (bool, int, float)):
        s = cls.full(idx.shape, src, dtype=self.dtype, device=self.device)
    else:
        s = src.cast(self.dtype)
    if s.shape != idx.shape:
        s = s.expand(idx.shape) if broadcast_shape(s.shape, idx.shape) == idx.shape else s
        if s.shape != idx.shape:
            raise ValueError(f"{what}: src of shape {s.shape} does not match the index's shape {idx.shape}")
    for d in range(self.ndim):
        if d != a and idx.shape[d] != self.shape[d]:
            raise ValueError(
                f"{what}: the index's shape {idx.shape} must equal the tensor's {self.shape} outside axis {a}"
            )
    n = self.shape[a]
    hit = idx.transpose(a, -1).unsqueeze(-1) == _positions(self, n)  # (..., m, n)
    return a, hit, s.transpose(a, -1).unsqueeze(-1)


def scatter_add(self: Tensor, axis: int, index: Tensor, src: Tensor | float) -> Tensor:
    """A copy of this tensor with ``src[..., i, ...]`` added at ``[..., index[..., i, ...], ...]`` (repeats add up);
    the backward of gather."""
    a, hit, s = _scatter_terms(self, axis, index, src, "scatter_add")
    added = hit.where(s, 0).sum(-2).cast(self.dtype)  # (..., n)
    return self + added.transpose(a, -1)


def scatter(self: Tensor, axis: int, index: Tensor, src: Tensor | float) -> Tensor:
    """A copy of this tensor with ``src[..., i, ...]`` put at ``[..., index[..., i, ...], ...]``. When an index repeats,
    the largest of its values lands (torch leaves that case undefined)."""
    a, hit, s = _scatter_terms(self, axis, index, src, "scatter")
    any_hit = hit.any(-2).transpose(a, -1)
    lowest = dtypes.min(self.dtype) if not dtypes.is_float(self.dtype) else -math.inf
    put = hit.where(s, lowest).max(-2).transpose(a, -1)
    return any_hit.where(put, self)


def cumsum(self: Tensor, axis: int = 0) -> Tensor:
    """Running sums along ``axis`` (a lower-triangular selection, reduced)."""
    a = self._axis(axis)
    n = self.shape[a]
    x = self.transpose(a, -1)
    pos = _positions(self, n)
    tri = pos.unsqueeze(1) >= pos  # (n, n): [i, j] is j <= i
    out = tri.where(x.unsqueeze(-2), 0).sum(-1)
    return out.transpose(a, -1)


def _tri(self: Tensor, diagonal: int, lower: bool) -> Tensor:
    if self.ndim < 2:
        raise ValueError(f"tril/triu need at least 2 dims, got shape {self.shape}")
    r, c = self.shape[-2], self.shape[-1]
    rows = _positions(self, r).unsqueeze(1)
    cols = _positions(self, c)
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return keep.where(self, 0).cast(self.dtype)


def tril(self: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (``j - i <= diagonal``), zeros elsewhere."""
    return _tri(self, diagonal, True)


def triu(self: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (``j - i >= diagonal``), zeros elsewhere."""
    return _tri(self, diagonal, False)


def masked_fill(self: Tensor, mask: Tensor, value: float | int | bool) -> Tensor:
    """``value`` where ``mask`` is true, else this tensor (broadcast; keeps this tensor's dtype)."""
    fill = type(self).full((), value, dtype=self.dtype, device=self.device)
    return mask.cast(dtypes.bool).where(fill, self)


def topk(self: Tensor, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) values along ``axis`` in order, with their indices (int64, as argmax).

    Sort-free: k rounds of argmax, each masking out the position it found (O(k n) work: meant for a
    small ``k``, as in top-k sampling). Ties go to the lowest index first."""
    a = self._axis(axis)
    n = self.shape[a]
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for axis {a} of size {n}")
    x = self if largest else self._order_flip()
    x = x._float() if not dtypes.is_float(x.dtype) else x
    pos = _positions(self, n).reshape((n,) + (1,) * (self.ndim - a - 1))
    vals, idxs = [], []
    taken = None
    for _ in range(k):
        cur = x if taken is None else taken.where(-math.inf, x)
        i = cur.argmax(a, keepdim=True)
        vals.append(gather(self, a, i))
        idxs.append(i)
        hit = pos == i
        taken = hit if taken is None else taken | hit
    if not vals:
        empty = list(self.shape)
        empty[a] = 0
        cls = type(self)
        return cls.zeros(*empty, dtype=self.dtype, device=self.device), cls.zeros(
            *empty, dtype=dtypes.int64, device=self.device
        )
    return movement.cat(vals, dim=a), movement.cat(idxs, dim=a)
