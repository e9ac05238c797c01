"""Row kernels that compute one value twice: keep it in the output instead.

A softmax fused into one kernel per row sums ``exp(x - max)`` over the row and then stores ``exp(x - max) / sum``:
the same exponential in two passes, the costliest part of the kernel. Here the summing pass stores each value into
the output element it will become, and the last pass reads it back from there (the row is in cache) instead of
computing it again. What the kernel computes is unchanged: each stored value is overwritten by the result made from
it, and only the kernel reads it in between.

It applies where the output's row is one loop after the row's reductions (an INNER over the whole axis, first in
the opts, or the fused row's own ``row_loop``): as a plain output axis every element would redo the reductions, and a
later element's summing pass would overwrite the finished earlier ones. It applies to CPU-style renderers (a row is a
loop in one thread; on a GPU-style one the reduction's threads would need a barrier before the output reads another
thread's element), to a value with a transcendental or a division in it (cheaper ones cost less to compute again
than to store and load), and to an output buffer the kernel reads nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from uops.codegen.opt import Opt, OptOps, output_axes, with_row_loop
from uops.dtypes import PtrDType
from uops.ir.ops import Ops
from uops.ir.uop import UOp
from uops.renderer import Renderer

#: ops that make a value worth storing once rather than computing twice
COSTLY_OPS = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.FDIV, Ops.POW})


def stash_row_values(ast: UOp, ren: Renderer, opts: Sequence[Opt] = ()) -> UOp:
    """``ast`` with every store whose value computes a reduction's summand again reading it back (see the module);
    ``opts`` the kernel's, which say whether the output's row is a loop after the reductions."""
    if ren.global_max is not None or (row := _row_axis(ast, opts)) is None:
        return ast
    topo = ast.toposort()
    mapping = {st: new for st in ast.src if st.op is Ops.STORE and (new := _stashed(st, topo, row)) is not None}
    return ast.substitute(mapping) if mapping else ast


def _row_axis(ast: UOp, opts: Sequence[Opt]) -> UOp | None:
    """The output range the opts make a loop after the row's reductions, whole, or None: their only INNER, first."""
    applied = with_row_loop(ast, opts)
    inner = [o for o in applied if o.op is OptOps.INNER]
    if len(inner) != 1 or applied[0] is not inner[0]:
        return None
    outs = output_axes(ast)
    if inner[0].axis >= len(outs):
        return None
    r = outs[inner[0].axis]
    return r if r.src[0].op is Ops.CONST and int(r.src[0].arg) == inner[0].amount else None


def _stashed(store: UOp, topo: list[UOp], j: UOp) -> UOp | None:
    idx, value = store.src
    if len(idx.src) != 2 or idx.src[0].op is not Ops.DEFINE_GLOBAL:
        return None
    buf, at = idx.src
    if not isinstance(buf.dtype, PtrDType) or any(u.op is Ops.INDEX and u.src[0] is buf and u is not idx for u in topo):
        return None  # a buffer the kernel also reads or writes elsewhere
    nodes = value.toposort()
    inside = set(nodes)
    if j not in at.ranges:
        return None
    for red in nodes:
        if red.op is not Ops.REDUCE or len(red.src) != 2 or red.src[1].op is not Ops.RANGE:
            continue
        summand, r = red.src
        if j.src[0] is not r.src[0] or summand.dtype != buf.dtype.base:
            continue  # another length, or a value the buffer's dtype would round
        if not any(u.op in COSTLY_OPS for u in summand.toposort()):
            continue
        again = summand.substitute({r: j})
        at_r = at.substitute({j: r})
        if again not in inside or _open_ranges(summand) - {r} != set(at_r.ranges) - {r}:
            continue
        keep = buf.index(at_r).store(summand)
        new_red = UOp(Ops.REDUCE, red.dtype, (UOp(Ops.AFTER, buf.dtype, (buf, keep)).index(at_r).load(), r), red.arg)
        back = UOp(Ops.AFTER, buf.dtype, (buf, new_red)).index(at).load()
        return idx.store(value.substitute({red: new_red, again: back}))
    return None


def _open_ranges(u: UOp) -> set[UOp]:
    """The ranges ``u`` depends on outside the reductions inside it (a softmax summand's row, not its max's loop)."""
    nodes = u.toposort()
    return {r for r in nodes if r.op is Ops.RANGE} - {r for x in nodes if x.op is Ops.REDUCE for r in x.src[1:]}
