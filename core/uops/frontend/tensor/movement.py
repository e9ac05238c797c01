"""Movement and indexing: reshape, permute, expand, pad, shrink, flip, basic indexing, cat and stack.

Each is a view (index math in the kernel that reads it), never a copy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from uops.dtypes import dtypes

from ..schedule import apply_view, const_view, move
from ..view import ShapeTracker
from .args import Scalar, axis_arg, int_arg, result_dtype

if TYPE_CHECKING:
    from . import Tensor


def view(self: Tensor, fn: Callable[[ShapeTracker], ShapeTracker]) -> Tensor:
    """A view through any tracker function: not differentiable (autograd needs ``moved``)."""
    return self._new(apply_view(self.uop, fn))


def moved(self: Tensor, method: str, arg: Any) -> Tensor:
    """One elementary movement (a ShapeTracker method and its argument), recorded for autograd."""
    return self._new(move(self.uop, method, arg))


def axis(self: Tensor, ax: Any, ndim: int | None = None, what: str = "axis") -> int:
    return axis_arg(ax, self.shape, what, ndim)


def _sizes(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)


def reshape(self: Tensor, *shape: Any) -> Tensor:
    new = [int_arg(s, "reshape size") for s in _sizes(shape)]
    if new.count(-1) > 1:
        raise ValueError(f"reshape: only one dimension can be -1, got {tuple(new)}")
    if -1 in new:
        known = math.prod(s for s in new if s != -1)
        if known == 0 or self.numel() % known:
            raise ValueError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {tuple(new)}")
        new[new.index(-1)] = self.numel() // known
    if any(s < 0 for s in new):
        raise ValueError(f"reshape: negative dimension in {tuple(new)}")
    if math.prod(new) != self.numel():
        raise ValueError(
            f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) "
            f"to {tuple(new)} ({math.prod(new)} elements)"
        )
    if tuple(new) == self.shape:
        return self
    return self._moved("reshape", tuple(new))


def permute(self: Tensor, *order: Any) -> Tensor:
    o = tuple(self._axis(a, what="permute axis") for a in _sizes(order))
    if sorted(o) != list(range(self.ndim)):
        raise ValueError(f"permute order {o} is not a permutation of the {self.ndim} axes of shape {self.shape}")
    if o == tuple(range(self.ndim)):
        return self
    return self._moved("permute", o)


def transpose(self: Tensor, dim0: int = -2, dim1: int = -1) -> Tensor:
    order = list(range(self.ndim))
    a, b = self._axis(dim0, what="dim0"), self._axis(dim1, what="dim1")
    order[a], order[b] = order[b], order[a]
    return self.permute(order)


def T(self: Tensor) -> Tensor:  # noqa: N802
    return self.permute(tuple(reversed(range(self.ndim))))


def expand(self: Tensor, *shape: Any) -> Tensor:
    shp = tuple(int_arg(s, "expand size") for s in _sizes(shape))
    if len(shp) < self.ndim:
        raise ValueError(f"cannot expand shape {self.shape} to {shp}: fewer dimensions")
    padded = (1,) * (len(shp) - self.ndim) + self.shape
    new = tuple(s if n == -1 else n for s, n in zip(padded, shp))
    for s, n in zip(padded, new):
        if s != n and s != 1:
            raise ValueError(f"cannot expand shape {self.shape} to {shp}: only size-1 dimensions can grow")
    return self._broadcast_to(new)


def broadcast_to(self: Tensor, shape: tuple[int, ...]) -> Tensor:
    return self.expand(shape)


def broadcast_valid(self: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``expand`` to a shape known to be a broadcast of this one (``broadcast_shape``'s): no argument checks, which
    cost more than the movement in an elementwise op."""
    x = self if self.ndim == len(shape) else self._moved("reshape", (1,) * (len(shape) - self.ndim) + self.shape)
    return x if x.shape == shape else x._moved("expand", shape)


def pad(self: Tensor, padding: Sequence[tuple[int, int] | None], value: Scalar = 0) -> Tensor:
    """Constant padding: ``padding[d] = (before, after)`` for each dim (None: no padding)."""
    if len(padding) != self.ndim:
        raise ValueError(f"pad needs one (before, after) per dimension of {self.shape}, got {len(padding)}")
    pads = tuple((0, 0) if p is None else (int_arg(p[0], "pad amount"), int_arg(p[1], "pad amount")) for p in padding)
    if any(b < 0 or a < 0 for b, a in pads):
        raise ValueError(f"pad amounts must be >= 0, got {pads}; use shrink to cut")
    if all(p == (0, 0) for p in pads):
        return self
    out = self._moved("pad", pads)
    if value == 0:
        return out
    mask = self._new(const_view(True, dtypes.bool, self.shape))._moved("pad", pads)
    return mask.where(out, value)


def shrink(self: Tensor, arg: Sequence[tuple[int, int] | None]) -> Tensor:
    """Keep ``[start, end)`` of each dim (None: all of it)."""
    if len(arg) != self.ndim:
        raise ValueError(f"shrink needs one (start, end) per dimension of {self.shape}, got {len(arg)}")
    a = tuple(
        (0, s) if r is None else (int_arg(r[0], "shrink start"), int_arg(r[1], "shrink end"))
        for r, s in zip(arg, self.shape)
    )
    for d, ((b, e), s) in enumerate(zip(a, self.shape)):
        if not 0 <= b <= e <= s:
            raise ValueError(f"shrink range {(b, e)} is invalid for axis {d} of size {s} (shape {self.shape})")
    if all(r == (0, s) for r, s in zip(a, self.shape)):
        return self
    return self._moved("shrink", a)


