"""In-place writes: a value stored into (a view of) an existing buffer, seen by every tensor viewing it.

Why eager: a write runs when it is made, so program order is the order of the writes and reads of
one buffer (read-after-write and write-after-write need nothing more). A lazy computation built
before a write keeps the value it was built from, as in numpy (write-after-read): if one is still
pending when its buffer is written, the buffer is first copied to a snapshot and that computation
reads the snapshot instead. The right side of a write is evaluated before it lands: computed
straight into the buffer when every element reads only the element it replaces, else into a
temporary first.

A view of a realized tensor (basic indexing, reshape, permute...) aliases its buffer: it sees later
writes and can be written through. A view of a lazy tensor is a lazy value: it keeps the old value.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .realize import _buffers, get_buffer, realize, run_schedule
from .schedule import _build_schedule, apply_rebased, buffer_view, new_buffer, realized, rebased
from .view import ShapeTracker

#: BUFFER node -> the lazy nodes built with one of its views as a direct source (the readers a write may disturb)
_readers: weakref.WeakKeyDictionary[UOp, weakref.WeakSet[UOp]] = weakref.WeakKeyDictionary()
#: BUFFER nodes some Tensor was given by realize(); a second Tensor realized onto one gets its own copy
_bound: weakref.WeakSet[UOp] = weakref.WeakSet()
#: BUFFER node -> the name a later write gave the same memory (`renamed`); follow the chain for the latest
_renamed: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


class InplaceError(UopsError, ValueError):
    """A write that cannot be done in place (a broadcast or padded view, another device)."""


def buffer_of(u: UOp) -> UOp | None:
    """The BUFFER a node is a view of, or None for a computed value."""
    if u.op is Ops.BUFFER:
        return u
    if u.op is Ops.VIEW and u.src[0].op is Ops.BUFFER:
        return u.src[0]
    return None


def current(u: UOp) -> UOp:
    """``u`` reading each buffer by the latest name of its memory, recorded as a reader of it (every node a
    Tensor makes comes here).

    Why: a view made before a write (``b = a.reshape(...)``) still names the memory by the name it had then.
    A node built from it after the write would be, hash-consed, the very node a reader pending at the write
    was, and that one reads the snapshot of the old value."""
    if u.op is Ops.VIEW:
        return u
    if _renamed:
        src = tuple(_by_latest_name(s) for s in u.src)
        if any(a is not b for a, b in zip(src, u.src)):
            u = u.replace(src=src)
    note_reader(u)
    return u


def _latest(b: UOp) -> UOp:
    while (n := _renamed.get(b)) is not None:
        b = n
    return b


def _by_latest_name(s: UOp) -> UOp:
    b = buffer_of(s)
    if b is None or b not in _renamed:
        return s
    fresh = _latest(b)
    return fresh if s is b else s.replace(src=(fresh, *s.src[1:]))


def note_reader(u: UOp) -> None:
    """Record ``u`` as a reader of the buffers it views directly."""
    if u.op is Ops.VIEW:
        return
    for s in u.src:
        b = buffer_of(s)
        if b is not None:
            ws = _readers.get(b)
            if ws is None:
                ws = _readers[b] = weakref.WeakSet()
            ws.add(u)


def writable(st: ShapeTracker) -> bool:
    """Whether every element of the view is its own memory location (no broadcast, no padding)."""
    return all(v.mask is None and all(st_ != 0 or s <= 1 for s, st_ in zip(v.shape, v.strides)) for v in st.views)


def own(old: UOp, new: UOp, device: str) -> UOp:
    """The value ``new`` (a view of a buffer realize() produced for ``old``) as a buffer of one Tensor's own.

    Why: equal lazy graphs are one node, so two Tensors realized from them would share a buffer and a
    write through one would change the other."""
    b = buffer_of(new)
    if b is None or buffer_of(old) is not None:
        return new
    if b in _bound:
        (new,) = realize([UOp(Ops.CONTIGUOUS, new.dtype, (new,))], device)
        b = buffer_of(new)
        assert b is not None
    _bound.add(b)
    return new


def renamed(u: UOp) -> UOp:
    """``u`` (a view of a buffer just written) over a new BUFFER node naming the same memory.

    Why: nodes are hash-consed, so a graph built after a write would be the very node a reader pending at
    the write was (rebased onto the snapshot, or realized, with the old value). The written tensor takes
    a new name for its memory, and what is built from it afterwards is a new graph reading the new value."""
    b = buffer_of(u)
    if b is None:
        raise InplaceError("internal: only a view of a buffer can be renamed")
    fresh = new_buffer(b.arg[0], b.arg[1], b.dtype)
    _buffers[fresh] = get_buffer(b)
    ws = _readers.get(b)
    if ws is None:
        ws = _readers[b] = weakref.WeakSet()
    _readers[fresh] = ws  # one set of readers per memory, whichever name they read it by
    if b in _bound:
        _bound.add(fresh)
    _renamed[_latest(b)] = fresh  # every older name of this memory now leads here
    return fresh if u is b else u.replace(src=(fresh, *u.src[1:]))


def _graph(value: UOp) -> list[UOp]:
    return value.toposort(gate=lambda x: x not in realized and buffer_of(x) is None)


def _edges(order: list[UOp]) -> tuple[list[int], list[list[int]]]:
    """Per node of ``order``: how often nodes of ``order`` use it, and which ones (positions, no references)."""
    pos = {id(n): i for i, n in enumerate(order)}
    uses = [0] * len(order)
    users: list[list[int]] = [[] for _ in order]
    for i, n in enumerate(order):
        for s in n.src:
            j = pos.get(id(s))
            if j is not None:
                uses[j] += 1
                users[j].append(i)
    return uses, users


def _private(order: list[UOp], value: UOp) -> list[bool]:
    """Which nodes of the value graph nothing outside it can reach (so they need no snapshot: they are
    evaluated by this write, before it lands). Counted references decide: any reference not from the
    graph (a Tensor, another graph, a cache) makes a node and everything below it shared."""
    uses, users = _edges(order)
    probe = [UOp(Ops.SINK, value.dtype, (), object())]  # a node referenced by one list only
    base = sys.getrefcount(probe[0])
    private = [False] * len(order)
    for j in reversed(range(len(order))):  # users before the nodes they use
        if order[j] is value:
            private[j] = True
        elif users[j] and all(private[i] for i in users[j]) and sys.getrefcount(order[j]) == base + uses[j]:
            private[j] = True
    return private


def _same_memory(u: UOp, b: UOp) -> bool:
    """Whether ``u`` views the memory of BUFFER ``b`` (under ``b``'s name or another one `renamed` gave it)."""
    x = buffer_of(u)
    if x is None:
        return False
    if x is b:
        return True
    mem = _buffers.get(b)
    return mem is not None and _buffers.get(x) is mem


def _reads(order: list[UOp], b: UOp) -> bool:
    for n in order:
        if _same_memory(n, b) or (n in realized and _same_memory(realized[n], b)):
            return True
    return False


def _snapshot(b: UOp, device: str, keep: set[int]) -> None:
    """Copy ``b`` aside for the lazy nodes still to read its old contents (except those with ids in ``keep``)."""
    readers = []
    for r in list(_readers.get(b, ())):
        cur = rebased.get(r, r)
        if id(r) in keep or r in realized or cur in realized:
            continue
        if any(_same_memory(s, b) for s in cur.src):
            readers.append((r, cur))
    held = [(k, v) for k, v in list(realized.items()) if _same_memory(v, b) and id(k) not in keep]
    if not readers and not held:
        return
    (snap,) = realize([UOp(Ops.CONTIGUOUS, b.dtype, (buffer_view(b, (b.arg[1],)),))], device)
    old = snap.src[0]

    def swap(s: UOp) -> UOp:
        if s.op is Ops.BUFFER:
            return old if _same_memory(s, b) else s
        return UOp(Ops.VIEW, s.dtype, (old,), s.arg) if _same_memory(s, b) else s

    for r, cur in readers:
        new = cur.replace(src=tuple(swap(s) for s in cur.src))
        rebased[r] = new
        note_reader(new)
    for k, v in held:
        realized[k] = swap(v)


def _same_place(ast: UOp) -> bool:
    """Whether every load of the written buffer (slot 0) reads exactly the element its thread stores."""
    stores = [u for u in ast.toposort() if u.op is Ops.STORE]
    targets = {s.src[0].src[1] for s in stores}
    for u in ast.toposort():
        if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL and u.src[0].arg == 0:
            if u.src[1] not in targets or len(targets) != 1:
                return False
    return True


def write(target: UOp, value: UOp, device: str) -> None:
    """Store ``value`` (shape and dtype of ``target``, a writable view of a buffer) into that buffer, now."""
    b = buffer_of(target)
    if b is None:
        raise InplaceError("internal: an in-place write needs a view of a buffer as its target")
    st: ShapeTracker = target.arg if target.op is Ops.VIEW else ShapeTracker.from_shape((b.arg[1],))
    if not writable(st):
        raise InplaceError(
            f"cannot write in place into a broadcast or padded view of shape {st.shape}: several elements "
            "share one memory location or have none; write into .contiguous() instead"
        )
    if value is target or st.size == 0:
        return
    order = _graph(value)
    reads_target = _reads(order, b)
    private = _private(order, value) if reads_target else []
    keep = {id(n) for n, p in zip(order, private) if p}
    del order, private
    _snapshot(b, device, keep)
    v = apply_rebased([value])[0] if rebased else value
    sched = _write_schedule(v, b, st, device)
    if sched is None:  # elements read others the write replaces: the whole right side first
        (tmp,) = realize([UOp(Ops.CONTIGUOUS, v.dtype, (v,))], device)
        sched = _write_schedule(tmp, b, st, device)
        assert sched is not None
    run_schedule(sched)
    if reads_target and buffer_of(value) is None:  # its holders see what was written, not a recomputation
        realized[value] = UOp(Ops.VIEW, value.dtype, (b,), st)


def _write_schedule(v: UOp, b: UOp, st: ShapeTracker, device: str) -> Any:
    root = v if v.op is Ops.CONTIGUOUS else UOp(Ops.CONTIGUOUS, v.dtype, (v,))
    sched, _ = _build_schedule([root], device, into=(b, st))
    last = sched.items[-1]
    if last.ast is None or last.bufs[0] is not b:
        raise InplaceError("internal: the in-place write did not end in a kernel storing into its buffer")
    if not _same_place(last.ast):
        return None
    sched.done = {n: u for n, u in sched.done.items() if buffer_of(u) is not b}
    return sched
