"""Lowering: a kernel AST becomes a low-level SINK a renderer can print.

Output axes become loops (CPU-style renderers) or launch indices split into global and local
dimensions (GPU-style renderers); reductions become register accumulators updated in loops;
ops the renderer does not declare are decomposed; index math is simplified and computed in int32
where its ranges fit; padded reads become gated loads. ``LOWERING`` lists the passes in order, by
name: each a function of one graph to one graph sharing one ``LowerContext``, run by ``run_passes``
(the driver ``UOPS_DEBUG=3`` and ``uops compile --stages`` report pass by pass). Most are
PatternMatchers applied with graph_rewrite; those that place loops and vector accesses walk the graph.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uops.codegen.opt import Opt, apply_opts, identity, row_loop
from uops.codegen.stash import stash_row_values
from uops.dtypes import AddrSpace, dtypes
from uops.errors import UopsError
from uops.ir.ops import AxisType, GroupOp, Ops
from uops.ir.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.ir.spec import verify, verify_own
from uops.ir.symbolic import symbolic
from uops.ir.uop import UOp
from uops.renderer import Renderer


class LoweringError(UopsError, ValueError):
    """A kernel the target cannot run as written (unsupported dtype, grid too large...)."""


# ----- helpers -----
def open_ranges(root: UOp) -> dict[UOp, frozenset[UOp]]:
    """For every node: the RANGEs it sits inside (those it depends on and that no END closed)."""
    ctx: dict[UOp, frozenset[UOp]] = {}
    for u in root.toposort():
        s: frozenset[UOp] = frozenset().union(*(ctx[x] for x in u.src)) if u.src else frozenset()
        if u.op is Ops.RANGE:
            s = s | {u}
        elif u.op is Ops.END:
            s = s - {x for x in u.src if x.op is Ops.RANGE}
        ctx[u] = s
    return ctx


def axes_of(ranges: list[UOp], *kinds: AxisType) -> list[UOp]:
    """The ``ranges`` of the given kinds, by axis id (each range once)."""
    return sorted({r for r in ranges if r.arg[1] in kinds}, key=lambda r: r.arg[0])


# ----- step 1: tidy the AST -----
def _drop_unit_range(r: UOp) -> UOp | None:
    return UOp.const(r.dtype, 0) if r.src[0].op is Ops.CONST and r.src[0].arg == 1 else None


def _in_bounds(idx: UOp) -> bool:
    """Whether an INDEX reads inside its buffer for every value of its ranges, gate or no gate."""
    size = getattr(idx.src[0].dtype, "size", -1)
    off = idx.src[1]
    return size > 0 and dtypes.is_int(off.dtype) and int(off.vmin) >= 0 and int(off.vmax) < size


def _gate_load(valid: UOp, ld: UOp, pad: UOp) -> UOp | None:
    """A padded read (its index out of the buffer where ``valid`` is false) loads only where valid. A read that is
    always in bounds stays an unconditional load and a select (a mask over scores): that vectorizes, a branch per
    lane does not (a decode step's masked softmax ran 5x slower gated)."""
    idx = ld.src[0]
    if idx.op is not Ops.INDEX or len(idx.src) != 2 or len(ld.src) != 1 or _in_bounds(idx):
        return None
    return UOp(Ops.LOAD, ld.dtype, (idx.replace(src=(*idx.src, valid)), pad))


def _gate_load_inverted(valid: UOp, pad: UOp, ld: UOp) -> UOp | None:
    return _gate_load(valid.logical_not(), ld, pad)


pm_gate_loads = PatternMatcher(
    [
        (UPat.var("valid").where(UPat(Ops.LOAD, name="ld"), UPat.var("pad")), _gate_load),
        (UPat.var("valid").where(UPat.var("pad"), UPat(Ops.LOAD, name="ld")), _gate_load_inverted),
    ]
)


def _keeps_target(idx: UOp, other: UOp) -> bool:
    """Whether ``other`` is a plain load of exactly the element ``idx`` stores to."""
    return other.op is Ops.LOAD and len(other.src) == 1 and other.src[0] == idx


def _gate_store(idx: UOp, w: UOp) -> UOp | None:
    """A store of ``where(m, new, old)`` where ``old`` is the element itself (a masked in-place update: a KV cache's
    new rows, ``masked_fill`` into a buffer) stores ``new`` only where ``m``: elsewhere it would write back what is
    there. Saves the read of the whole buffer and the write of every element the mask leaves alone."""
    if len(idx.src) != 2:
        return None
    cond, a, b = w.src
    if _keeps_target(idx, b):
        keep, new = cond, a
    elif _keeps_target(idx, a):
        keep, new = cond.logical_not(), b
    else:
        return None
    return UOp(Ops.STORE, dtypes.void, (idx.replace(src=(*idx.src, keep)), new))


pm_gate_stores = PatternMatcher(
    [(UPat(Ops.STORE, src=(UPat(Ops.INDEX, name="idx"), UPat(Ops.WHERE, name="w"))), _gate_store)]
)
pm_tidy_ast = PatternMatcher([(UPat(Ops.RANGE, name="r"), _drop_unit_range)]) + pm_gate_stores + pm_gate_loads


def _fold_gated_load(ld: UOp, idx: UOp, gate: UOp) -> UOp | None:
    """A gate that simplified to a constant needs no branch: always read, or never (the pad value)."""
    if gate.arg:
        return UOp(Ops.LOAD, ld.dtype, (idx.replace(src=idx.src[:2]),))
    return ld.src[1]


pm_fold_gates = PatternMatcher(
    [
        (
            UPat(
                Ops.LOAD, src=(UPat(Ops.INDEX, src=(UPat(), UPat(), UPat.cvar("gate")), name="idx"), UPat()), name="ld"
            ),
            _fold_gated_load,
        )
    ]
)


@functools.cache
def _tidy_matcher() -> PatternMatcher:
    return pm_tidy_ast + symbolic


# ----- step 2: output axes -----
@dataclass
class LaunchDims:
    global_size: list[UOp] = field(default_factory=list)  # workgroups per dimension
    local_size: list[int] = field(default_factory=list)  # threads per workgroup per dimension


def _pick_local(end: UOp, limit: int) -> int:
    if end.op is not Ops.CONST or limit <= 1:
        return 1
    n = int(end.arg)
    best = 1
    cand = 1
    while cand * 2 <= min(limit, n):
        cand *= 2
        if n % cand == 0:
            best = cand
    return best


def _fits_grid(groups: list[list[UOp]], limits: tuple[int, ...]) -> bool:
    """Whether each group (innermost last) fits its launch dimension (innermost -> dimension 0)."""
    for d, axes in enumerate(reversed(groups)):
        total = math.prod(int(a.src[0].vmax) for a in axes)
        if total > limits[d]:
            return False
    return True


def lower_axes(ast: UOp, ren: Renderer) -> tuple[UOp, LaunchDims, list[UOp]]:
    """Replace output (GLOBAL) ranges. Returns the new sink, launch dims and the loops, outermost first (a
    BLOCKed reduction's loop over blocks, then on CPU-style renderers one loop per output axis).

    A THREAD range (CPU-style) becomes the core index ``gidx0``; LOCAL and GROUP_REDUCE ranges
    (GPU-style) become workgroup indices, one dimension each, and then no local size is picked.
    """
    rngs = ast.ranges
    out_ranges = axes_of(rngs, AxisType.GLOBAL)
    dims = LaunchDims()
    mapping: dict[UOp, UOp] = {}
    # a BLOCKed reduction's loop over blocks (kind LOOP in the AST) goes around every output loop
    loops: list[UOp] = axes_of(rngs, AxisType.LOOP)
    if ren.global_max is None:
        for t in (u for u in rngs if u.arg[1] is AxisType.THREAD):
            mapping[t] = UOp(Ops.SPECIAL, dtypes.index, (t.src[0],), "gidx0")
            dims.global_size.append(t.src[0])
        prev: UOp | None = loops[-1] if loops else None
        for r in out_ranges:
            new = UOp(Ops.RANGE, r.dtype, (r.src[0],) if prev is None else (r.src[0], prev), (r.arg[0], AxisType.LOOP))
            mapping[r] = new
            loops.append(new)
            prev = new
        return ast.substitute(mapping), dims, loops
    explicit = sorted(
        axes_of(rngs, AxisType.LOCAL, AxisType.GROUP_REDUCE),
        key=lambda r: (r.arg[1] is AxisType.GROUP_REDUCE, r.arg[0]),
    )
    for d, lr in enumerate(explicit):
        mapping[lr] = UOp(Ops.SPECIAL, dtypes.index, (lr.src[0],), f"lidx{d}")
        dims.local_size.append(int(lr.src[0].arg))
    # GPU-style: at most len(global_max) launch dimensions; merge the outermost axes when there are more
    ndim = len(ren.global_max)
    groups: list[list[UOp]] = [[r] for r in out_ranges]
    while len(groups) > ndim:
        groups = [groups[0] + groups[1], *groups[2:]]
    if not _fits_grid(groups, ren.global_max):
        groups = [out_ranges] if out_ranges else []  # one flat dimension: dimension 0 has the largest limit
    idx_by_dim: list[tuple[list[UOp], int]] = list(zip(reversed(groups), range(len(groups))))  # innermost -> dim 0
    # a PACK buffer holds one thread's panel: no workgroup threads are picked for it to share
    packed = bool(axes_of(rngs, AxisType.PACK))
    threads_left = 1 if explicit or packed else ren.local_threads_max or 1
    for axes, d in idx_by_dim:
        size = axes[0].src[0]
        for a in axes[1:]:
            size = size * a.src[0]
        size = graph_rewrite(size, symbolic)
        limit = min(ren.local_max[d], threads_left) if ren.local_max is not None and d < len(ren.local_max) else 1
        local = _pick_local(size, limit)
        threads_left //= local
        nblocks = graph_rewrite(size // local, symbolic) if local > 1 else size
        if nblocks.op is Ops.CONST and nblocks.arg > ren.global_max[d]:
            raise LoweringError(
                f"launch dimension {d} needs {nblocks.arg} workgroups, more than {ren.device}'s limit "
                f"{ren.global_max[d]}; reshape the tensor so the largest axis is last"
            )
        gidx = UOp(Ops.SPECIAL, size.dtype, (nblocks,), f"gidx{d}")
        flat = gidx
        if local > 1:
            lidx = UOp(Ops.SPECIAL, size.dtype, (UOp.const(size.dtype, local),), f"lidx{d}")
            flat = gidx * local + lidx
        dims.global_size.append(nblocks)
        if not explicit:
            dims.local_size.append(local)
        # unflatten merged axes: the last axis varies fastest
        stride: UOp | None = None
        for a in reversed(axes):
            v = flat if stride is None else flat // stride
            mapping[a] = v % a.src[0] if a is not axes[0] else v
            stride = a.src[0] if stride is None else stride * a.src[0]
    return ast.substitute(mapping), dims, loops


# ----- step 2b: grouped reductions combine through local memory -----
def tree_levels(size: int) -> list[tuple[int, int]]:
    """(stride, active work-items) of each level of a tree combine over ``size`` partials: work-item ``i`` below
    ``active`` folds partial ``i + stride`` onto its own, so each level halves the partials left (rounding up) and
    ``size`` of them take ceil(log2(size)) levels, for any size."""
    levels, left = [], size
    while left > 1:
        stride = (left + 1) // 2
        levels.append((stride, left - stride))
        left = stride
    return levels


def _tree_combine(parts: list[tuple[UOp, UOp, Ops]], g: UOp, base: UOp, size: int) -> list[UOp]:
    """Each (local array, partial, op): work-item ``g`` of the group stores its partial at ``base + g``, then each
    level of ``tree_levels`` folds the upper partials onto the lower ones behind one barrier shared by every
    array, so a work-item takes O(log size) steps, not the ``size`` of a serial combine. A work-item active at a
    level was active at the one before, so its own partial stays in a register (an inactive one adds the
    identity); the combined values are read from ``base`` after the last barrier, by every work-item."""
    vals = [p for _, p, _ in parts]
    bar = UOp(Ops.BARRIER, dtypes.void, tuple(smem.index(base + g).store(p) for smem, p, _ in parts))
    for stride, active in tree_levels(size):
        on, stores = g < active, []
        for i, (smem, p, op) in enumerate(parts):
            mem = UOp(Ops.AFTER, smem.dtype, (smem, bar))
            vals[i] = vals[i].alu(op, mem.index(base + g + stride, on).load(identity(op, p.dtype)))
            stores.append(mem.index(base + g, on).store(vals[i]))
        bar = UOp(Ops.BARRIER, dtypes.void, tuple(stores))
    return [UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(base).load() for smem, _, _ in parts]


def _warp_reduce(v: UOp, op: Ops, width: int) -> UOp:
    """``v`` combined over the ``width`` lanes of its warp by xor shuffles (a butterfly): every lane ends with the
    warp's total after log2(width) exchanges, with no barrier and no local memory."""
    mask = width // 2
    while mask:
        v = v.alu(op, UOp(Ops.SHUFFLE, v.dtype, (v,), mask))
        mask //= 2
    return v


def _shuffle_combine(parts: list[tuple[UOp, UOp, Ops]], g: UOp, size: int, width: int) -> list[UOp]:
    """Each (local array, partial, op) over a group of whole warps: a butterfly in every warp, lane 0 of each
    stores its warp's total, and after one barrier every warp combines those totals by a second butterfly, so
    every work-item holds the group's total after 2 log2(width) shuffles and a single barrier."""
    vals = [_warp_reduce(p, op, width) for _, p, op in parts]
    warps = size // width
    if warps == 1:
        return vals
    lane = g % width
    bar = UOp(Ops.BARRIER, dtypes.void, tuple(smem.index(g // width, lane.eq(0)).store(v)
                                              for (smem, _, _), v in zip(parts, vals)))  # fmt: skip
    return [_warp_reduce(UOp(Ops.AFTER, smem.dtype, (smem, bar)).index(lane, lane < warps).load(identity(op, p.dtype)),
                         op, width) for smem, p, op in parts]  # fmt: skip


def _shuffles_fit(ren: Renderer, size: int, rows: int, dts: list[Any]) -> bool:
    """Whether a group combines by shuffles: the renderer has them, the group is whole warps (and at most a warp of
    warps) alone in its workgroup (no LOCAL rows, so lanes are consecutive work-items), and every value is a 32-bit
    scalar (what every dialect's shuffle moves)."""
    width = ren.shuffle_width
    return (width > 1 and rows == 1 and size % width == 0 and size <= width * width
            and all(dt.count == 1 and dt.itemsize == 4 for dt in dts))  # fmt: skip


def lower_groups(ast: UOp, ren: Renderer) -> UOp:
    """REDUCEs over a GROUP_REDUCE range: each workgroup thread reduces its share into a register, and the shares
    are combined by warp shuffles where the renderer has them and they fit (``_shuffle_combine``), else through
    local memory (``_tree_combine``); only thread 0 of the group writes the outputs. REDUCEs that read no other
    grouped one are combined together, sharing their barriers, then the next."""
    rngs = [u for u in ast.toposort() if u.op is Ops.RANGE]
    groups = axes_of(rngs, AxisType.GROUP_REDUCE)
    if not groups:
        return ast
    g = groups[0]
    size = int(g.src[0].arg)
    # the other workgroup axes (LOCAL) compute other outputs: each has its own row of shares
    row: UOp = UOp.const(dtypes.index, 0)
    rows = 1
    for lr in axes_of(rngs, AxisType.LOCAL):
        row, rows = row * lr.src[0] + lr, rows * int(lr.src[0].arg)
    sink, n = ast, 0
    while grouped := [u for u in sink.toposort() if u.op is Ops.REDUCE and g in u.src[1:]]:
        ready = [red for red in grouped if not any(x in grouped for x in red.src[0].toposort() if x is not red)]
        shuffle = _shuffles_fit(ren, size, rows, [red.dtype for red in ready])
        slots = size // ren.shuffle_width if shuffle else size * rows
        parts: list[tuple[UOp, UOp, Ops]] = []
        for red in ready:
            rest = tuple(x for x in red.src[1:] if x is not g)
            partial = UOp(Ops.REDUCE, red.dtype, (red.src[0], *rest), red.arg) if rest else red.src[0]
            parts.append((UOp(Ops.DEFINE_LOCAL, red.dtype.ptr(slots, AddrSpace.LOCAL), (), n), partial, red.arg))
            n += 1
        combined = (_shuffle_combine(parts, g, size, ren.shuffle_width) if shuffle
                    else _tree_combine(parts, g, row * size, size))  # fmt: skip
        sink = sink.substitute(dict(zip(ready, combined)))
    first = g.eq(0)
    stores = [
        st.replace(src=(st.src[0].replace(src=(*st.src[0].src[:2], first if len(st.src[0].src) == 2 else
                                                  st.src[0].src[2] & first)), st.src[1]))
        if st.op is Ops.STORE else st
        for st in sink.src
    ]  # fmt: skip
    return UOp.sink(*stores, arg=sink.arg)


# ----- step 2c: PACK copies -----
def lower_packs(sink: UOp, loops: list[UOp], ren: Renderer) -> tuple[UOp, list[UOp]]:
    """A PACK (``AFTER(DEFINE_LOCAL, STORE)`` over PACK ranges, see ``pack_input``) becomes a loop nest that fills
    the local buffer, closed by a BARRIER its readers come after. The nest sits inside the output loops up to the
    innermost one the copy depends on; the next output loop opens after the barrier, so each of its iterations
    reads the same copy. On GPU-style renderers (workgroups of one thread, see ``lower_axes``) a barrier also opens
    the copy inside a loop, as a cooperative copy would need."""
    packs = [u for u in sink.toposort() if u.op is Ops.AFTER and u.src[0].op is Ops.DEFINE_LOCAL
             and len(u.src) == 2 and u.src[1].op is Ops.STORE]  # fmt: skip
    if not packs:
        return sink, loops
    next_id = _next_range_id(sink)
    mapping: dict[UOp, UOp] = {}
    waits: dict[int, list[UOp]] = {}
    for pk in packs:
        local, fill = pk.src
        needs = {x for x in fill.toposort() if x.op is Ops.RANGE}
        at = 1 + max((i for i, lp in enumerate(loops) if lp in needs), default=-1)
        dep: UOp | None = loops[at - 1] if at else None
        if dep is not None and ren.global_max is not None:
            dep = UOp(Ops.BARRIER, dtypes.void, (dep,))
        copy = sorted((x for x in needs if x.arg[1] is AxisType.PACK), key=lambda r: r.arg[0])
        new: list[UOp] = []
        for r in copy:
            prev = new[-1] if new else dep
            new.append(
                UOp(Ops.RANGE, r.dtype, (r.src[0],) if prev is None else (r.src[0], prev), (next_id, AxisType.LOOP))
            )
            next_id += 1
        done: UOp = UOp(Ops.END, dtypes.void, (fill.substitute(dict(zip(copy, new))), new[-1]))
        for r in reversed(new[:-1]):
            done = done.end(r)
        bar = UOp(Ops.BARRIER, dtypes.void, (done,))
        mapping[pk] = UOp(Ops.AFTER, local.dtype, (local, bar))
        if at < len(loops):
            waits.setdefault(at, []).append(bar)
    for at, bars in waits.items():
        mapping[loops[at]] = loops[at].replace(src=(*loops[at].src, *bars))
    return sink.substitute(mapping), [lp.substitute(mapping) for lp in loops]


# ----- step 3: reductions -> accumulators -----
@dataclass
class _ReduceCtx:
    loops: list[UOp]
    next_id: int  # the next free range id (INNER loops are copied, once per use)
    count: int = 0

    def copy_range(self, r: UOp, *deps: UOp) -> UOp:
        """A fresh loop over ``r``'s size, opened after ``deps``."""
        self.next_id += 1
        return UOp(Ops.RANGE, r.dtype, (r.src[0], *deps), (self.next_id - 1, AxisType.LOOP))


def _inner_ranges(u: UOp) -> tuple[UOp, ...]:
    return tuple(axes_of(u.ranges, AxisType.INNER))


def _reduce_ranges(red: UOp) -> list[UOp]:
    """The loops of a REDUCE, by axis id (a unit range the tidy step folded to 0 has none)."""
    return sorted((r for r in red.src[1:] if r.op is Ops.RANGE), key=lambda r: r.arg[0])


def _lower_reduce_group(ctx: _ReduceCtx, members: list[UOp]) -> dict[UOp, UOp]:
    """REDUCEs over the same ranges share one loop nest and one accumulator array (a lane each)."""
    rranges = _reduce_ranges(members[0])
    if not rranges:
        return {m: m.src[0] for m in members}
    dt = members[0].dtype
    own = set(rranges)
    vals = UOp.sink(*(m.src[0] for m in members))
    inner = _inner_ranges(vals)
    outer = set(open_ranges(vals)[vals]) - own - set(inner)
    deps = sorted(outer | set(ctx.loops), key=lambda r: r.arg[0])
    # an INNER axis: one accumulator per lane and element, the element loop inside every pass
    n_inner = math.prod(int(r.src[0].arg) for r in inner)
    acc = UOp(Ops.DEFINE_REG, dt.ptr(len(members) * n_inner, AddrSpace.REG), (), ctx.count)
    ctx.count += 1
    acc_before = UOp(Ops.AFTER, acc.dtype, (acc, *deps)) if deps else acc

    def lanes(at: tuple[UOp, ...]) -> list[UOp]:
        flat: UOp = UOp.const(dtypes.index, 0)
        for r in at:
            flat = flat * r.src[0] + r
        return [flat + i * n_inner if at else UOp.const(dtypes.index, i) for i in range(len(members))]

    init_at: tuple[UOp, ...] = ()
    for r in inner:
        init_at += (ctx.copy_range(r, init_at[-1] if init_at else acc_before),)
    inits: tuple[UOp, ...] = tuple(acc_before.index(x).store(identity(m.arg, dt))
                                   for x, m in zip(lanes(init_at), members))  # fmt: skip
    for r in reversed(init_at):
        inits = (UOp(Ops.END, dtypes.void, (*inits, r)),)
    # a barrier the values read after (a grouped reduction's combine) must come before the loop opens
    barriers = {x for x in vals.toposort() if x.op is Ops.BARRIER}
    # so does every reduction whose result the values read (a row's earlier pass: softmax's max in its sum)
    barriers |= {x.src[1] for x in vals.toposort() if x.op is Ops.AFTER and x.src[0].op is Ops.DEFINE_REG
                 and len(x.src) == 2 and x.src[1].op is Ops.END and own.isdisjoint(x.src[1].ranges)}  # fmt: skip
    mapping: dict[UOp, UOp] = {}
    order = {u: i for i, u in enumerate(vals.toposort())}
    prev: tuple[UOp, ...] = (*inits, *sorted(barriers, key=order.__getitem__))
    for r in rranges:
        new = UOp(Ops.RANGE, r.dtype, (r.src[0], *prev), (r.arg[0], AxisType.REDUCE))
        mapping[r] = new
        prev = (new,)
    upd_at: list[UOp] = []
    for r in inner:
        upd_at.append(ctx.copy_range(r, upd_at[-1] if upd_at else mapping[rranges[-1]]))
        mapping[r] = upd_at[-1]
    acc_in = UOp(Ops.AFTER, acc.dtype, (acc, upd_at[-1] if upd_at else mapping[rranges[-1]]))
    upds = []
    for x, m, v in zip(lanes(tuple(upd_at)), members, vals.substitute(mapping).src):
        upds.append(acc_in.index(x).store(acc_in.index(x).load().alu(m.arg, v)))
    loops = [mapping[r] for r in rranges] + upd_at
    closed = UOp(Ops.END, dtypes.void, (*upds, loops[-1]))
    for r in reversed(loops[:-1]):
        closed = closed.end(r)
    done = UOp(Ops.AFTER, acc.dtype, (acc, closed))
    return {m: done.index(x).load() for x, m in zip(lanes(inner), members)}


def _next_range_id(sink: UOp) -> int:
    return 1 + max((u.arg[0] for u in sink.toposort() if u.op is Ops.RANGE), default=-1)


def lower_reduces(sink: UOp, loops: list[UOp]) -> UOp:
    """Innermost reductions first; those over the same ranges (UPCAST and UNROLL lanes) share a loop."""
    ctx = _ReduceCtx(loops, _next_range_id(sink))
    while True:
        has_red: dict[UOp, bool] = {}
        inner: list[UOp] = []
        for u in sink.toposort():
            has_red[u] = any(has_red[s] or s.op is Ops.REDUCE for s in u.src)
            if u.op is Ops.REDUCE and not has_red[u.src[0]] and u.src[0].op is not Ops.REDUCE:
                inner.append(u)
        if not inner:
            return sink
        by_ranges: dict[tuple[Any, ...], list[UOp]] = {}
        for u in inner:
            by_ranges.setdefault((u.dtype, _inner_ranges(u.src[0]), *_reduce_ranges(u)), []).append(u)
        mapping: dict[UOp, UOp] = {}
        for members in by_ranges.values():
            mapping.update(_lower_reduce_group(ctx, members))
        sink = sink.substitute(mapping)


# ----- step 3b: stores along an INNER axis -----
def lower_inner(sink: UOp, loops: list[UOp]) -> UOp:
    """The stores that depend on an INNER axis run in their own loop over it, after the reductions they read
    (whose accumulators the lowering of step 3 filled one element per pass)."""
    inner = _inner_ranges(sink)
    if not inner:
        return sink
    ctx = _ReduceCtx(loops, _next_range_id(sink))
    along = [st for st in sink.src if any(r in inner for r in _inner_ranges(st))]
    # after every accumulator they read is done, inside the output loops
    done = sorted({x for st in along for x in st.toposort() if x.op is Ops.AFTER and x.src[0].op is Ops.DEFINE_REG
                   and len(x.src) == 2 and x.src[1].op is Ops.END}, key=lambda x: x.src[0].arg)  # fmt: skip
    first = (*done, loops[-1]) if loops else tuple(done)
    at: list[UOp] = []
    for r in inner:
        at.append(ctx.copy_range(r, *(first if not at else (at[-1],))))
    body = UOp.sink(*along).substitute(dict(zip(inner, at)))
    closed = UOp(Ops.END, dtypes.void, (*body.src, at[-1]))
    for r in reversed(at[:-1]):
        closed = closed.end(r)
    return UOp.sink(*(st for st in sink.src if st not in along), closed, arg=sink.arg)


# ----- step 4: close output loops -----
def close_loops(sink: UOp, loops: list[UOp]) -> UOp:
    if not loops:
        return sink
    body: UOp = UOp(Ops.END, dtypes.void, (*sink.src, loops[-1]))
    for r in reversed(loops[:-1]):
        body = body.end(r)
    return UOp.sink(body, arg=sink.arg)


# ----- step 5: decompositions of ops the renderer does not declare -----
def decompositions(ops: frozenset[Ops]) -> PatternMatcher:
    rules: list[tuple[UPat, Any]] = []
    if Ops.SUB not in ops:
        rules.append((UPat(Ops.SUB, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a + (-b)))
    if Ops.FDIV not in ops:
        rules.append((UPat(Ops.FDIV, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a * b.reciprocal()))
    if Ops.POW not in ops:
        rules.append((UPat(Ops.POW, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: (a.log2() * b).exp2()))
    if Ops.CMPEQ not in ops:
        rules.append((UPat(Ops.CMPEQ, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a.ne(b).ne(True)))
    if Ops.MAX not in ops:
        rules.append((UPat(Ops.MAX, src=(UPat.var("a"), UPat.var("b"))), _max_by_select))
    if Ops.MULACC not in ops:
        rules.append((UPat(Ops.MULACC, src=(UPat.var("a"), UPat.var("b"), UPat.var("c"))), lambda a, b, c: a * b + c))
    if Ops.NEG not in ops:
        rules.append((UPat(Ops.NEG, src=(UPat.var("a"),)), lambda a: a * -1))
    if Ops.TRUNC not in ops:
        rules.append((UPat(Ops.TRUNC, src=(UPat.var("a"),)), lambda a: a.cast(dtypes.int64).cast(a.dtype)))
    return PatternMatcher(rules)


def _max_by_select(a: UOp, b: UOp) -> UOp:
    """MAX as a select that propagates NaN from either side, as the native MAX of every backend does."""
    take_b = a < b
    if dtypes.is_float(a.dtype):
        take_b = take_b | b.ne(b)
    return take_b.where(b, a)


# ----- step 5b: contiguous global lanes become vector loads and stores -----
def _base_offset(idx: UOp) -> tuple[UOp | None, int]:
    """``idx`` as ``base + constant`` (base None for a constant index)."""
    if idx.op is Ops.CONST:
        return None, int(idx.arg)
    if idx.op is Ops.ADD:
        a, b = idx.src
        if b.op is Ops.CONST:
            return a, int(b.arg)
        if a.op is Ops.CONST:
            return b, int(a.arg)
    return idx, 0


def multiple_of(u: UOp | None, w: int) -> bool:
    """Whether integer expression ``u`` is a multiple of ``w`` for every value of its ranges (None: 0)."""
    if u is None:
        return True
    if u.op is Ops.CONST:
        return int(u.arg) % w == 0
    if u.op is Ops.ADD:
        return all(multiple_of(s, w) for s in u.src)
    if u.op is Ops.MUL:
        return any(multiple_of(s, w) for s in u.src)
    if u.op is Ops.CAST and dtypes.is_int(u.src[0].dtype):  # index casts of narrow_index keep the value
        return multiple_of(u.src[0], w)
    if u.op is Ops.SHL and u.src[1].op is Ops.CONST:
        return multiple_of(u.src[0], w) or (1 << int(u.src[1].arg)) % w == 0
    return False


def _vector_key(idx: UOp, dt: Any, ren: Renderer) -> tuple[Any, ...] | None:
    """What lanes must share to become one vector access: buffer, gate, base and dtype (None: stays scalar).
    Global buffers are aligned; local arrays where the renderer aligns them (``aligned_locals``)."""
    if idx.op is not Ops.INDEX or dt.count != 1 or dt.kind not in "iuf":
        return None
    buf = idx.src[0].src[0] if idx.src[0].op is Ops.AFTER else idx.src[0]
    if not (buf.op is Ops.DEFINE_GLOBAL or (buf.op in (Ops.DEFINE_LOCAL, Ops.DEFINE_REG) and ren.aligned_locals)):
        return None
    if dt.itemsize < 4:
        return None  # 16-bit floats and small ints have no vector type on every target
    base, _ = _base_offset(idx.src[1])
    return (idx.src[0], idx.src[2] if len(idx.src) == 3 else None, base, dt)


def _vector_runs(
    offsets: list[int], base: UOp | None, widths: tuple[int, ...], aligned: bool = True
) -> list[tuple[int, int]]:
    """(first offset, width) of each run of consecutive offsets (aligned ones unless ``aligned`` is False),
    widest first, greedily."""
    have, runs = set(offsets), []
    for c in sorted(have):
        if c not in have:
            continue
        for w in widths:
            if (not aligned or (c % w == 0 and multiple_of(base, w))) and all(c + k in have for k in range(w)):
                runs.append((c, w))
                have -= {c + k for k in range(w)}
                break
    return runs


def _vector_index(idx: UOp, base: UOp | None, first: int) -> UOp:
    off = UOp.const(idx.src[1].dtype, first)
    at = off if base is None else base if first == 0 else base + off
    return idx.replace(src=(idx.src[0], at, *idx.src[2:]))


def vectorize_memory(sink: UOp, ren: Renderer) -> UOp:
    """Global loads (and stores beside each other in one block) of ``width`` consecutive elements, the first at
    an index provably a multiple of ``width``, become one access of ``dtype.vec(width)``: a vector LOAD read
    lane by lane through GEP, a STORE of a VECTORIZE. Lanes with different gates (a masked tail) or an address
    not provably aligned stay scalar, so every vector access is aligned and reads only what the lanes read; on a
    renderer with ``unaligned_vectors`` any run of consecutive lanes is one access."""
    widths = tuple(w for w in ren.vector_widths if w > 1)
    if not widths:
        return sink
    load_groups: dict[tuple[Any, ...], dict[int, UOp]] = {}
    for u in sink.toposort():
        if u.op is Ops.LOAD and (key := _vector_key(u.src[0], u.dtype, ren)) is not None:
            load_groups.setdefault(key, {}).setdefault(_base_offset(u.src[0].src[1])[1], u)
    # lane load -> (run, lane); a run's vector load is built in the walk below from the rebuilt sources, so
    # a load ordered after other vectorized lanes (an accumulator read after its loop) sees the rebuilt loop
    lane_of: dict[UOp, tuple[int, int]] = {}
    runs: list[tuple[list[UOp], UOp | None, int, Any]] = []
    planned = {
        key: _vector_runs(list(by_off), key[2], tuple(x for x in widths if ren.vector_ok(key[3].vec(x))),
                          not ren.unaligned_vectors)
        for key, by_off in load_groups.items()
    }  # fmt: skip
    reg_widths = _register_widths(widths, [w for key, rs in planned.items() if not _in_registers(key) for _, w in rs])
    for key, by_off in load_groups.items():
        base, dt = key[2], key[3]
        ok = tuple(x for x in (reg_widths if _in_registers(key) else widths) if ren.vector_ok(dt.vec(x)))
        for first, w in _vector_runs(list(by_off), base, ok, not ren.unaligned_vectors):
            lanes = [by_off[first + k] for k in range(w)]
            lane_of.update({ld: (len(runs), k) for k, ld in enumerate(lanes)})
            runs.append((lanes, base, first, dt.vec(w)))
    users: dict[UOp, int] = {}
    for u in sink.toposort():
        for s in u.src:
            users[s] = users.get(s, 0) + 1
    memo: dict[UOp, UOp] = {}
    changed: dict[UOp, UOp] = {}
    vecs: dict[int, UOp] = {}
    for u in sink.toposort():
        if u in lane_of:
            n, k = lane_of[u]
            if n not in vecs:
                vecs[n] = _vector_load(u, *runs[n], memo, changed)
            new = memo[u] = changed[u] = UOp(Ops.GEP, u.dtype, (vecs[n],), (k,))
            continue
        new = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
        if u.op in (Ops.SINK, Ops.END):
            new = _vectorize_stores(new, ren, widths, {memo[s] for s in u.src if users.get(s, 0) > 1}, reg_widths)
        memo[u] = new
        if new is not u:
            changed[u] = new
    return memo[sink]


def _vector_load(
    lane: UOp, lanes: list[UOp], base: UOp | None, first: int, vdt: Any, memo: dict[UOp, UOp], changed: dict[UOp, UOp]
) -> UOp:
    """The vector LOAD of a run of ``lanes``, from the rebuilt sources of ``lane`` (one of them, the first seen):
    its buffer, gate and base are every lane's."""
    idx = lane.src[0]
    new_base = None if base is None else memo[base]
    src: tuple[UOp, ...] = (_vector_index(idx.replace(src=tuple(memo[s] for s in idx.src)), new_base, first),)
    if len(lane.src) == 2:
        alts = tuple(memo[a] if a in memo else a.substitute(changed) for a in (ld.src[1] for ld in lanes))
        src += (UOp(Ops.VECTORIZE, vdt, alts),)
    return UOp(Ops.LOAD, vdt, src)


def _in_registers(key: tuple[Any, ...]) -> bool:
    buf = key[0].src[0] if key[0].op is Ops.AFTER else key[0]
    return bool(buf.op is Ops.DEFINE_REG)


def _register_widths(widths: tuple[int, ...], memory: list[int]) -> tuple[int, ...]:
    """The widths of accumulator accesses: none wider than the kernel's widest vector access of memory, so an
    accumulator update stays one vector op (eight rows of float8 loads do not pair into float16 accumulators,
    whose lanes would then be added one by one)."""
    widest = max(memory, default=1)
    return widths if widest < 2 else tuple(w for w in widths if w <= widest)


def _vectorize_stores(
    block: UOp, ren: Renderer, widths: tuple[int, ...], shared: set[UOp], reg_widths: tuple[int, ...] | None = None
) -> UOp:
    """The STOREs among ``block``'s sources combined into vector stores where they line up (see above);
    accumulator stores at ``reg_widths``."""
    groups: dict[tuple[Any, ...], dict[int, UOp]] = {}
    for s in block.src:
        if s.op is Ops.STORE and s not in shared and (key := _vector_key(s.src[0], s.src[1].dtype, ren)) is not None:
            groups.setdefault(key, {}).setdefault(_base_offset(s.src[0].src[1])[1], s)
    replaced: dict[UOp, UOp | None] = {}
    for key, by_off in groups.items():
        base, dt = key[2], key[3]
        use = reg_widths if reg_widths is not None and _in_registers(key) else widths
        ok = tuple(x for x in use if ren.vector_ok(dt.vec(x)))
        for first, w in _vector_runs(list(by_off), base, ok, not ren.unaligned_vectors):
            lanes = [by_off[first + k] for k in range(w)]
            values = [st.src[1] for st in lanes]
            vec = _lanewise(dt.vec(w), values) if ren.vector_alu else None
            val = UOp(Ops.VECTORIZE, dt.vec(w), tuple(values)) if vec is None else vec
            replaced[lanes[0]] = UOp(Ops.STORE, dtypes.void, (_vector_index(lanes[0].src[0], base, first), val))
            replaced.update({st: None for st in lanes[1:]})
    if not replaced:
        return block
    src = tuple(n for s in block.src if (n := replaced.get(s, s)) is not None)
    return UOp(block.op, block.dtype, src, block.arg)


#: ALU ops a renderer with ``vector_alu`` computes on whole vectors, lane by lane
LANEWISE_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC, Ops.NEG})


def _lanewise(vdt: Any, lanes: list[UOp], memo: dict[tuple[UOp, ...], UOp | None] | None = None) -> UOp | None:
    """The values of a vector store computed as one vector expression, or None where some lane differs: lane ``k``
    of a vector ``x`` (``GEP(x, k)``), one scalar in every lane (broadcast), or the same ALU op of such lanes. An
    accumulator update ``acc[k] + row[k]`` then stays a vector add, not eight scalar adds the C compiler must
    put together again (which clang does not do for several rows of accumulators at once). ``memo`` holds the
    answer for each tuple of lanes already seen, so shared subexpressions are visited once."""
    memo = {} if memo is None else memo
    key = tuple(lanes)
    if key in memo:
        return memo[key]
    head = lanes[0]
    out: UOp | None = None
    if all(u is head for u in lanes) and head.dtype.count == 1 and head.dtype == vdt.scalar():
        out = UOp(Ops.VECTORIZE, vdt, key)
    elif head.op is Ops.GEP and head.src[0].dtype == vdt:
        vec = head.src[0]
        out = vec if all(u.op is Ops.GEP and u.src[0] is vec and u.arg == (k,) for k, u in enumerate(lanes)) else None
    elif (
        head.op in LANEWISE_OPS
        and head.dtype == vdt.scalar()
        and all(u.op is head.op and u.dtype == head.dtype and len(u.src) == len(head.src) for u in lanes)
    ):
        srcs = [_lanewise(vdt, [u.src[j] for u in lanes], memo) for j in range(len(head.src))]
        out = None if any(x is None for x in srcs) else UOp(head.op, vdt, tuple(x for x in srcs if x is not None))
    memo[key] = out
    return out


# ----- step 7: integer division that cannot trap (after the index dtypes of step 6) -----
def _divisor_ok(d: UOp, zero: bool, neg1: bool) -> UOp:
    """The lanes where ``d`` divides as C does: not 0 (when ``zero``), not -1 (when ``neg1``)."""
    nz, n1 = d.ne(0), d.ne(-1)
    return (nz & n1) if zero and neg1 else nz if zero else n1


def _guard_division(ctx: frozenset[Ops], x: UOp, a: UOp, b: UOp) -> UOp | None:
    """Integer IDIV/MOD whose divisor's value range holds 0 (or -1 with INT_MIN in the dividend's): C traps
    there (SIGFPE on x86), so those lanes divide by 1 and take the ALU table's answer (0, or -a for IDIV by
    -1). Divisors whose range excludes both stay a plain division."""
    dt = x.dtype.scalar()
    if dt.kind not in "iu":
        return None
    if b.op is Ops.WHERE and b.src[2].op is Ops.CONST and b.src[2].arg == 1:
        d = b.src[1]
        if any(b.src[0] is _divisor_ok(d, z, n) for z, n in ((True, False), (False, True), (True, True))):
            return None  # already guarded
    lo, hi = b._range()
    zero = lo <= 0 <= hi
    neg1 = dt.kind == "i" and lo <= -1 <= hi and a.vmin == dtypes.min(dt)
    if not zero and not neg1:
        return None
    safe = _divisor_ok(b, zero, neg1).where(b, b.const_like(1))
    out = UOp(x.op, x.dtype, (a, safe))
    if x.op is Ops.MOD:
        return out  # x MOD 1 == 0: both fixed answers
    if zero:
        out = b.ne(0).where(out, out.const_like(0))
    if neg1:
        out = b.ne(-1).where(out, UOp(Ops.NEG, x.dtype, (a,)) if Ops.NEG in ctx else a * -1)
    return out


pm_guard_division = PatternMatcher(
    [(UPat((Ops.IDIV, Ops.MOD), src=(UPat.var("a"), UPat.var("b")), name="x"), _guard_division)]
)


@functools.cache
def _final_matcher(supported_ops: frozenset[Ops], extra: PatternMatcher | None) -> PatternMatcher:
    """The last lowering pass for one kind of renderer, assembled once (not per kernel)."""
    pm = symbolic + pm_fold_gates + decompositions(supported_ops)
    return pm if extra is None else pm + extra


def _check_dtypes(sink: UOp, ren: Renderer) -> None:
    if not ren.unsupported_dtypes:
        return
    for u in sink.toposort():
        base = u.dtype.base if hasattr(u.dtype, "base") and u.dtype.base is not None else u.dtype
        if base.scalar() in ren.unsupported_dtypes:
            raise LoweringError(
                f"dtype {base.scalar().name} is not supported by the {ren.device} renderer "
                f"({type(ren).__name__}); cast to float32 or use another device"
            )


# ----- step 6: index dtypes -----
_I32 = dtypes.int32
_I32_MIN, _I32_MAX = int(dtypes.min(_I32)), int(dtypes.max(_I32))
# ops whose int32 form gives the int64 answer whenever every value involved fits int32
_NARROWABLE = frozenset(
    {Ops.CONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL, Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX}
    | {Ops.NEG, Ops.WHERE}
)
# sources that are ordering edges, not values: never widened back
_VALUE_SRCS: dict[Ops, slice] = {
    Ops.RANGE: slice(0, 1),
    Ops.SPECIAL: slice(0, 1),
    Ops.AFTER: slice(0, 0),
    Ops.END: slice(0, 0),
    Ops.SINK: slice(0, 0),
}


def _fits_int32(u: UOp) -> bool:
    lo, hi = u.vmin, u.vmax
    return isinstance(lo, int) and isinstance(hi, int) and _I32_MIN <= lo and hi <= _I32_MAX


def narrow_index(sink: UOp) -> UOp:
    """Index arithmetic is built in ``dtypes.index`` (int64) so no size or offset can wrap; this computes
    each such node in int32 instead wherever its value range and its sources' ranges fit int32, which
    gives the same value (no intermediate can overflow) and is faster on GPUs. A narrowed value read
    where the wide one is needed (a wide ALU, a store, a comparison with a wide side) is cast back; an
    INDEX takes either width. Kernel variables are int32 arguments, so one whose range does not fit is
    an error here."""
    wide = dtypes.index
    memo: dict[UOp, UOp] = {}
    narrowed: set[UOp] = set()  # original nodes whose memo entry is the int32 form

    def widen(s: UOp) -> UOp:
        if s not in narrowed:
            return memo[s]
        return s if s.op is Ops.CONST else memo[s].cast(wide)

    for u in sink.toposort():
        src, op, dt = u.src, u.op, u.dtype
        srcs = tuple([memo[s] for s in src])
        if op in _NARROWABLE and (dt is wide or (dt.itemsize == 8 and dt == wide)):
            if _fits_int32(u):
                vals = src[:1] if op is Ops.RANGE or op is Ops.SPECIAL else src[1:] if op is Ops.WHERE else src
                if narrowed.issuperset(vals):
                    memo[u] = UOp(op, _I32, srcs, u.arg)
                    narrowed.add(u)
                    continue
            elif op is Ops.DEFINE_VAR:
                name, lo, hi = u.arg
                raise LoweringError(
                    f"variable {name!r} has range [{lo}, {hi}], beyond the int32 kernel arguments; "
                    f"declare it with a range inside [{_I32_MIN}, {_I32_MAX}]"
                )
        if narrowed.isdisjoint(src):
            memo[u] = u if srcs == src else UOp(op, dt, srcs, u.arg)
            continue
        if op is Ops.CAST:  # its one source is narrowed: cast from the int32 form (the same value)
            memo[u] = srcs[0] if dt == _I32 else srcs[0].cast(dt)
            continue
        if op in GroupOp.Comparison and narrowed.issuperset(src):
            memo[u] = UOp(op, dt, srcs, u.arg)
            continue
        keep = _VALUE_SRCS.get(op, slice(0, len(srcs)))
        new = [
            widen(s) if keep.start <= i < keep.stop and not (op is Ops.INDEX and i == 1) else srcs[i]
            for i, s in enumerate(src)
        ]
        memo[u] = UOp(op, dt, tuple(new), u.arg)
    return memo[sink]


def keep_all_params(params: list[UOp], sink: UOp) -> UOp:
    """Every buffer slot of the AST stays a kernel parameter, even when simplification removed its last
    use (``x * 0`` on ints, ``x - x``): callers pass one buffer per slot, in slot order, so a dropped
    parameter would shift every later buffer onto the wrong argument."""
    have = {u for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL}
    lost = sorted((u for u in params if u not in have), key=lambda u: u.arg)
    return UOp.sink(*sink.src, *lost, arg=sink.arg) if lost else sink


# ----- the lowering, pass by pass -----
@dataclass
class LowerContext:
    """What the passes of one kernel share: the target, the opts, and what earlier passes found."""

    ren: Renderer
    opts: list[Opt] = field(default_factory=list)
    ast: UOp | None = None  # the kernel AST the passes started from
    name: str = ""  # the kernel's name, from the AST (see ``kernel_name``)
    params: list[UOp] = field(default_factory=list)  # the AST's buffers, every one a parameter
    dims: LaunchDims = field(default_factory=LaunchDims)
    loops: list[UOp] = field(default_factory=list)  # the loops around the body, outermost first
    compiler: Any = None  # a ``Compiler`` for the PROGRAM passes (see ``codegen.pipeline``)
    trace: list[tuple[str, int]] | None = None  # (pass, nodes after it) when asked for


def kernel_name(ast: UOp) -> str:
    """``E_4_8`` / ``r_4_16``: elementwise or reduce, then the sizes of the AST's loops (``n``: symbolic)."""
    ranges = sorted(ast.ranges, key=lambda r: r.arg[0])
    kind = "r" if any(r.arg[1] is AxisType.REDUCE for r in ranges) else "E"
    dims = [str(r.src[0].arg) if r.src[0].op is Ops.CONST else "n" for r in ranges]
    return "_".join([kind, *dims]) if dims else kind


def check_ast(ast: UOp, ctx: LowerContext) -> UOp:
    """The AST is well formed and its dtypes are the target's; its name and buffers are noted."""
    verify(ast, "ast")
    _check_dtypes(ast, ctx.ren)
    ctx.ast, ctx.name = ast, kernel_name(ast)
    ctx.params = [u for u in ast.toposort() if u.op is Ops.DEFINE_GLOBAL]
    return ast


def opts_pass(ast: UOp, ctx: LowerContext) -> UOp:
    """The kernel opts; padded reads become gated loads first, so an opt's mask joins the gate instead of hiding it."""
    if not ctx.opts and row_loop(ast) is None:
        return ast
    return apply_opts(graph_rewrite(ast, pm_gate_loads), ctx.opts, ctx.ren)


def axes_pass(ast: UOp, ctx: LowerContext) -> UOp:
    sink, ctx.dims, ctx.loops = lower_axes(ast, ctx.ren)
    return sink


def packs_pass(sink: UOp, ctx: LowerContext) -> UOp:
    sink, ctx.loops = lower_packs(sink, ctx.loops, ctx.ren)
    return sink


def check_lowered(sink: UOp, ctx: LowerContext) -> UOp:
    verify_own(sink, "lowered")
    return sink


Pass = Callable[[UOp, LowerContext], UOp]

#: kernel AST -> low-level SINK, in order; each pass a function of one graph to one graph
LOWERING: list[tuple[str, Pass]] = [
    ("check_ast", check_ast),
    ("stash", lambda ast, ctx: stash_row_values(ast, ctx.ren, ctx.opts)),
    ("opts", opts_pass),
    ("tidy", lambda ast, ctx: graph_rewrite(ast, _tidy_matcher())),
    ("groups", lambda ast, ctx: lower_groups(ast, ctx.ren)),
    ("axes", axes_pass),
    ("packs", packs_pass),
    ("reduces", lambda sink, ctx: lower_reduces(sink, ctx.loops)),
    ("inner", lambda sink, ctx: lower_inner(sink, ctx.loops)),
    ("close_loops", lambda sink, ctx: close_loops(sink, ctx.loops)),
    ("decompose", lambda sink, ctx: graph_rewrite(sink, _final_matcher(ctx.ren.supported_ops, ctx.ren.extra_matcher))),
    ("vectorize", lambda sink, ctx: vectorize_memory(sink, ctx.ren)),
    ("narrow_index", lambda sink, ctx: narrow_index(sink)),
    ("guard_division", lambda sink, ctx: graph_rewrite(sink, pm_guard_division, ctx=ctx.ren.supported_ops)),
    ("keep_params", lambda sink, ctx: keep_all_params(ctx.params, sink)),
    ("check_lowered", check_lowered),
]


def debug_level() -> int:
    """``UOPS_DEBUG``: 3 names each pass of every kernel's lowering with the graph's size after it, 4 adds the graph."""
    try:
        return int(os.environ.get("UOPS_DEBUG", "0") or 0)
    except ValueError:
        return 0


def run_passes(sink: UOp, ctx: LowerContext, passes: list[tuple[str, Pass]]) -> UOp:
    """The one driver: each pass in order on the graph the last one returned, recorded in ``ctx.trace`` when it is
    a list, and printed with ``UOPS_DEBUG`` >= 3."""
    level = debug_level()
    for name, fn in passes:
        sink = fn(sink, ctx)
        if ctx.trace is not None or level >= 3:
            size = len(sink.toposort())
            if ctx.trace is not None:
                ctx.trace.append((name, size))
            if level >= 3:
                print(f"{ctx.name or 'kernel'}: {name:<16} {size} nodes", file=sys.stderr)
                if level >= 4:
                    print(sink.pretty(), file=sys.stderr)
    return sink


def full_rewrite_to_sink(ast: UOp, ren: Renderer, opts: list[Opt] | None = None) -> tuple[UOp, LaunchDims]:
    """Kernel AST -> low-level SINK for ``ren``, plus the launch dimensions it needs (the passes of ``LOWERING``)."""
    ctx = LowerContext(ren, list(opts or []))
    return run_passes(ast, ctx, LOWERING), ctx.dims