def flip(self: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    axes = tuple(range(self.ndim)) if axis is None else tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    ax = tuple(self._axis(a) for a in axes)
    return self._moved("flip", ax) if ax else self


def stride(self: Tensor, steps: tuple[int, ...]) -> Tensor:
    if all(s == 1 for s in steps):
        return self
    return self._moved("stride", tuple(steps))


def squeeze(self: Tensor, dim: int | None = None) -> Tensor:
    if dim is None:
        return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0:  # numpy: a 0-d array squeezes along axis 0 or -1 to itself
        axis_arg(dim, (1,), "dim")
        return self
    d = self._axis(dim, what="dim")
    if self.shape[d] != 1:
        return self
    return self.reshape(self.shape[:d] + self.shape[d + 1 :])


def unsqueeze(self: Tensor, dim: int) -> Tensor:
    d = self._axis(dim, self.ndim + 1, what="dim")
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0:
        return self.reshape(1)
    s, e = self._axis(start_dim, what="start_dim"), self._axis(end_dim, what="end_dim")
    return self.reshape(self.shape[:s] + (math.prod(self.shape[s : e + 1]),) + self.shape[e + 1 :])


def squeeze_axes(self: Tensor, axes: tuple[int, ...]) -> Tensor:
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))


def getitem(self: Tensor, idx: Any) -> Tensor:
    items = list(idx) if isinstance(idx, tuple) else [idx]
    for it in items:
        if not (it is None or it is Ellipsis or isinstance(it, (int, np.integer, slice))) or isinstance(it, bool):
            raise TypeError(f"unsupported index {it!r}: use ints, slices, None and ...")
    n_real = sum(1 for it in items if it is not None and it is not Ellipsis)
    if items.count(Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > self.ndim:
        raise IndexError(f"too many indices ({n_real}) for a tensor of shape {self.shape}")
    if Ellipsis in items:
        i = items.index(Ellipsis)
        items = items[:i] + [slice(None)] * (self.ndim - n_real) + items[i + 1 :]
    else:
        items = items + [slice(None)] * (self.ndim - n_real)
    shrinks, flips, steps, out_shape = [], [], [], []
    d = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        size = self.shape[d]
        if isinstance(it, (int, np.integer)):
            i = int(it)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of range for axis {d} with size {size}")
            i %= size
            shrinks.append((i, i + 1))
            flips.append(False)
            steps.append(1)
        else:
            start, stop, step = it.indices(size)
            cnt = len(range(start, stop, step))
            if cnt == 0:
                shrinks.append((0, 0))
                flips.append(False)
                steps.append(1)
            elif step > 0:
                shrinks.append((start, start + (cnt - 1) * step + 1))
                flips.append(False)
                steps.append(step)
            else:
                shrinks.append((start + (cnt - 1) * step, start + 1))
                flips.append(True)
                steps.append(-step)
            out_shape.append(cnt)
        d += 1
    x = self.shrink(shrinks)
    fl = tuple(i for i, f in enumerate(flips) if f)
    if fl:
        x = x.flip(fl)
    x = x._stride(tuple(steps))
    return x.reshape(tuple(out_shape))


def _tensors(
    first: Tensor | Sequence[Tensor], others: tuple[Tensor | Sequence[Tensor], ...], what: str
) -> list[Tensor]:
    """The tensors of ``x.cat(y, z)``, ``Tensor.cat(x, y, z)`` and ``Tensor.cat([x, y, z])`` alike."""
    out: list[Any] = []
    for t in (first, *others):
        out.extend(t if isinstance(t, (list, tuple)) else [t])
    if not out:
        raise ValueError(f"{what} needs at least one tensor")
    cls = type(out[0])
    for t in out:
        if not isinstance(t, cls) or not hasattr(t, "uop"):
            raise TypeError(f"{what} takes tensors (or one list of them), got {type(t).__name__}")
    return out


def cat(self: Tensor | Sequence[Tensor], *others: Tensor | Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along ``dim``: ``x.cat(y)``, ``Tensor.cat(x, y)`` and ``Tensor.cat([x, y])`` are the same."""
    ts = _tensors(self, others, "cat")
    first = ts[0]
    d = first._axis(dim, what="dim")
    for t in ts[1:]:
        if t.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != d):
            raise ValueError(f"cat along axis {d}: shapes {first.shape} and {t.shape} differ outside that axis")
        first._same_device(t)
    dt = result_dtype(first.device, *(t.dtype for t in ts))
    total = sum(t.shape[d] for t in ts)
    out: Tensor | None = None
    off = 0
    for t in ts:
        pads: list[tuple[int, int] | None] = [None] * first.ndim
        pads[d] = (off, total - off - t.shape[d])
        p = t.cast(dt).pad(pads)
        out = p if out is None else out + p
        off += t.shape[d]
    assert out is not None
    return out


def stack(self: Tensor | Sequence[Tensor], *others: Tensor | Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join along a new axis ``dim``; spelled like ``cat``."""
    ts = _tensors(self, others, "stack")
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise ValueError(f"stack needs equal shapes, got {ts[0].shape} and {t.shape}")
    d = ts[0]._axis(dim, ts[0].ndim + 1, what="dim")
    return cat([t.unsqueeze(d) for t in ts], dim=d)
