"""Kernel optimizations: each ``Opt`` rewrites the ranges of a kernel AST before lowering.

An opt splits one axis in two: ``r -> outer * amount + part`` (``part`` inner) or, for THREAD and
GROUPTOP, ``r -> part * ceil(N / amount) + outer`` (``part`` outer, so each thread owns one
contiguous chunk). The outer piece keeps the axis id and kind, so axis numbers stay stable as opts
compose; ``part`` gets a fresh id and the opt's kind. When ``amount`` does not divide the size the
split is masked, so odd sizes are never wrong: along a reduce axis, reads are gated by ``r < N`` and values
outside it contribute the identity; along an output axis only the stores are gated and the reads wrap around
(``r % N``) (nothing is gated inside the tile's loops), and a masked UPCAST of an output axis in
``apply_opts`` overlaps its last tile with the one before it (nothing gated at all) unless the kernel is BLOCKed
or reads a buffer it writes.

After the splits, ``expand`` removes the register axes: an UPCAST axis becomes one STORE per lane,
an UNROLL axis becomes one partial reduction per lane (separate accumulators, combined after the
loop). The lowering then shares one loop between the reductions over the same ranges, which is what
register tiling needs. An INNER axis stays a loop, but one the lowering puts inside the reduction
loops, with one accumulator per element in an array (UNROLL lanes are added up before it): a
reduction over a strided axis (a sum over axis 0) then reads whole contiguous rows per pass instead
of one cache line per row. LOCAL and GROUP axes become workgroup indices (GPU-style renderers); a
GROUP reduction combines its partials through local memory (see ``lower_groups`` in the lowerer).
THREAD axes become the core index of CPU kernels.

BLOCK splits a reduce axis into blocks whose loop goes around the output loops; each block adds its
partial sums to the output (see ``block_reduce``).

PACK stages what one input's load reads inside the reductions into a kernel-local buffer (DEFINE_LOCAL),
copied once per iteration of the loops the load depends on and read by every loop nested inside them
that it does not depend on (see ``pack_input``): a matmul's strip of B, rows a power of two apart in
memory, becomes one contiguous panel that stays in L1 while every row tile passes over it.

Axis numbers: UPCAST, INNER, LOCAL and THREAD take the index of an output axis (GLOBAL ranges by id);
UNROLL, GROUP, GROUPTOP and BLOCK the index of a reduce axis (REDUCE ranges by id); PACK the index of an
input read inside a reduction (``packable_inputs``, by slot) and comes after every other opt.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from uops.dtypes import AddrSpace, dtypes
from uops.errors import UopsError
from uops.ir.ops import AxisType, Ops
from uops.ir.uop import UOp
from uops.renderer import Renderer


class OptOps(Enum):
    UPCAST = auto()  # output axis into registers (one store per lane)
    UNROLL = auto()  # reduce axis into separate accumulators
    LOCAL = auto()  # output axis into the workgroup (GPU-style)
    GROUP = auto()  # reduce axis across workgroup threads, interleaved (GPU-style)
    GROUPTOP = auto()  # reduce axis across workgroup threads, one contiguous chunk each (GPU-style)
    THREAD = auto()  # output axis across CPU cores, one contiguous chunk each
    SWAP = auto()  # exchange the loop positions of two output axes (amount: the other axis)
    INNER = auto()  # output axis as a loop inside the reductions, one accumulator per element
    BLOCK = auto()  # reduce axis in blocks of ``amount``: a loop over blocks around the output loops
    PACK = auto()  # input ``axis`` (by slot order) read inside the reductions through a kernel-local copy


class OptError(UopsError, ValueError):
    """An opt that does not fit this kernel or target; the message says why (search skips it)."""


@dataclass(frozen=True)
class Opt:
    op: OptOps
    axis: int
    amount: int

    def __repr__(self) -> str:
        return f"Opt({self.op.name}, {self.axis}, {self.amount})"

    def to_data(self) -> list[Any]:
        return [self.op.name, self.axis, self.amount]

    @staticmethod
    def from_data(d: list[Any]) -> Opt:
        return Opt(OptOps[d[0]], int(d[1]), int(d[2]))


_OUTPUT_OPS = (OptOps.UPCAST, OptOps.LOCAL, OptOps.THREAD, OptOps.SWAP, OptOps.INNER)
_KIND = {
    OptOps.UPCAST: AxisType.UPCAST,
    OptOps.UNROLL: AxisType.UNROLL,
    OptOps.LOCAL: AxisType.LOCAL,
    OptOps.GROUP: AxisType.GROUP_REDUCE,
    OptOps.GROUPTOP: AxisType.GROUP_REDUCE,
    OptOps.THREAD: AxisType.THREAD,
    OptOps.INNER: AxisType.INNER,
}
#: the most lanes UPCAST (and UNROLL) may make: beyond it the kernel is all registers and spills
MAX_LANES = 256
#: the most accumulators an INNER loop may keep (all reductions and lanes together): 32 KiB of float32
MAX_INNER_ACCS = 8192
#: the largest PACK buffer on a renderer that declares no local memory (a CPU kernel's stack array)
MAX_PACK_BYTES = 512 * 1024
#: workgroup limits for GPU-style renderers that declare none (the PYTHON interpreter)
_DEFAULT_LOCAL_MAX = (1024, 1024, 64)
_DEFAULT_LOCAL_THREADS = 1024


def axes_of(ast: UOp, kind: AxisType) -> list[UOp]:
    """The ranges of one kind, by axis id."""
    return sorted({u for u in ast.toposort() if u.op is Ops.RANGE and u.arg[1] is kind}, key=lambda r: r.arg[0])


def output_axes(ast: UOp) -> list[UOp]:
    return axes_of(ast, AxisType.GLOBAL)


def reduce_axes(ast: UOp) -> list[UOp]:
    return axes_of(ast, AxisType.REDUCE)


def identity(op: Ops, dt: Any) -> UOp:
    """The value that leaves a reduction unchanged."""
    if op is Ops.ADD:
        return UOp.const(dt, 0)
    if op is Ops.MUL:
        return UOp.const(dt, 1)
    if op is Ops.MAX:
        return UOp.const(dt, dtypes.min(dt))
    raise OptError(f"REDUCE with {op} has no identity; use ADD, MUL or MAX")


def _lanes(ast: UOp, kinds: tuple[AxisType, ...]) -> int:
    n = 1
    for k in kinds:
        for r in axes_of(ast, k):
            n *= int(r.src[0].arg)
    return n


def _unroll_lanes(ast: UOp, r: UOp | None) -> int:
    """The most UNROLL lanes of one reduction (of those over ``r`` when given): reductions that run one after another
    (a fused row's passes) each have their own, so their lanes do not multiply."""
    most = 1
    for u in ast.toposort():
        if u.op is Ops.REDUCE and (r is None or r in u.src[1:]):
            most = max(most, math.prod(int(x.src[0].arg) for x in u.src[1:] if x.arg[1] is AxisType.UNROLL))
    return most


def split_axis(ast: UOp, r: UOp, amount: int, kind: AxisType, top: bool, overlap: bool = False) -> UOp:
    """Split range ``r`` into an outer part (same id and kind) and a part of ``amount`` of ``kind``; with
    ``overlap``, a masked UPCAST of an output axis overlaps its last tile instead (see below)."""
    if r.src[0].op is not Ops.CONST:
        raise OptError(f"axis {r.arg[0]} has a symbolic size; opts need a constant size")
    size = int(r.src[0].arg)
    if amount < 2:
        raise OptError(f"amount must be at least 2, got {amount}")
    if amount > size:
        raise OptError(f"amount {amount} is larger than axis {r.arg[0]} (size {size})")
    n_outer = -(-size // amount)
    new_id = 1 + max(u.arg[0] for u in ast.toposort() if u.op is Ops.RANGE)
    outer = UOp.range(n_outer, r.arg[0], r.arg[1])
    part = UOp.range(amount, new_id, kind)
    if overlap and size % amount and kind is AxisType.UPCAST and r.arg[1] is AxisType.GLOBAL and not _reads_output(ast):
        # the last tile overlaps the one before it: every lane is in range, so nothing is gated and a row of the
        # tile stays one vector; overlapped outputs are computed twice, the same value each time
        start = (outer * amount < size - amount).where(outer * amount, size - amount)
        return ast.substitute({r: start + part})
    expr = part * n_outer + outer if top else outer * amount + part
    valid = expr < size if size % amount else None
    # an output axis feeds only the stores along it: past its end a load may read any element (it wraps to the
    # start, a MOD whose value range is the axis, so a saved spec's buffer sizes stay exact), and only the store is
    # gated, so a tile's loads stay unconditional in the loops inside it
    clamped = expr % size if valid is not None and r.arg[1] is AxisType.GLOBAL else None
    memo: dict[UOp, UOp] = {r: expr}
    dep: set[UOp] = {r}
    for u in ast.toposort():
        if u in memo:
            continue
        depends = any(s in dep for s in u.src)
        if depends and not (u.op is Ops.REDUCE and r in u.src[1:]):
            dep.add(u)  # a reduction over ``r`` is one value for all of it: what reads it is not gated along ``r``
        if u.op is Ops.REDUCE and r in u.src[1:]:
            val = memo[u.src[0]]
            if valid is not None:
                val = valid.where(val, identity(u.arg, u.dtype))
            rngs = tuple(x for x in u.src[1:] if x is not r) + (outer, part)
            memo[u] = UOp(Ops.REDUCE, u.dtype, (val, *rngs), u.arg)
            continue
        if clamped is not None and u.op is Ops.LOAD and depends:
            # the address (and gate) wraps; what the buffer source holds is rebuilt as the rest (a value the kernel
            # stored before, ``codegen.stash``: its store gated with the other stores)
            idx = u.src[0]
            wrapped = (memo[idx.src[0]], *(x.substitute({r: clamped}) for x in idx.src[1:]))
            memo[u] = u.replace(src=(idx.replace(src=wrapped), *(x.substitute({r: clamped}) for x in u.src[1:])))
            continue
        new = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
        if valid is not None and u.op in (Ops.LOAD, Ops.STORE) and u.src[0] in dep:
            new = _gate(new, valid)
        memo[u] = new
    return memo[ast]


def _reads_output(ast: UOp) -> bool:
    """Whether the kernel loads a buffer it stores to (computing an output twice would read the first result)."""
    written = {st.src[0].src[0] for st in ast.toposort() if st.op is Ops.STORE}
    return any(u.op is Ops.LOAD and u.src[0].src[0] in written for u in ast.toposort())


def _overlapping(ast: UOp) -> bool:
    """Whether some store's index selects (an overlapped UPCAST tile writes some outputs twice)."""
    return any(x.op is Ops.WHERE for st in ast.toposort() if st.op is Ops.STORE for x in st.src[0].toposort())


def _gate(u: UOp, valid: UOp) -> UOp:
    idx = u.src[0]
    gate = valid if len(idx.src) == 2 else idx.src[2] & valid
    gidx = UOp(Ops.INDEX, idx.dtype, (idx.src[0], idx.src[1], gate))
    if u.op is Ops.STORE:
        return UOp(Ops.STORE, u.dtype, (gidx, u.src[1]))
    pad = u.src[1] if len(u.src) == 2 else UOp.const(u.dtype, 0)
    return UOp(Ops.LOAD, u.dtype, (gidx, pad))


def apply_opt(ast: UOp, opt: Opt, ren: Renderer, overlap: bool = False) -> UOp:
    """One opt on an AST (before ``expand``); raises OptError when it does not fit. ``overlap``: a masked UPCAST
    of an output axis overlaps its last tile (nothing gated) instead of gating its stores; not with BLOCK."""
    if not isinstance(opt, Opt):
        raise TypeError(f"opts must be a list of Opt, got {type(opt).__name__}")
    if _packed(ast) and opt.op is not OptOps.PACK:
        raise OptError(f"{opt}: PACK comes after every other opt (it copies what the final loops read)")
    if opt.op is OptOps.PACK:
        return pack_input(ast, opt, ren)
    axes = output_axes(ast) if opt.op in _OUTPUT_OPS else reduce_axes(ast)
    what = "output" if opt.op in _OUTPUT_OPS else "reduce"
    if not 0 <= opt.axis < len(axes):
        raise OptError(f"{opt}: the kernel has {len(axes)} {what} axes, no axis {opt.axis}")
    if opt.op is OptOps.SWAP:
        return swap_axes(ast, axes, opt)
    gpu = ren.global_max is not None
    if opt.op in (OptOps.LOCAL, OptOps.GROUP, OptOps.GROUPTOP):
        if not gpu:
            raise OptError(f"{opt}: {ren.device} renders loops, it has no workgroups (use THREAD)")
        local_max = ren.local_max or _DEFAULT_LOCAL_MAX
        threads = _lanes(ast, (AxisType.LOCAL, AxisType.GROUP_REDUCE)) * opt.amount
        if threads > (ren.local_threads_max or _DEFAULT_LOCAL_THREADS):
            raise OptError(f"{opt}: {threads} threads per workgroup exceed {ren.device}'s limit")
        n_local = len(axes_of(ast, AxisType.LOCAL)) + len(axes_of(ast, AxisType.GROUP_REDUCE))
        if n_local >= len(local_max) or opt.amount > local_max[n_local]:
            raise OptError(f"{opt}: {ren.device} has no room for another workgroup dimension of {opt.amount}")
    if opt.op in (OptOps.GROUP, OptOps.GROUPTOP):
        if axes_of(ast, AxisType.GROUP_REDUCE):
            raise OptError(f"{opt}: only one reduce axis can be grouped")
        red = [u for u in ast.toposort() if u.op is Ops.REDUCE and axes[opt.axis] in u.src[1:]]
        own = set(red[0].src[1:])
        inner = {x for x in red[0].src[0].toposort() if x.op is Ops.RANGE and x.arg[1] is AxisType.REDUCE}
        if inner - own - {y for u in red[0].src[0].toposort() if u.op is Ops.REDUCE for y in u.src[1:]}:
            raise OptError(f"{opt}: the reduction sits inside another reduction's loop")
        smem = opt.amount * red[0].dtype.itemsize * _lanes(ast, (AxisType.LOCAL, AxisType.UPCAST))
        if ren.shared_max and smem > ren.shared_max:
            raise OptError(f"{opt}: the combine needs more local memory than {ren.device} has")
    if opt.op is OptOps.THREAD:
        if gpu:
            raise OptError(f"{opt}: THREAD is for CPU-style renderers; {ren.device} launches a grid (use LOCAL)")
        if axes_of(ast, AxisType.THREAD):
            raise OptError(f"{opt}: the kernel is already split across threads")
    if opt.op is OptOps.BLOCK:
        return block_reduce(ast, axes[opt.axis], opt)
    if opt.op in (OptOps.INNER, OptOps.GROUP, OptOps.GROUPTOP):
        if axes_of(ast, AxisType.LOOP):
            raise OptError(f"{opt}: a BLOCKed reduction does not combine with {opt.op.name}")
        _check_inner(ast, opt)
    if opt.op in (OptOps.UPCAST, OptOps.UNROLL):
        unrolled = axes[opt.axis] if opt.op is OptOps.UNROLL else None
        lanes = _lanes(ast, (AxisType.UPCAST,)) * _unroll_lanes(ast, unrolled) * opt.amount
        if lanes > MAX_LANES:
            raise OptError(f"{opt}: {lanes} register lanes exceed the limit of {MAX_LANES}")
        upcast = _lanes(ast, (AxisType.UPCAST,)) * (opt.amount if opt.op is OptOps.UPCAST else 1)
        for loop in axes_of(ast, AxisType.INNER):
            along = sum(1 for u in ast.toposort() if u.op is Ops.REDUCE and loop in u.src[0].toposort())
            accs = upcast * int(loop.src[0].arg) * along
            if accs > MAX_INNER_ACCS:
                raise OptError(f"{opt}: {accs} accumulators exceed the INNER limit of {MAX_INNER_ACCS}")
    top = opt.op in (OptOps.THREAD, OptOps.GROUPTOP)
    return split_axis(ast, axes[opt.axis], opt.amount, _KIND[opt.op], top, overlap)


def block_reduce(ast: UOp, r: UOp, opt: Opt) -> UOp:
    """Split reduce axis ``r`` into blocks of ``opt.amount``; the loop over blocks (an AST range of kind LOOP)
    goes around the output loops and each block adds its partial sums to the output, the first one storing
    them. A matmul's reduction then walks a block of B's rows small enough to stay in cache while every
    output tile passes over it. Only for stores of a plain sum over ``r`` (each block's partial sum is
    stored and read back in the output's own dtype)."""
    if axes_of(ast, AxisType.LOOP):
        raise OptError(f"{opt}: the kernel's reduction is already blocked")
    if axes_of(ast, AxisType.INNER) or axes_of(ast, AxisType.GROUP_REDUCE):
        raise OptError(f"{opt}: a BLOCKed reduction does not combine with INNER or GROUP")
    stores = [st for st in ast.src if st.op is Ops.STORE]
    if len(stores) != len(ast.src) or not all(
        st.src[1].op is Ops.REDUCE and st.src[1].arg is Ops.ADD and r in st.src[1].src[1:] for st in stores
    ):
        raise OptError(f"{opt}: BLOCK needs every store to write a sum over the axis directly")
    if any(u.op is Ops.REDUCE and r not in u.src[1:] for st in stores for u in st.src[1].src[0].toposort()):
        raise OptError(f"{opt}: BLOCK needs a flat sum (no reduction inside it)")
    if _reads_output(ast):
        raise OptError(f"{opt}: the kernel reads a buffer it writes; BLOCK's partial sums would change its input")
    if _overlapping(ast):
        raise OptError(f"{opt}: an overlapped UPCAST tail writes some outputs twice; BLOCK would add their sums twice")
    if r.src[0].op is Ops.CONST and opt.amount >= int(r.src[0].arg):
        raise OptError(f"{opt}: a block of {opt.amount} leaves one block of axis {r.arg[0]}; use a smaller amount")
    split = split_axis(ast, r, opt.amount, AxisType.REDUCE, top=False)
    outer = next(u for u in split.toposort() if u.op is Ops.RANGE and u.arg == r.arg)
    loop = UOp.range(outer.src[0], r.arg[0], AxisType.LOOP)
    out: list[UOp] = []
    for st in split.src:
        red = st.src[1]
        part = UOp(Ops.REDUCE, red.dtype, (red.src[0], *(x for x in red.src[1:] if x is not outer)), red.arg)
        idx = st.src[0]
        later = outer.ne(0) if len(idx.src) == 2 else idx.src[2] & outer.ne(0)
        before = UOp(Ops.LOAD, red.dtype, (UOp(Ops.INDEX, idx.dtype, (idx.src[0], idx.src[1], later)),
                                           UOp.const(red.dtype, 0)))  # fmt: skip
        out.append(st.replace(src=(idx, before + part)))
    return UOp.sink(*out, arg=split.arg).substitute({outer: loop})


def _packed(ast: UOp) -> bool:
    return any(u.op is Ops.RANGE and u.arg[1] is AxisType.PACK for u in ast.toposort())


def packable_inputs(ast: UOp) -> list[UOp]:
    """The input buffers (DEFINE_GLOBAL, by slot) that some reduction loads: what PACK's axis counts."""
    bufs = {
        x.src[0].src[0]
        for red in ast.toposort()
        if red.op is Ops.REDUCE
        for x in red.src[0].toposort()
        if x.op is Ops.LOAD and x.src[0].src[0].op is Ops.DEFINE_GLOBAL
    }
    return sorted(bufs, key=lambda b: b.arg)


#: ranges PACK copies (the lanes and reduction steps inside one iteration of the loops around the copy)
_PACK_INNER = (AxisType.REDUCE, AxisType.UNROLL, AxisType.UPCAST)


def pack_input(ast: UOp, opt: Opt, ren: Renderer) -> UOp:
    """The load of input ``opt.axis`` inside a reduction reads a local buffer instead, filled by a copy whose loops
    (kind PACK) walk the load's reduction steps and lanes, laid out reduction steps outermost and lanes innermost
    (a matmul's B strip becomes ``[k][column lane]``, its A tile ``[k][row lane]``). The lowering puts the copy
    inside the loops the load depends on and before the first loop it does not depend on, so every iteration of
    that loop reuses one copy; a gated load copies its gate and pad. On GPU-style renderers each thread copies its
    own panel, in workgroups of one thread (correct everywhere; a copy shared by a workgroup is not made yet)."""
    if opt.amount != 0:
        raise OptError(f"{opt}: PACK takes amount 0 (the axis names the input)")
    bufs = packable_inputs(ast)
    if not 0 <= opt.axis < len(bufs):
        raise OptError(f"{opt}: the kernel's reductions read {len(bufs)} inputs, no input {opt.axis}")
    buf = bufs[opt.axis]
    if any(u.op is Ops.DEFINE_LOCAL and u.arg == ("pack", buf.arg) for u in ast.toposort()):
        raise OptError(f"{opt}: buffer {buf.arg} is already packed")
    if axes_of(ast, AxisType.INNER) or axes_of(ast, AxisType.GROUP_REDUCE) or axes_of(ast, AxisType.LOCAL):
        raise OptError(f"{opt}: PACK does not combine with INNER, LOCAL or GROUP axes")
    loads = {u for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0] is buf}
    if len(loads) != 1:
        raise OptError(f"{opt}: buffer {buf.arg} is read at {len(loads)} indices; PACK copies one")
    (load,) = loads
    if sum(1 for u in ast.toposort() if u.op is Ops.REDUCE and load in u.src[0].toposort()) != 1:
        raise OptError(f"{opt}: buffer {buf.arg} is read inside a nested reduction")
    # a WHERE that pads the load becomes its gate in the lowering (gated loads): the copy depends on it too
    guards = [w.src[0] for w in ast.toposort() if w.op is Ops.WHERE and load in w.src[1:]]
    needs = {x for g in (load, *guards) for x in g.toposort() if x.op is Ops.RANGE}
    inner = sorted((r for r in needs if r.arg[1] in _PACK_INNER), key=lambda r: (_PACK_INNER.index(r.arg[1]), r.arg[0]))
    if not inner:
        raise OptError(f"{opt}: the load of buffer {buf.arg} reads one element per output: nothing to copy")
    if any(r.src[0].op is not Ops.CONST for r in inner):
        raise OptError(f"{opt}: the load of buffer {buf.arg} walks a symbolic size; PACK needs constant sizes")
    size = math.prod(int(r.src[0].arg) for r in inner)
    if size < 2:
        raise OptError(f"{opt}: the load of buffer {buf.arg} reads one element per output: nothing to copy")
    limit = ren.shared_max or MAX_PACK_BYTES
    if size * load.dtype.itemsize > limit:
        raise OptError(f"{opt}: a copy of {size} elements exceeds {ren.device}'s {limit} bytes of local memory")
    outs = output_axes(ast)
    reused = [r for r in outs if r not in needs]
    if not reused:
        raise OptError(f"{opt}: every output loop reads another part of buffer {buf.arg}: no loop reuses a copy")
    if ren.global_max is None:
        inside = [r for r in outs if r in needs and r.arg[0] > reused[0].arg[0]]
        if inside:
            raise OptError(
                f"{opt}: the load of buffer {buf.arg} depends on output axis {inside[0].arg[0]}, inside "
                f"axis {reused[0].arg[0]} it does not depend on: the copy would repeat (SWAP them first)"
            )
    first = 1 + max(u.arg[0] for u in ast.toposort() if u.op is Ops.RANGE)
    copy_at = {r: UOp.range(int(r.src[0].arg), first + i, AxisType.PACK) for i, r in enumerate(inner)}
    flat: UOp = UOp.const(dtypes.index, 0)
    for r in inner:
        flat = flat * int(r.src[0].arg) + r
    local = UOp(Ops.DEFINE_LOCAL, load.dtype.ptr(size, AddrSpace.LOCAL), (), ("pack", buf.arg))
    fill = local.index(flat.substitute(copy_at)).store(load.substitute(copy_at))
    packed = UOp(Ops.AFTER, local.dtype, (local, fill)).index(flat).load()
    return ast.substitute({load: packed})


def swap_axes(ast: UOp, axes: list[UOp], opt: Opt) -> UOp:
    """Exchange the ids of two output ranges: output loops nest by id, so this is a loop-order change (a
    register-tiled matmul with its column tiles outermost keeps one strip of B in cache across all rows)."""
    if not 0 <= opt.amount < len(axes) or opt.amount == opt.axis:
        raise OptError(f"{opt}: SWAP needs another output axis (0..{len(axes) - 1}, not {opt.axis}) as its amount")
    a, b = axes[opt.axis], axes[opt.amount]
    return ast.substitute({a: a.replace(arg=(b.arg[0], a.arg[1])), b: b.replace(arg=(a.arg[0], b.arg[1]))})


def _check_inner(ast: UOp, opt: Opt) -> None:
    """INNER walks one axis inside reductions that are not nested and not grouped across a workgroup."""
    inner = axes_of(ast, AxisType.INNER)
    if opt.op is not OptOps.INNER:
        if inner:
            raise OptError(f"{opt}: a grouped reduction does not combine with an INNER loop")
        return
    if inner:
        raise OptError(f"{opt}: the kernel already has an INNER loop")
    if axes_of(ast, AxisType.GROUP_REDUCE):
        raise OptError(f"{opt}: an INNER loop does not combine with a grouped reduction")
    # the reductions that read along the axis keep one accumulator per element; the others (a row's reductions,
    # with the axis walking the row's outputs after them) keep one, and may nest
    axis = output_axes(ast)[opt.axis]
    reds = [u for u in ast.toposort() if u.op is Ops.REDUCE and axis in u.src[0].toposort()]
    if any(x.op is Ops.REDUCE for r in reds for x in r.src[0].toposort()):
        raise OptError(f"{opt}: the kernel has a reduction inside another; INNER needs flat reductions")
    accs = len(reds) * _lanes(ast, (AxisType.UPCAST,)) * opt.amount  # UNROLL lanes share an accumulator
    if accs > MAX_INNER_ACCS:
        raise OptError(f"{opt}: {accs} accumulators exceed the INNER limit of {MAX_INNER_ACCS}")


def _along_inner(value: UOp) -> bool:
    return any(x.op is Ops.RANGE and x.arg[1] is AxisType.INNER for x in value.toposort())


def expand(ast: UOp) -> UOp:
    """Replace UNROLL axes by one partial reduction per lane (or, along an INNER loop, by one reduction of the
    lanes combined) and UPCAST axes by one store per lane."""
    memo: dict[UOp, UOp] = {}
    for u in ast.toposort():
        new = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
        if u.op is Ops.REDUCE:
            unroll = [x for x in u.src[1:] if x.arg[1] is AxisType.UNROLL]
            if unroll:
                rest = tuple(x for x in u.src[1:] if x.arg[1] is not AxisType.UNROLL)
                lanes = [
                    new.src[0].substitute({x: UOp.const(x.dtype, i) for x, i in zip(unroll, vals)})
                    for vals in itertools.product(*(range(int(x.src[0].arg)) for x in unroll))
                ]
                if rest and _along_inner(u.src[0]):
                    # an INNER loop's accumulators are already independent: the lanes join before their one
                    # accumulator, so each pass loads and stores it once for all the rows it reads
                    joined = functools.reduce(lambda a, b: a.alu(u.arg, b), lanes)
                    new = UOp(Ops.REDUCE, u.dtype, (joined, *rest), u.arg)
                else:
                    parts = [UOp(Ops.REDUCE, u.dtype, (v, *rest), u.arg) if rest else v for v in lanes]
                    new = functools.reduce(lambda a, b: a.alu(u.arg, b), parts)
        memo[u] = new
    sink = memo[ast]
    stores: list[UOp] = []
    for st in sink.src:
        ups = [x for x in st.toposort() if x.op is Ops.RANGE and x.arg[1] is AxisType.UPCAST]
        ups.sort(key=lambda x: x.arg[0])
        for vals in itertools.product(*(range(int(x.src[0].arg)) for x in ups)):
            stores.append(st.substitute({x: UOp.const(x.dtype, i) for x, i in zip(ups, vals)}))
    return UOp.sink(*stores, arg=sink.arg)


def row_loop(ast: UOp) -> Opt | None:
    """INNER over the whole of an output axis that some reduction does not read along (the row of a softmax or
    layernorm the scheduler fused: its reductions are per row), or None. The row's reductions then run once per
    row and its outputs are stored in a loop after them; as a plain output axis every element would redo them.
    ``apply_opts`` adds it to any opts that have no INNER (a search's candidates, none at all)."""
    reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    if not reds or axes_of(ast, AxisType.INNER):
        return None
    for i, r in enumerate(output_axes(ast)):
        if r.src[0].op is Ops.CONST and int(r.src[0].arg) >= 2 and any(r not in red.ranges for red in reds):
            return Opt(OptOps.INNER, i, int(r.src[0].arg))
    return None


def with_row_loop(ast: UOp, opts: Sequence[Opt]) -> list[Opt]:
    """The opts ``apply_opts`` applies: a fused row's loop (``row_loop``) first where ``opts`` have no INNER."""
    row = None if any(isinstance(o, Opt) and o.op is OptOps.INNER for o in opts) else row_loop(ast)
    return [row, *opts] if row is not None else list(opts)


def apply_opts(ast: UOp, opts: list[Opt], ren: Renderer) -> UOp:
    """The opts in order, then the register axes expanded: the AST the lowering takes. Masked UPCAST tails
    overlap unless the reduction is BLOCKed (a block adds to outputs, and an overlapped one would be added twice).
    A fused row's loop (``row_loop``) comes first where the opts have no INNER."""
    opts = with_row_loop(ast, opts)
    if not opts:
        return ast
    overlap = not any(isinstance(o, Opt) and o.op is OptOps.BLOCK for o in opts)
    for opt in opts:
        ast = apply_opt(ast, opt, ren, overlap)
    return expand(ast)
