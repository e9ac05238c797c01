"""Shape tracking: movement ops as index math.

A ``View`` maps an index in its ``shape`` to a linear offset into the memory below it:
``offset + sum(i * stride)``, valid only inside ``mask`` (outside it reads the pad value).
Reshape, permute, expand, pad, shrink, flip and strided slicing fold into one ``View`` when
they can; when a reshape cannot be expressed with strides, a ``ShapeTracker`` stacks a new
view whose linear index is unravelled into the shape of the view below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from uops.dtypes import dtypes
from uops.ir.ops import Ops
from uops.ir.uop import UOp

Shape = tuple[int, ...]
Mask = tuple[tuple[int, int], ...]


def strides_for(shape: Shape) -> tuple[int, ...]:
    """Row-major (C-contiguous) strides; size-1 dims get stride 0 (canonical form)."""
    out: list[int] = []
    acc = 1
    for s in reversed(shape):
        out.append(acc if s != 1 else 0)
        acc *= s
    return tuple(reversed(out))


def _prod(xs: tuple[int, ...] | list[int]) -> int:
    return math.prod(xs)


@dataclass(frozen=True)
class View:
    """One strided window on linear memory: shape, strides, offset and an optional valid mask."""

    shape: Shape
    strides: tuple[int, ...]
    offset: int
    mask: Mask | None
    contiguous: bool

    @staticmethod
    def create(shape: Shape, strides: tuple[int, ...] | None = None, offset: int = 0, mask: Mask | None = None) -> View:
        """A canonical view: size-1 dims have stride 0, a mask covering everything is dropped."""
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"negative dimension in shape {shape}")
        strides = strides_for(shape) if strides is None else tuple(st if s != 1 else 0 for s, st in zip(shape, strides))
        if mask is not None:
            if any(b <= a for a, b in mask):
                # nothing is valid: canonicalise so equal views compare equal
                mask = tuple((0, 0) for _ in shape)
                strides, offset = tuple(0 for _ in shape), 0
            elif all(a == 0 and b == s for (a, b), s in zip(mask, shape)):
                mask = None
        if 0 in shape:
            strides, offset, mask = tuple(0 for _ in shape), 0, None
        contiguous = offset == 0 and mask is None and strides == strides_for(shape)
        return View(shape, strides, offset, mask, contiguous)

    @property
    def size(self) -> int:
        return _prod(self.shape)

    # ----- movement -----
    def permute(self, order: tuple[int, ...]) -> View:
        return View.create(
            tuple(self.shape[i] for i in order),
            tuple(self.strides[i] for i in order),
            self.offset,
            None if self.mask is None else tuple(self.mask[i] for i in order),
        )

    def expand(self, new_shape: Shape) -> View:
        mask = None
        if self.mask is not None:
            mask = tuple(
                m if s == ns else ((0, ns) if m != (0, 0) else (0, 0))
                for m, s, ns in zip(self.mask, self.shape, new_shape)
            )
        strides = tuple(st if s == ns else 0 for st, s, ns in zip(self.strides, self.shape, new_shape))
        return View.create(new_shape, strides, self.offset, mask)

    def pad(self, pads: tuple[tuple[int, int], ...]) -> View:
        shape = tuple(s + b + a for s, (b, a) in zip(self.shape, pads))
        offset = self.offset - sum(b * st for (b, _), st in zip(pads, self.strides))
        old = self.mask if self.mask is not None else tuple((0, s) for s in self.shape)
        mask = tuple((m0 + b, m1 + b) for (m0, m1), (b, _) in zip(old, pads))
        return View.create(shape, self.strides, offset, mask)

    def shrink(self, arg: tuple[tuple[int, int], ...]) -> View:
        shape = tuple(e - b for b, e in arg)
        offset = self.offset + sum(b * st for (b, _), st in zip(arg, self.strides))
        mask = None
        if self.mask is not None:
            mask = tuple((max(0, m0 - b), min(e - b, m1 - b)) for (m0, m1), (b, e) in zip(self.mask, arg))
        return View.create(shape, self.strides, offset, mask)

    def flip(self, axes: tuple[int, ...]) -> View:
        strides = list(self.strides)
        offset = self.offset
        mask = list(self.mask) if self.mask is not None else None
        for a in axes:
            s = self.shape[a]
            if s == 0:
                continue
            offset += (s - 1) * strides[a]
            strides[a] = -strides[a]
            if mask is not None:
                m0, m1 = mask[a]
                mask[a] = (s - m1, s - m0)
        return View.create(self.shape, tuple(strides), offset, None if mask is None else tuple(mask))

    def stride(self, steps: tuple[int, ...]) -> View:
        """Take every k-th element along each dim (k >= 1)."""
        shape = tuple((s + k - 1) // k for s, k in zip(self.shape, steps))
        strides = tuple(st * k for st, k in zip(self.strides, steps))
        mask = None
        if self.mask is not None:
            mask = tuple(((m0 + k - 1) // k, (m1 + k - 1) // k) for (m0, m1), k in zip(self.mask, steps))
        return View.create(shape, strides, self.offset, mask)

    def reshape(self, new_shape: Shape) -> View | None:
        """The same elements under ``new_shape`` as one view, or None when strides cannot express it."""
        if self.shape == new_shape:
            return self
        if self.contiguous or 0 in self.shape:
            return View.create(new_shape)
        if self.mask is not None and any(m == (0, 0) for m in self.mask):
            return View.create(new_shape, mask=tuple((0, 0) for _ in new_shape))
        # runs of old dims that are one stride walk; masked dims stay runs of their own
        old = [
            (s, st, (0, s) if self.mask is None else self.mask[i])
            for i, (s, st) in enumerate(zip(self.shape, self.strides))
            if s != 1
        ]
        runs: list[tuple[int, int, tuple[int, int] | None]] = []  # (size, innermost stride, mask or None)
        for s, st, m in old:
            full = m == (0, s)
            if runs and full and runs[-1][2] is None and runs[-1][1] == st * s:
                prev = runs[-1]
                runs[-1] = (prev[0] * s, st, None)
            else:
                runs.append((s, st, None if full else m))
        new_dims = [(i, s) for i, s in enumerate(new_shape) if s != 1]
        strides = [0] * len(new_shape)
        new_mask: list[tuple[int, int]] = [(0, s) for s in new_shape]
        j = 0
        for size, st, rm in runs:
            group: list[tuple[int, int]] = []
            acc = 1
            while acc < size and j < len(new_dims):
                group.append(new_dims[j])
                acc *= new_dims[j][1]
                j += 1
            if acc != size:
                return None
            if rm is not None:
                if len(group) != 1:
                    return None
                new_mask[group[0][0]] = rm
            cur = st
            for i, s in reversed(group):
                strides[i] = cur
                cur *= s
        if j != len(new_dims):
            return None
        has_mask = any(m != (0, s) for m, s in zip(new_mask, new_shape))
        return View.create(new_shape, tuple(strides), self.offset, tuple(new_mask) if has_mask else None)

    # ----- index expressions -----
    def expr(self, idxs: tuple[UOp, ...]) -> tuple[UOp, UOp | None]:
        """The linear offset and the validity (None: always valid) of the element at ``idxs``."""
        if self.mask is not None and any(m == (0, 0) for m in self.mask):
            return _c(0), UOp.const(dtypes.bool, False)
        lin = _lin([(i, st) for i, st, s in zip(idxs, self.strides, self.shape) if st != 0 and s != 1], self.offset)
        valid: UOp | None = None
        if self.mask is not None:
            for i, (m0, m1), s in zip(idxs, self.mask, self.shape):
                if m0 > 0:
                    valid = _and(valid, _c(m0 - 1) < i)
                if m1 < s:
                    valid = _and(valid, i < _c(m1))
        return lin, valid


def _c(x: int) -> UOp:
    return UOp.const(dtypes.index, x)


def _and(a: UOp | None, b: UOp | None) -> UOp | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _lin(terms: list[tuple[UOp, int]], offset: int) -> UOp:
    out: UOp | None = None
    for i, st in terms:
        t = i if st == 1 else i * _c(st)
        out = t if out is None else out + t
    if out is None:
        return _c(offset)
    return out if offset == 0 else out + _c(offset)


def unravel(terms: list[tuple[UOp, int, int, int]], offset: int, shape: Shape) -> list[UOp]:
    """Per-dim indices into ``shape`` of the linear index ``offset + sum(idx * coeff)``.

    ``terms`` are ``(idx, coeff, lo, hi)`` with ``lo <= idx <= hi`` wherever the result is used.
    When the terms' digits (their coefficients in the shape's mixed radix) add up in every dim
    without carries the result is plain affine math;
    otherwise it falls back to division and modulo.
    """
    n = len(shape)
    if 0 in shape:  # nothing of an empty shape is ever read (the views above mask it): any index will do
        return [_c(0) for _ in shape]
    cs = strides_for(shape)
    terms = [t for t in terms if t[1] != 0]
    base = offset + sum(c * lo for _, c, lo, _ in terms)
    total = _prod(shape)
    if 0 <= base < max(total, 1):
        cd = []
        rem = base
        for d in range(n):
            if shape[d] == 1:
                cd.append(0)
                continue
            cd.append(rem // cs[d])
            rem %= cs[d]
        per: list[list[tuple[UOp, int, int]]] = [[] for _ in range(n)]
        lo_v, hi_v = list(cd), list(cd)
        for idx, c, lo, hi in terms:
            if hi == lo:
                continue
            # c's digits in the shape's mixed radix: a window start ``k * (size + dilation)`` over a
            # repeated dim is one step of the repeat plus ``dilation`` inside it
            sign, rem = (1, c) if c > 0 else (-1, -c)
            for d in range(n):
                if shape[d] == 1 or rem < cs[d]:
                    continue
                q, rem = divmod(rem, cs[d])
                k = sign * q
                per[d].append((idx, k, lo))
                if k > 0:
                    hi_v[d] += k * (hi - lo)
                else:
                    lo_v[d] += k * (hi - lo)
        if all(lo_v[d] >= 0 and hi_v[d] < max(shape[d], 1) for d in range(n)):
            out = []
            for d in range(n):
                const = cd[d] - sum(k * lo for _, k, lo in per[d])
                out.append(_lin([(i, k) for i, k, _ in per[d]], const))
            return out
    lin = _lin([(i, c) for i, c, _, _ in terms], offset)
    out = []
    for d in range(n):
        if shape[d] == 1:
            out.append(_c(0))
            continue
        e = lin if cs[d] == 1 else lin // _c(cs[d])
        out.append(e if d == 0 else e % _c(shape[d]))
    return out


def _terms(v: View, idxs: tuple[UOp, ...]) -> list[tuple[UOp, int, int, int]]:
    out = []
    for d, (i, st, s) in enumerate(zip(idxs, v.strides, v.shape)):
        if st == 0 or s == 1:
            continue
        lo, hi = (0, s - 1) if v.mask is None else (v.mask[d][0], v.mask[d][1] - 1)
        ilo, ihi = i.vmin, i.vmax
        if isinstance(ilo, int) and isinstance(ihi, int):
            lo, hi = max(lo, ilo), min(hi, ihi)
        out.append((i, st, lo, max(lo, hi)))
    return out


@dataclass(frozen=True)
class ShapeTracker:
    """A stack of views, the last one outermost: movement ops applied to a base of some shape."""

    views: tuple[View, ...]

    @staticmethod
    def from_shape(shape: Shape) -> ShapeTracker:
        """The contiguous tracker of ``shape`` (made once per shape: every new node's view starts here)."""
        return _contiguous(tuple(shape))

    @property
    def shape(self) -> Shape:
        return self.views[-1].shape

    @property
    def size(self) -> int:
        return self.views[-1].size

    @property
    def contiguous(self) -> bool:
        return len(self.views) == 1 and self.views[0].contiguous

    @property
    def expands(self) -> bool:
        """Whether some element below is read more than once (a stride-0 dim of size > 1)."""
        for v in self.views:
            for d, (s, st) in enumerate(zip(v.shape, v.strides)):
                if st == 0 and s > 1 and (v.mask is None or v.mask[d][1] - v.mask[d][0] > 1):
                    return True
        return False

    def _with(self, v: View) -> ShapeTracker:
        return ShapeTracker(self.views[:-1] + (v,))

    def reshape(self, new_shape: Shape) -> ShapeTracker:
        if _prod(new_shape) != self.size:
            raise ValueError(f"cannot reshape {self.shape} ({self.size} elements) to {new_shape} ({_prod(new_shape)})")
        v = self.views[-1].reshape(tuple(new_shape))
        if v is not None:
            return self._with(v)
        return ShapeTracker(self.views + (View.create(tuple(new_shape)),))

    def permute(self, order: tuple[int, ...]) -> ShapeTracker:
        return self._with(self.views[-1].permute(order))

    def expand(self, new_shape: Shape) -> ShapeTracker:
        return self._with(self.views[-1].expand(tuple(new_shape)))

    def pad(self, pads: tuple[tuple[int, int], ...]) -> ShapeTracker:
        return self._with(self.views[-1].pad(pads))

    def shrink(self, arg: tuple[tuple[int, int], ...]) -> ShapeTracker:
        return self._with(self.views[-1].shrink(arg))

    def flip(self, axes: tuple[int, ...]) -> ShapeTracker:
        return self._with(self.views[-1].flip(axes))

    def stride(self, steps: tuple[int, ...]) -> ShapeTracker:
        return self._with(self.views[-1].stride(steps))

    def __add__(self, other: ShapeTracker) -> ShapeTracker:
        """``other`` applied on top of ``self``: other's base is a value of ``self.shape``."""
        out = self
        for v in other.views:
            if v.contiguous:
                out = out.reshape(v.shape)  # linear identity: a reshape of what is below
            elif out.contiguous:
                out = ShapeTracker((v,))
            else:
                out = ShapeTracker(out.views + (v,))
        return out

    def expr(self, idxs: tuple[UOp, ...]) -> tuple[UOp, UOp | None]:
        """Linear index into the base and its validity for the element at ``idxs``."""
        v = self.views[-1]
        lin, valid = v.expr(idxs)
        terms = _terms(v, idxs)
        off = v.offset
        for below in reversed(self.views[:-1]):
            sub = unravel(terms, off, below.shape)
            lin, valid2 = below.expr(tuple(sub))
            valid = _and(valid, valid2)
            terms, off = _terms(below, tuple(sub)), below.offset
        return lin, valid

    def to_base(self, idxs: tuple[UOp, ...], base_shape: Shape) -> tuple[list[UOp], UOp | None]:
        """Per-dim indices into a base of ``base_shape`` and the validity, for the element at ``idxs``."""
        v = self.views[-1]
        _, valid = v.expr(idxs)
        terms, off = _terms(v, idxs), v.offset
        for below in reversed(self.views[:-1]):
            sub = unravel(terms, off, below.shape)
            _, valid2 = below.expr(tuple(sub))
            valid = _and(valid, valid2)
            terms, off = _terms(below, tuple(sub)), below.offset
        if valid is not None and valid.op is Ops.CONST and valid.arg is False:
            return [_c(0) for _ in base_shape], valid
        return unravel(terms, off, base_shape), valid


@lru_cache(maxsize=4096)
def _contiguous(shape: Shape) -> ShapeTracker:
    return ShapeTracker((View.create(shape),))
