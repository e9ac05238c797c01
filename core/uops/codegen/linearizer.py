"""Linearizer: a lowered SINK becomes one valid order of uops.

Each node sits inside the RANGEs it depends on (see ``open_ranges``). The order keeps a
stack of open loops and emits, in this preference: a ready node that belongs to the
innermost open loop (or to no loop when none is open), then a ready RANGE nested exactly in
the current loops, then the END of the innermost loop. So definitions precede uses, loops
nest properly, loop-invariant work stays outside inner loops, and nothing that depends on a
loop is hoisted out of it.
"""

from __future__ import annotations

import heapq

from uops.codegen.lowerer import open_ranges
from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp


class LinearizeError(UopsError, RuntimeError):
    """The lowered graph has no valid order (a bug in a lowering pass)."""


def linearize(sink: UOp) -> list[UOp]:
    order = sink.toposort()
    prio = {u: i for i, u in enumerate(order)}
    rctx = open_ranges(sink)
    users: dict[UOp, list[UOp]] = {u: [] for u in order}
    missing: dict[UOp, int] = {}
    for u in order:
        uniq = set(u.src)
        missing[u] = len(uniq)
        for s in uniq:
            users[s].append(u)
    ready: list[tuple[int, UOp]] = [(prio[u], u) for u in order if missing[u] == 0]
    heapq.heapify(ready)
    out: list[UOp] = []
    stack: list[UOp] = []

    def placeable(u: UOp) -> bool:
        if u.op is Ops.SINK:
            return not stack
        if u.op is Ops.RANGE:
            return rctx[u] - {u} == set(stack)
        if u.op is Ops.END:
            return bool(stack) and u.src[-1] is stack[-1]
        need = rctx[u]
        return need <= set(stack) and (not stack or stack[-1] in need or not need and not _is_stmt(u))

    while ready:
        choice = None
        # 1) plain nodes of the current block, 2) open a loop, 3) close the innermost loop
        for want in ("plain", "range", "end"):
            for p, u in sorted(ready):
                kind = "range" if u.op is Ops.RANGE else "end" if u.op is Ops.END else "plain"
                if kind == want and placeable(u):
                    choice = (p, u)
                    break
            if choice is not None:
                break
        if choice is None:
            stuck = ", ".join(f"{u.op.name}#{p}" for p, u in sorted(ready)[:8])
            raise LinearizeError(f"no valid order: open loops {[r.arg for r in stack]}, waiting: {stuck}")
        ready.remove(choice)
        heapq.heapify(ready)
        u = choice[1]
        if u.op is Ops.RANGE:
            stack.append(u)
        elif u.op is Ops.END:
            stack.pop()
        if u.op is not Ops.SINK:
            out.append(u)
        for v in users[u]:
            missing[v] -= 1
            if missing[v] == 0:
                heapq.heappush(ready, (prio[v], v))
    if stack:
        raise LinearizeError(f"loops left open: {[r.arg for r in stack]}")
    return out


def _is_stmt(u: UOp) -> bool:
    """Statements with effects must run exactly where their loops say, never repeated inside others."""
    return u.op in (Ops.STORE, Ops.BARRIER)
