"""Autograd: one table of derivative rules on tensor-level UOps; a backward graph is a UOp graph.

``compute_gradients`` walks the forward graph from a root back to the nodes asked for and builds,
with ``RULES`` (one entry per op), the UOps of each gradient. Nothing runs here: the gradients are
lazy nodes that the scheduler fuses and realizes like any forward expression (no tape of calls).

Movement. The front end merges a chain of movement ops into one ``VIEW`` whose ShapeTracker
kernels read as index math, and a merged tracker (a sliding window made of pad, reshape, expand
and permute) has no simple inverse. So each elementary movement is kept in the graph as well
(``schedule.move``): its ``VIEW`` carries a ``MoveTracker`` naming the movement (``("pad",
pads)``...), and when it moves a view its second source is that view, the node it came from. The
first source and the tracker are what the scheduler always saw, so forward schedules and kernels
are unchanged and no folding pass runs; the second source is only walked here, where each
elementary movement has a simple rule (reshape back, inverse permute, expand -> sum, pad <->
shrink, flip, stride -> pad and reshape). ``detach`` is the same kind of node with no gradient.
Why not new Ops per movement folded by a first scheduler pass: that pass would rebuild every node
above a movement on each schedule and break the plan cache's node positions.

Ties. ``maximum(a, b)`` at ``a == b`` sends half of the gradient to each side; a max (and min,
which is max of the negation) reduction splits it evenly between the tied elements, as torch does.

A value realized before ``backward()`` keeps its way back: ``remember_origin`` maps the buffer view
that replaced a lazy node requiring grad to that node, and the walk follows it; the scheduler then
substitutes the realized forward values into the backward graph.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from uops.dtypes import dtypes
from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .realize import upload
from .schedule import MoveTracker, const_view, device_of, move, shape_of

__all__ = ["COMPOSITE", "AutogradError", "NonDifferentiableError", "RULES", "composite", "compute_gradients", "no_grad"]


class AutogradError(UopsError, RuntimeError):
    """backward()/gradient() asked for something the graph cannot give (no path, a non-scalar root)."""


class NonDifferentiableError(UopsError, TypeError):
    """A gradient of or with respect to a tensor whose dtype is not floating point."""


#: whether ops record their dependence on tensors requiring grad (off inside ``no_grad``)
GRAD_ENABLED = [True]


class no_grad:  # noqa: N801 (spelled like torch's and tinygrad's context)
    """``with no_grad():`` nothing made inside depends on a tensor requiring grad (optimizer steps, eval)."""

    def __enter__(self) -> no_grad:
        self._prev = GRAD_ENABLED[0]
        GRAD_ENABLED[0] = False
        return self

    def __exit__(self, *exc: object) -> None:
        GRAD_ENABLED[0] = self._prev


#: VIEW(BUFFER) that replaced a lazy node requiring grad when it was realized -> that lazy node
_origin: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


def remember_origin(realized_view: UOp, lazy: UOp) -> None:
    if realized_view is not lazy:
        _origin[realized_view] = lazy


# ----- helpers building tensor-level UOps (shapes must agree: no broadcasting at this level) -----
def _const(like: UOp, value: float) -> UOp:
    return const_view(value, like.dtype, shape_of(like))


def _reduce(x: UOp, op: Ops, axes: tuple[int, ...]) -> UOp:
    """Keepdim reduction of ``x`` over ``axes``."""
    return UOp(Ops.REDUCE_AXIS, x.dtype, (x,), (op, axes)) if axes else x


def _expand(g: UOp, shape: tuple[int, ...]) -> UOp:
    return g if shape_of(g) == shape else move(g, "expand", shape)


def _sum_to(g: UOp, shape: tuple[int, ...]) -> UOp:
    """``g`` summed over the axes an expand to its shape made from ``shape`` (keepdim)."""
    return _reduce(g, Ops.ADD, tuple(i for i, (a, b) in enumerate(zip(shape, shape_of(g))) if a != b))


def _eq(a: UOp, b: UOp) -> UOp:
    return a.alu(Ops.CMPEQ, b)


def _ln2(g: UOp) -> UOp:
    return _const(g, math.log(2.0))


Grads = tuple[UOp | None, ...]
Rule = Callable[[UOp, UOp], Grads]


def _max_grad(ret: UOp, g: UOp) -> Grads:
    a, b = ret.src
    half, zero = g * _const(g, 0.5), _const(g, 0.0)
    tie = _eq(a, b).where(half, zero)
    return (b < a).where(g, tie), (a < b).where(g, tie)


def _reduce_grad(ret: UOp, g: UOp) -> Grads:
    op, axes = ret.arg
    x = ret.src[0]
    shape = shape_of(x)
    if op is Ops.ADD:
        return (_expand(g, shape),)
    if op is Ops.MAX:  # an even split between tied maxima
        hit = _eq(x, _expand(ret, shape)).cast(x.dtype)
        count = _reduce(hit, Ops.ADD, axes)
        return (_expand(g / count, shape) * hit,)
    if op is Ops.MUL:  # the product of the others, right with zeros too (none, one or several)
        is_zero = _eq(x, _const(x, 0.0))
        zeros = _expand(_reduce(is_zero.cast(x.dtype), Ops.ADD, axes), shape)
        rest = _expand(_reduce(is_zero.where(_const(x, 1.0), x), Ops.MUL, axes), shape)
        none_zero = _eq(zeros, _const(zeros, 0.0))
        only_this = is_zero.alu(Ops.AND, _eq(zeros, _const(zeros, 1.0)))
        others = none_zero.where(rest / x, only_this.where(rest, _const(x, 0.0)))
        return (_expand(g, shape) * others,)
    raise AutogradError(f"no gradient rule for a {op.name} reduction")


def _stride_grad(x_shape: tuple[int, ...], steps: tuple[int, ...], g: UOp) -> UOp:
    """Each value back at every ``k``-th place, zeros between: reshape (n, 1), pad to (n, k), flatten, cut."""
    out = shape_of(g)
    g = move(g, "reshape", tuple(d for n in out for d in (n, 1)))
    g = move(g, "pad", tuple(p for k in steps for p in ((0, 0), (0, k - 1))))
    g = move(g, "reshape", tuple(n * k for n, k in zip(out, steps)))
    return move(g, "shrink", tuple((0, s) for s in x_shape))


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(order)), key=lambda i: order[i]))


#: elementary movement -> (its input shape, its arg, the output's gradient) -> the input's gradient
_MOVES: dict[str, Callable[[tuple[int, ...], Any, UOp], UOp | None]] = {
    "reshape": lambda s, a, g: move(g, "reshape", s),
    "permute": lambda s, a, g: move(g, "permute", _inverse(a)),
    "expand": lambda s, a, g: _sum_to(g, s),
    "pad": lambda s, a, g: move(g, "shrink", tuple((b, b + n) for (b, _), n in zip(a, s))),
    "shrink": lambda s, a, g: move(g, "pad", tuple((b, n - e) for (b, e), n in zip(a, s))),
    "flip": lambda s, a, g: move(g, "flip", a),
    "stride": lambda s, a, g: _stride_grad(s, a, g),
    "detach": lambda s, a, g: None,
}


#: composite op name -> its rule: (the node ``composite`` made, its gradient) -> the gradients of its inputs (the
#: node's sources after the first). Filled by the modules defining such ops (conv: ``tensor/conv.py``).
COMPOSITE: dict[str, Rule] = {}


def composite(value: UOp, inputs: tuple[UOp, ...], name: str, arg: object) -> UOp:
    """``value`` (computed from ``inputs``) marked as one op whose gradient ``COMPOSITE[name]`` gives.

    Why: the derivative of a composition is not always the best way to compute it (a convolution's is a window
    scatter; a transposed convolution is one fused window reduction). The mark is a view of ``value``'s base
    with the inputs as extra sources, so kernels see ``value`` and only this walk sees the inputs."""
    if value.op is Ops.VIEW:
        base, st = value.src[0], value.arg
    else:
        base, st = value, MoveTracker.from_shape(shape_of(value))
    return UOp(Ops.VIEW, value.dtype, (base, *inputs), MoveTracker(st.views, ("composite", (name, arg))))


def _view_grad(ret: UOp, g: UOp) -> Grads:
    st = ret.arg
    if isinstance(st, MoveTracker) and st.move[0] == "composite":
        name = st.move[1][0]  # type: ignore[index]
        return (None, *COMPOSITE[name](ret, g))
    if not isinstance(st, MoveTracker):
        if ret.src[0].op in (Ops.BUFFER, Ops.CONST):
            return (None,)  # stored data or a broadcast constant: where gradients stop
        raise AutogradError(
            "a view made by a tracker function (Tensor._view / apply_view) has no gradient; "
            "build it from reshape/permute/expand/pad/shrink/flip/stride"
        )
    x = ret.src[-1]
    method, arg = st.move
    gx = _MOVES[method](shape_of(x), arg, g)
    return (None, gx) if len(ret.src) == 2 else (gx,)


def _copy_grad(ret: UOp, g: UOp) -> Grads:
    dev = device_of(ret.src[0])
    return (g if dev is None or device_of(g) in (None, dev) else UOp(Ops.COPY, g.dtype, (g,), dev),)


def _cast_grad(ret: UOp, g: UOp) -> Grads:
    x = ret.src[0]
    return (g.cast(x.dtype) if dtypes.is_float(x.dtype) else None,)


def _positions(n: int, device: str, axis: int, wide: tuple[int, ...]) -> UOp:
    """``0..n-1`` along ``axis`` of a node of shape ``wide`` (int32)."""
    pos = upload(np.arange(n, dtype=np.int32), dtypes.int32, device)
    return _expand(move(pos, "reshape", (1,) * axis + (n,) + (1,) * (len(wide) - axis - 1)), wide)


def _unexpanded(u: UOp) -> UOp:
    """``u`` before the expands that made it (a shape with ones where they broadcast): an index read by every
    column of an embedding is one row of indices, not a row per column."""
    while u.op is Ops.VIEW and isinstance(u.arg, MoveTracker) and u.arg.move[0] == "expand":
        u = u.src[-1]
    return u


#: the work (positions x index elements) above which a gather's gradient and an indexed write sort the index
#: instead of comparing every pair: below it one arange-compare kernel beats the sort's dozen small ones
SORT_INDEX_ABOVE = 1 << 22


def _shifted(x: UOp, by: int) -> UOp:
    """``x[..., r - by]`` along the last axis, zero for ``r < by``."""
    shape = shape_of(x)
    padded = move(x, "pad", ((0, 0),) * (len(shape) - 1) + ((by, 0),))
    return move(padded, "shrink", tuple((0, d) for d in shape))


def _gather_last(src: UOp, index: UOp) -> UOp:
    """``src[..., index[..., j]]`` along the last axis (``index`` int32, of the output's shape; outside: zero)."""
    return UOp(Ops.INDEX, src.dtype, (src, index), len(shape_of(src)) - 1)


def sort_index(keys: UOp, n: int, dev: str) -> tuple[UOp | None, UOp, UOp]:
    """Integer ``keys`` (..., k) sorted along the last axis, for each position ``j`` of ``0..n-1`` the last of them
    equal to ``j``: ``(perm, sorted keys, at)`` with ``sorted[..., r] = keys[..., perm[..., r]]`` (ties in entry
    order; ``perm`` None when k == 1) and ``at[..., j]`` the sorted position of the last entry equal to ``j``, or -1.

    Why not an n x k compare: a rank by a k x k compare of the keys, then a binary search (log2(k) steps of n)."""
    lead, k = shape_of(keys)[:-1], shape_of(keys)[-1]
    nd = len(lead) + 1
    perm = None
    if k > 1:
        pair = lead + (k, k)
        mine = _expand(move(keys, "reshape", lead + (k, 1)), pair)
        other = _expand(move(keys, "reshape", lead + (1, k)), pair)
        ei, ej = _positions(k, dev, nd - 1, pair), _positions(k, dev, nd, pair)
        before = (other < mine) | (_eq(other, mine) & (ej < ei))  # entry j sorts before entry i
        one, zero = const_view(1, dtypes.int32, pair), const_view(0, dtypes.int32, pair)
        rank = move(_reduce(before.where(one, zero), Ops.ADD, (nd,)), "reshape", lead + (k,))
        placed = _eq(_expand(move(rank, "reshape", lead + (1, k)), pair), ei)  # [r, i]: entry i has rank r
        perm = move(_reduce(placed.where(ej, zero), Ops.ADD, (nd,)), "reshape", lead + (k,))
        perm = UOp(Ops.CONTIGUOUS, perm.dtype, (perm,))
        keys = UOp(Ops.CONTIGUOUS, keys.dtype, (_gather_last(keys, perm),))
    rows = lead + (n,)
    j = _positions(n, dev, nd - 1, rows)
    lo = const_view(-1, dtypes.int32, rows)  # the last sorted entry whose key is <= j
    step = 1 << (k.bit_length() - 1)
    while step:
        cand = lo + const_view(step, dtypes.int32, rows)
        inside = cand < const_view(k, dtypes.int32, rows)
        ok = inside & (_gather_last(keys, cand) < j + const_view(1, dtypes.int32, rows))
        lo = UOp(Ops.CONTIGUOUS, lo.dtype, (ok.where(cand, lo),))  # one kernel a step: the simplifier sees no chain
        step >>= 1
    found = (const_view(-1, dtypes.int32, rows) < lo) & _eq(_gather_last(keys, lo), j)
    return perm, keys, found.where(lo, const_view(-1, dtypes.int32, rows))


def _sorted_index_grad(g: UOp, idx: UOp, axis: int, n: int, dev: str) -> UOp:
    """The gradient of a gather of ``m`` positions from ``n`` (along ``axis``) with ``m < n``, without an
    n x m product per column: the entries sorted by their index (``sort_index``, on the index alone, not the
    dims it is broadcast over), their gradients summed over runs of equal indices (a segmented scan: log2(m)
    steps of m per column), and each source position reads the sum at the end of its run.
    O(m^2 + n log m) integer work on the index, O((m log m + n) * columns) float work."""
    out = shape_of(g)
    nd = len(out)
    order = tuple(d for d in range(nd) if d != axis) + (axis,)
    back = tuple(sorted(range(nd), key=lambda i: order[i]))
    gp = move(g, "permute", order)  # (..., m): the gathered axis last
    keys = move(_unexpanded(idx), "permute", order)  # (... ones where the index is broadcast, k)
    k = shape_of(keys)[-1]
    if k == 1 and out[axis] > 1:  # one index for the whole axis: one entry, the sum of all
        gp = _reduce(gp, Ops.ADD, (nd - 1,))
    lead, cols = shape_of(keys)[:-1], shape_of(gp)[:-1]
    perm, keys, at = sort_index(keys, n, dev)
    if perm is not None:
        gp = _gather_last(gp, _expand(perm, cols + (k,)))
        pos = _positions(k, dev, nd - 1, lead + (k,))
        step = 1
        while step < k:  # inclusive sums over runs of equal keys, doubling the reach each step
            same = (const_view(step - 1, dtypes.int32, lead + (k,)) < pos) & _eq(_shifted(keys, step), keys)
            add = _expand(same, cols + (k,)).where(_shifted(gp, step), const_view(0.0, g.dtype, cols + (k,)))
            gp = UOp(Ops.CONTIGUOUS, gp.dtype, (gp + add,))
            step *= 2
    return move(_gather_last(gp, _expand(at, cols + (n,))), "permute", back)


def _index_grad(ret: UOp, g: UOp) -> Grads:
    """A gather's gradient: ``g`` scatter-added along the axis at the index (repeats add up; an index that
    read zero matches no position); the index gets none.

    Fewer gathered than source positions (an embedding) and a large product: ``_sorted_index_grad``. Otherwise
    one arange-compare over a new axis of the source's size, summed over the gathered axis (one kernel)."""
    src, idx = ret.src
    axis = ret.arg
    out, shape = shape_of(ret), shape_of(src)
    n, m = shape[axis], out[axis]
    dev = device_of(src) or device_of(g) or "CPU"
    if m < n and n * math.prod(out) > SORT_INDEX_ABOVE:
        return _sorted_index_grad(g, idx, axis, n, dev), None
    wide = out[: axis + 1] + (n,) + out[axis + 1 :]
    narrow = out[: axis + 1] + (1,) + out[axis + 1 :]
    pos = _positions(n, dev, axis + 1, wide)
    hit = _eq(_expand(move(idx, "reshape", narrow), wide), pos)
    picked = hit.where(_expand(move(g, "reshape", narrow), wide), const_view(0.0, g.dtype, wide))
    return move(_reduce(picked, Ops.ADD, (axis,)), "reshape", shape), None


#: THE table: op (or, for a VIEW, the elementary movement it records: see ``_MOVES``) -> the
#: gradients of its sources given the node and its own gradient. Ops absent (comparisons, integer
#: and bitwise ops) pass no gradient.
RULES: dict[Ops, Rule] = {
    Ops.ADD: lambda r, g: (g, g),
    Ops.SUB: lambda r, g: (g, -g),
    Ops.MUL: lambda r, g: (g * r.src[1], g * r.src[0]),
    Ops.FDIV: lambda r, g: (g / r.src[1], -(g * r) / r.src[1]),
    Ops.NEG: lambda r, g: (-g,),
    Ops.MAX: _max_grad,
    Ops.WHERE: lambda r, g: (None, r.src[0].where(g, _const(g, 0.0)), r.src[0].where(_const(g, 0.0), g)),
    Ops.MULACC: lambda r, g: (g * r.src[1], g * r.src[0], g),
    Ops.EXP2: lambda r, g: (g * r * _ln2(g),),
    Ops.LOG2: lambda r, g: (g / (r.src[0] * _ln2(g)),),
    Ops.SQRT: lambda r, g: (g / (r * _const(r, 2.0)),),
    Ops.RECIPROCAL: lambda r, g: (-(g * r * r),),
    Ops.SIN: lambda r, g: (g * (r.src[0] + _const(g, math.pi / 2)).alu(Ops.SIN),),
    Ops.POW: lambda r, g: (
        g * r.src[1] * r.src[0].alu(Ops.POW, r.src[1] - _const(g, 1.0)),
        g * r * r.src[0].alu(Ops.LOG2) * _ln2(g),
    ),
    Ops.TRUNC: lambda r, g: (_const(g, 0.0),),
    Ops.MOD: lambda r, g: (g, -(g * (r.src[0] / r.src[1]).alu(Ops.TRUNC))),
    Ops.CAST: _cast_grad,
    Ops.REDUCE_AXIS: _reduce_grad,
    Ops.CONTIGUOUS: lambda r, g: (g,),
    Ops.COPY: _copy_grad,
    Ops.VIEW: _view_grad,
    Ops.INDEX: _index_grad,
}


def _inputs(n: UOp) -> tuple[UOp, ...]:
    o = _origin.get(n)
    return (o,) if o is not None else n.src


def _order(root: UOp, targets: set[UOp]) -> list[UOp]:
    """The nodes on a path from ``root`` to a target, each after its inputs (iterative)."""
    order = root.toposort(sources=_inputs)
    on_path: set[UOp] = set()
    for n in order:
        if n in targets or any(s in on_path for s in _inputs(n)):
            on_path.add(n)
    return [n for n in order if n in on_path]


def compute_gradients(root: UOp, root_grad: UOp, targets: set[UOp]) -> dict[UOp, UOp]:
    """The gradient (a lazy UOp) of ``root`` with respect to each target it depends on."""
    grads: dict[UOp, UOp] = {root: root_grad}
    for n in reversed(_order(root, targets)):
        g = grads.get(n)
        if g is None:
            continue
        o = _origin.get(n)
        if o is not None:
            outs: Grads = (g,)
            srcs: tuple[UOp, ...] = (o,)
        else:
            rule = RULES.get(n.op)
            if rule is None:
                continue
            outs, srcs = rule(n, g), n.src
        for s, gs in zip(srcs, outs):
            if gs is None or not dtypes.is_float(s.dtype):
                continue
            prev = grads.get(s)
            grads[s] = gs if prev is None else prev + gs
    return {t: grads[t] for t in targets if t in grads}
