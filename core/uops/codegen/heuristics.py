"""Hand-written default opts per renderer kind: what a kernel gets without search.

The choices read the kernel's shapes and the strides of its loads along each axis:

- an output axis that some reduction does not read along (the row of a fused softmax or layernorm) becomes an INNER
  loop over the whole axis first, on every target: the row's reductions then run once per row, not per element;
- an output axis along which some load is broadcast (stride 0) inside a reduction is upcast:
  each loaded value is reused by every lane (matmul: rows reuse B, columns reuse A, giving a
  register tile); the contiguous one gets the most lanes so the compiler can vectorize it, sized to the
  target's vector registers (``_register_tile``: 4x16 on AVX2, 8x32 or 4x64 on AVX-512), and a register-tiled matmul
  is threaded, swapped and packed only where it is big enough to pay for it;
- which input's layout decides the loop order is the one that varies with the outputs (``_streamed``): a
  vector-matrix product (LLM decode) is a strided reduction over the matrix, not a row reduction of the vector;
- an output axis that the reduction's loads walk with stride 1 while the reduce axis strides
  (a sum over axis 0) becomes an INNER loop on CPU (each pass streams whole rows into an array of
  accumulators), or is upcast when a register tile is already there, so each pass reads whole cache lines;
- CPU-style: a product of two inputs that both read one long reduction contiguously (``x @ w.T`` with a few rows,
  a convolution's weight gradient) is vectorized along the reduction instead (``_dot_tile``): one vector
  accumulator per output of a small tile of each input's outputs;
- a reduce axis read with stride 1 is unrolled into separate accumulators (vectorizable sums); on CPU a sum along
  rows whose step is vector arithmetic (loads, +, -, *) also upcasts the row axis, so several rows stream at once
  into one vector accumulator each;
- CPU-style: big kernels are split across cores on their outermost axis that has room (THREAD), except a streamed
  reduction of plain loads small enough for L3 (a sum over either axis of 2048^2), which one core reads as fast;
- CPU-style: a register-tiled matmul runs its column tiles outermost (SWAP), so one strip of the
  right-hand matrix stays in cache while every row tile passes over it; over a longer reduction that
  strip is copied into one contiguous panel per column tile (PACK), the reduction cut into blocks of
  rows (BLOCK) only where a strip would not fit the panel; an input read through overlapping windows (a
  convolution's flattened input) is compact already and is read in place; the threads take chunks that divide
  the tiles evenly;
- GPU-style: outputs get a workgroup on the contiguous axis (LOCAL); a reduction with few
  outputs is grouped across the workgroup (GROUP) instead.

Every candidate is applied in turn and kept only when it fits (``OptError`` otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from uops.codegen.lowerer import LANEWISE_OPS
from uops.codegen.opt import (
    MAX_PACK_BYTES,
    Opt,
    OptError,
    OptOps,
    apply_opt,
    axes_of,
    output_axes,
    packable_inputs,
    reduce_axes,
    row_loop,
)
from uops.codegen.stash import COSTLY_OPS
from uops.ir.ops import AxisType, Ops
from uops.ir.uop import UOp
from uops.renderer import Renderer

#: output lanes x accumulators a CPU kernel may keep in registers (16 ymm of 8 floats, with room left)
CPU_LANES = 64
#: work (output elements x reduce length) below which a kernel is not worth splitting across cores
THREAD_MIN_WORK = 1 << 18
#: the longest INNER loop of a strided reduction: 8 KiB of float32 row per pass, its accumulators in L1. Timed on the
#: shared 2-core EPYC (sum over axis 0 of 2048^2, 8 rows a pass, kernel alone, best of 100): 2048 0.60 ms, 1024 0.71
INNER_CHUNK = 2048
#: work below which a streamed reduction of plain loads (rows or strided, see ``_row_streams`` and
#: ``_strided_reduction``) runs on one core: 4 MiB of float32, in L2/L3, where a second thread costs about its own
#: start. Above it two threads win while the CPU pool's workers still spin between calls (``SPIN_US``): in
#: ``bench/ops.py``'s turns on the shared 2-core EPYC, 2048^2 sum axis 1 0.24-0.32 ms on two threads, 0.42-0.55 on
#: one; axis 0 0.33-0.45 and 0.42-0.46 (with workers that slept between calls two threads took 0.70 ms there)
STREAM_THREAD_MIN_WORK = 1 << 20

_EVAL: dict[Ops, Callable[..., int]] = {
    Ops.ADD: lambda a, b: a + b,
    Ops.SUB: lambda a, b: a - b,
    Ops.MUL: lambda a, b: a * b,
    Ops.IDIV: lambda a, b: int(a / b) if b else 0,
    Ops.MOD: lambda a, b: a - int(a / b) * b if b else 0,
    Ops.MAX: max,
    Ops.NEG: lambda a: -a,
    Ops.CMPLT: lambda a, b: int(a < b),
    Ops.CMPNE: lambda a, b: int(a != b),
    Ops.AND: lambda a, b: a & b,
    Ops.OR: lambda a, b: a | b,
    Ops.WHERE: lambda c, a, b: a if c else b,
    Ops.CAST: lambda a: a,
}


def _eval(u: UOp, at: dict[UOp, int], memo: dict[UOp, int | None]) -> int | None:
    """An index expression at integer range values (other ranges and variables at 0); None when unknown."""
    if u in memo:
        return memo[u]
    out: int | None
    if u.op is Ops.CONST:
        out = int(u.arg)
    elif u.op in (Ops.RANGE, Ops.DEFINE_VAR):
        out = at.get(u, 0)
    elif u.op in _EVAL:
        args = [_eval(s, at, memo) for s in u.src]
        out = None if any(a is None for a in args) else _EVAL[u.op](*args)
    else:
        out = None
    memo[u] = out
    return out


def stride(idx: UOp, r: UOp) -> int | None:
    """How far ``idx`` moves when range ``r`` steps from 0 to 1 (None when it cannot tell)."""
    a, b = _eval(idx, {}, {}), _eval(idx, {r: 1}, {})
    return None if a is None or b is None else b - a


def _loads(ast: UOp) -> list[UOp]:
    return [u.src[0].src[1] for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL]


def _size(r: UOp) -> int | None:
    return int(r.src[0].arg) if r.src[0].op is Ops.CONST else None


def _divisor(size: int, choices: tuple[int, ...]) -> int | None:
    for c in choices:
        if c <= size and size % c == 0:
            return c
    return None


#: the share of a tiled axis an overlapped last tile may compute twice before a smaller tile is taken
TILE_WASTE = 1 / 8


#: the share a CPU register tile may recompute: a wider tile's FMAs per load pay for more (33x1000x77, alternating
#: rounds on the 2-core Xeon: an 8x32 tile over 40x96 outputs 0.060 ms, the 4x16 tile over 36x80 0.079 ms)
REGISTER_TILE_WASTE = 1 / 4
#: work (outputs x reduce length) below which a register-tiled matmul stays on one core: the native pool's spinning
#: workers start a chunk within a microsecond. Kernel alone, 2-core EPYC, one core against two: 128^3 0.036 and
#: 0.022 ms, 100^3 0.021 and 0.015, 48x256x48 0.0106 and 0.0104, 64^3 0.0050 and 0.0060
GEMM_THREAD_MIN_WORK = 1 << 20
#: bytes of B below which a register-tiled matmul is neither SWAPped nor PACKed: B stays in L2 (33x1000x77:
#: 0.074 ms plain, 0.092 ms packed)
PACK_MIN_BYTES = 1 << 20


def _tile(size: int, choices: tuple[int, ...], waste: float = TILE_WASTE) -> int | None:
    """The widest register tile for an axis of ``size``: one that divides it, or one whose last tile overlaps
    (masked) the one before it by at most ``TILE_WASTE`` of the axis (1000 columns: 16, 8 recomputed). Timed on
    the shared 2-core EPYC: a masked 4x16 tile runs 1009^3 at 1024^3's GFLOP/s, no tile at all 100x slower."""
    for c in choices:
        if c <= size and (size % c == 0 or -(-size // c) * c - size <= size * waste):
            return c
    return None


#: vector registers of a CPU whose widest vector is 64 bytes (AVX-512: 32 zmm) or less (AVX2: 16 ymm)
_WIDE_REGISTERS, _REGISTERS = 32, 16


def _float_lanes(ren: Renderer) -> int:
    """float32 lanes of one of the target's widest vector registers."""
    return max(1, ren.vector_max_bytes // 4)


def _register_tile(ren: Renderer) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """(lanes, column tiles, row tiles) of a CPU register tile: half the vector registers hold accumulators, the
    rest the loaded row of B and the broadcast A. The contiguous axis takes two vectors at most (each broadcast of A
    then feeds two FMAs), the rows the rest: on AVX-512 an 8x32 tile of 16 zmm. Timed on the 2-core Xeon
    (1024^3, alternating rounds): 8x32 in zmm 147 GFLOP/s, 12x32 146, 4x32 130, the AVX2 4x16 tile 58."""
    width = _float_lanes(ren)
    regs = _WIDE_REGISTERS if ren.vector_max_bytes >= 64 else _REGISTERS
    lanes = max(CPU_LANES, regs // 2 * width)
    cols = tuple(c for c in (2 * width, width, 16, 8, 4, 2) if c <= 2 * width)
    rows = (8, 4, 2) if lanes > CPU_LANES else (4, 2)
    return lanes, tuple(dict.fromkeys(cols)), rows


#: the share of ``_tile_cycles`` an odd-sized matmul's tile must save to replace the usual one (``_odd_tile``)
ODD_TILE_GAIN = 1 / 32
#: cycles of loop and address work per step of a register tile (``_tile_cycles``): without it 3x16 tiles tied
#: with 10x16 on 129x257x129, which ran 0.061 and 0.051 ms (kernel alone, 2-core EPYC, two threads)
TILE_STEP_CYCLES = 0.5
#: rows of a matmul from which a 4x64 tile beats 8x32 on AVX-512 (fewer rows of A in flight, each broadcast feeding
#: four FMAs): timed on the 2-core Xeon, alternating rounds, 512x1024x4096 1.34x and 1024^3 1.16x faster. Fewer rows
#: keep 8x32, so B streams once (decode with a batch of 8)
FLAT_TILE_MIN_ROWS = 16


def _flat_tile(
    rows: tuple[int, ...], cols: tuple[int, ...], budget: int, order: list[tuple[int, UOp]], red_len: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(row tiles, column tiles) of a 2-D CPU register tile: on a 512-lane-vector target (budget 256) a tile of 4
    rows by four vectors where the rows are many, the columns fill four vectors (see ``_tile``) and a strip of B of
    64 columns still packs whole (``MAX_PACK_BYTES``; a bigger strip would need BLOCK, which an epilogue forbids)."""
    n_rows, n_cols = _size(order[0][1]) or 0, _size(order[1][1]) or 0
    wide = 2 * max(cols)  # four vectors: the column choices go up to two
    if (
        budget >= 256
        and n_rows >= FLAT_TILE_MIN_ROWS
        and _tile(n_cols, (wide,), REGISTER_TILE_WASTE) == wide
        and red_len * wide * 4 <= MAX_PACK_BYTES
    ):
        return (4, 2), (wide, *cols)
    return rows, cols


def _tile_cycles(rows: int, cols: int, r: int, c: int, width: int) -> float:
    """Cycles per reduction step of an ``r`` x ``c`` register tile over ``rows`` x ``cols`` outputs (last tiles
    overlapped): each tile's step issues an FMA per row and vector of ``width`` lanes (a part vector costs a whole
    one), two a cycle, loads the row's vectors of B and ``r`` broadcasts of A, three a cycle, and spends
    ``TILE_STEP_CYCLES`` on its loop."""
    tiles = -(-rows // r) * -(-cols // c)
    vectors = -(-c // width)
    return tiles * (max(r * vectors / 2, (r + vectors) / 3) + TILE_STEP_CYCLES)


def _odd_tile(
    rows: tuple[int, ...], cols: tuple[int, ...], budget: int, order: list[tuple[int, UOp]], ren: Renderer
) -> tuple[int, int] | None:
    """(rows, columns) of a 2-D CPU register tile for sizes the usual tile fits badly: it overlaps the outputs by
    more than ``TILE_WASTE`` (33x77 in 8x32 tiles computes 40x96) or its columns fill part of a vector. Among the
    column tiles and the usual row tiles (with every row count that divides the rows, where they overlap), the one
    with the fewest ``_tile_cycles`` (which counts an overlapped last tile whole), where it beats the usual one by
    ``ODD_TILE_GAIN``; None keeps the usual one. Kernel alone, 2-core EPYC, best of 15: 33x1000x77 in 8x32 tiles
    0.044 ms, in 11x16 0.032 (two threads); 7x512x300 in 4x32 0.017, in 7x32 0.014; 70x70x24 in 8x8 0.0045, in
    8x16 0.0034 (one core)."""
    n_rows, n_cols = _size(order[0][1]) or 0, _size(order[1][1]) or 0
    width = _float_lanes(ren)
    r0 = _tile(n_rows, tuple(a for a in rows if a <= budget), REGISTER_TILE_WASTE)
    c0 = _tile(n_cols, tuple(a for a in cols if (r0 or 1) * a <= budget), REGISTER_TILE_WASTE)
    if r0 is None or c0 is None:
        return None
    overlap = -(-n_rows // r0) * r0 * -(-n_cols // c0) * c0 > n_rows * n_cols * (1 + TILE_WASTE)
    if not overlap and c0 >= width:
        return None
    # other row counts only where the rows overlap: a row tile is as many streams of A, and with few columns to reuse
    # them (4096x4096x8) 16 rows ran 2.4x slower than 8
    divisors = [d for d in range(2, budget // width + 1) if n_rows % d == 0] if overlap else []
    best = min(
        (
            (r, c)
            for r in dict.fromkeys((*rows, *divisors))
            for c in cols
            if r <= n_rows and c <= n_cols and r * -(-c // width) * width <= budget
        ),
        key=lambda rc: (_tile_cycles(n_rows, n_cols, rc[0], rc[1], width), -rc[0] * rc[1]),  # the bigger of equals
    )
    if _tile_cycles(n_rows, n_cols, *best, width) > _tile_cycles(n_rows, n_cols, r0, c0, width) * (1 - ODD_TILE_GAIN):
        return None
    return best


def _try(ast: UOp, opts: list[Opt], opt: Opt, ren: Renderer) -> UOp:
    try:
        out = apply_opt(ast, opt, ren)
    except OptError:
        return ast
    opts.append(opt)
    return out


def _strided_reduction(ast: UOp, opts: list[Opt], ren: Renderer, axis: int) -> tuple[UOp, int]:
    """A reduction over a strided axis (a sum over axis 0) on CPU: the contiguous output axis becomes an INNER
    loop of up to ``INNER_CHUNK`` elements (one chunk per core if rows are short), so every pass streams whole
    rows into an array of accumulators, and a few rows are unrolled so that several streams are in flight.
    Returns the AST and the INNER length."""
    size = _size(output_axes(ast)[axis])
    if size is None:
        return ast, 1
    # one chunk per core when the row is short enough, so THREAD can split the outer part
    work = math.prod(_size(r) or 1 for r in [*output_axes(ast), *reduce_axes(ast)])
    cores = int(getattr(ren, "threads", 1)) if work >= THREAD_MIN_WORK and not _one_core_stream(ast, work) else 1
    want = min(INNER_CHUNK, -(-size // max(1, cores)))
    amt = want if size % want == 0 else _divisor(size, tuple(a for a in (1024, 512, 256, 128) if a <= want)) or want
    if amt < 2:
        return ast, 1
    before = len(opts)
    ast = _try(ast, opts, Opt(OptOps.INNER, axis, amt), ren)
    if len(opts) == before:
        return ast, 1
    reds = reduce_axes(ast)
    unroll = _divisor(_size(reds[-1]) or 1, (8, 4, 2)) if reds else None
    if unroll is not None:
        ast = _try(ast, opts, Opt(OptOps.UNROLL, len(reds) - 1, unroll), ren)
    return ast, amt


#: rows of a row reduction (a sum over the contiguous axis) a CPU kernel reduces at once, one vector accumulator
#: each: timed on the shared 2-core EPYC (sum over axis 1 of 2048^2, alternating runs, best of 100): 8 rows
#: 0.53 ms, 4 rows 0.68 ms, one row 16-wide 0.98 ms (numpy 1.68 ms in the same runs)
ROW_STREAMS = (8, 4, 2)
#: reduce length from which a row reduction streams several rows at once (shorter rows fit in L1 anyway)
ROWS_MIN_REDUCE = 256
#: lanes of independent accumulators a contiguous reduction is unrolled by (the first that divides it). With the
#: widest, one row at a time keeps the loads busy: more rows at once only add memory streams for the prefetchers
#: to follow, unless they share an operand (a matrix-vector product's vector). Kernel alone, 2-core EPYC, best of
#: 30, sum over axis 1 of 2048^2 on two threads: 8 rows 0.102 ms, one row 0.095 from L3; after 64 MiB of other
#: writes 0.36 and 0.28 ms
REDUCE_UNROLLS = (16, 8, 4)


def _step_ops(red: UOp) -> list[UOp]:
    """The computed nodes of a reduction's step that change from step to step: what depends on its own ranges,
    loads and constants aside (a load's index math is no value; what no range reaches is one broadcast value)."""
    own = {r for r in red.src[1:] if r.op is Ops.RANGE}
    out: list[UOp] = []
    todo, seen = [red.src[0]], set()
    while todo:
        u = todo.pop()
        if u in seen or u.op in (Ops.LOAD, Ops.CONST) or not own & set(u.ranges):
            continue
        seen.add(u)
        out.append(u)
        todo.extend(u.src)
    return out


def _vector_sum(ast: UOp) -> bool:
    """Whether every reduction of ``ast`` is a sum whose steps stay vector ops when several rows stream at once:
    what depends on the reduce ranges is loads and lanewise arithmetic (a softmax's exp, a max, a compare would
    be computed lane by lane, slower than one row's unrolled chain, as timed on softmax rows of 2048^2)."""
    reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    return bool(reds) and all(red.arg is Ops.ADD and all(u.op in LANEWISE_OPS for u in _step_ops(red)) for red in reds)


def _streamed(loads: list[UOp], outs: list[UOp]) -> list[UOp]:
    """The loads that read another element for each output (a matrix), not one value shared by all of them (the
    vector of a vector-matrix product): how the kernel's big input is laid out decides its loop order."""
    varying = [x for x in loads if any(stride(x, o) != 0 for o in outs)]
    return varying or loads


def _one_core_stream(ast: UOp, elems: int) -> bool:
    """Whether a streamed reduction reading ``elems`` elements stays on one core (see ``STREAM_THREAD_MIN_WORK``):
    it is small enough for L3 and every reduction of ``ast`` reduces plain loads (memory traffic only)."""
    if elems >= STREAM_THREAD_MIN_WORK:
        return False
    reds = [u for u in ast.toposort() if u.op is Ops.REDUCE]
    return bool(reds) and all(r.src[0].op is Ops.LOAD for r in reds)


def _row_streams(ast: UOp, opts: list[Opt], ren: Renderer, loads: list[UOp]) -> tuple[UOp, int]:
    """A reduction along the contiguous axis with no register tile: the output axis the loads stride along
    (a row index) is upcast, so several rows stream at once into one vector accumulator each instead of one row
    through a chain of adds, where the rows share an operand or the row's own unroll is short
    (``REDUCE_UNROLLS``). Returns the AST and its lanes."""
    outs = output_axes(ast)
    for i in reversed(range(len(outs))):
        size = _size(outs[i])
        if size is None or not any((st := stride(x, outs[i])) is not None and st > 1 for x in loads):
            continue
        if _fully_unrolled(ast, loads) and not any(stride(x, outs[i]) == 0 for x in loads):
            return ast, 1
        amt = _tile(size, ROW_STREAMS)
        if amt is None:
            return ast, 1
        before = len(opts)
        ast = _try(ast, opts, Opt(OptOps.UPCAST, i, amt), ren)
        return ast, amt if len(opts) > before else 1
    return ast, 1


def _reduce_unroll(size: int, choices: tuple[int, ...]) -> int | None:
    """The unroll of a contiguous reduction of ``size``: the first choice dividing it, if it leaves 4 steps or more."""
    amt = _divisor(size, choices)
    return amt if amt is not None and size >= 4 * amt else None


def _fully_unrolled(ast: UOp, loads: list[UOp]) -> bool:
    """Whether the contiguous reduction of ``ast`` gets ``_unroll_reductions``' widest unroll (``REDUCE_UNROLLS``)."""
    for r in reduce_axes(ast):
        if any(stride(x, r) == 1 for x in loads):
            return _reduce_unroll(_size(r) or 1, REDUCE_UNROLLS) == REDUCE_UNROLLS[0]
    return False


def _row_loops(ast: UOp, opts: list[Opt], ren: Renderer) -> UOp:
    """A fused row's loop first (``row_loop``), so the other choices see the row's reductions once per row."""
    row = row_loop(ast)
    return ast if row is None else _try(ast, opts, row, ren)


def _strided_lines(
    ast: UOp, opts: list[Opt], ren: Renderer, axes: tuple[list[UOp], list[UOp]], contiguous: list[int], lanes: int
) -> tuple[UOp, int]:
    """A sum over a strided axis: take whole cache lines of the contiguous output axis per pass (several per row:
    one line per row per pass defeats the prefetchers). ``axes``: the output and reduce axes before any opt.
    Returns the AST and the lanes now in flight."""
    outs, reds = axes
    for i in contiguous:
        if any(o.op is OptOps.UPCAST and o.axis == i for o in opts):
            continue
        amt = _divisor(_size(outs[i]) or 1, tuple(a for a in (64, 32, 16, 8, 4) if lanes * a <= CPU_LANES))
        if amt is not None:
            before = len(opts)
            ast = _try(ast, opts, Opt(OptOps.UPCAST, i, amt), ren)
            lanes *= amt if len(opts) > before else 1
            if amt >= 32 and reds and (_size(reds[-1]) or 0) % 2 == 0:
                ast = _try(ast, opts, Opt(OptOps.UNROLL, len(reds) - 1, 2), ren)  # two rows in flight
        break
    return ast, lanes


#: rows (and columns) from which ``A @ B.T`` is tiled and packed like ``A @ B``: 8x384x1536 packed in 4x64 tiles
#: 0.088 ms, unpacked 0.35-0.45 ms; 3x384x1152 unrolled along K 0.025 ms, in a 32-column tile 0.032 ms
TRANSPOSED_MIN_ROWS = 8


def _transposed_b(reuse: list[tuple[int, UOp]], inner: list[UOp], outs: list[UOp], reds: list[UOp]) -> bool:
    """Whether this is ``A @ B.T`` (a linear layer with torch's (out, in) weights): a 2-D register tile where no
    output axis is read contiguously, and the input that varies along the output's columns is read contiguously
    along the reduction. PACK copies its strips into (K, columns) panels, so the columns become the vector axis as
    in ``A @ B``: 256x384 @ (1536x384).T ran 42 GFLOP/s as an 8x8 tile of scalars, 374 packed in 4x64 (numpy 338)."""
    cols = len(outs) - 1
    if len(reuse) != 2 or cols not in dict(reuse):
        return False
    if any((_size(r) or 0) < TRANSPOSED_MIN_ROWS for _, r in reuse):
        return False  # a few rows (decode) stream B once, unrolled along its contiguous reduction
    if any(stride(x, r) == 1 for x in inner for _, r in reuse):
        return False
    along = [x for x in inner if stride(x, outs[cols]) not in (0, None)]
    return bool(along) and all(any(stride(x, r) == 1 for r in reds) for x in along)


#: reduce length from which a product of two inputs both read contiguously along the reduction (``A @ B.T`` with
#: few rows, a convolution's weight gradient) is vectorized along it (``_dot_tile``)
DOT_MIN_REDUCE = 1024
#: output tiles of each input's axis in such a product (see ``_dot_tile`` for the timings)
DOT_TILE = (4, 2)


def _dot_tile(ast: UOp, opts: list[Opt], ren: Renderer, inner: list[UOp], outs: list[UOp]) -> bool:
    """A CPU register tile for a product of two inputs that both walk one long reduction contiguously: the
    reduction is the vector axis for both (an output axis would be for one at most), so it is unrolled by one
    vector (each accumulator a vector, summed across its lanes once at the end) and an output axis of each input
    is upcast, so each loaded vector feeds a row of the tile; big ones are threaded. Appends to ``opts`` and
    returns True when the kernel is such a product.

    A convolution's weight gradient in the flattened form (64x64x3x3 outputs, 26912 positions, the 2-core EPYC,
    alternating rounds): 4x4 outputs by 16 lanes 11.3 ms, the 8x8 scalar tile 89 ms; 4x2 by 32 lanes 19 ms."""
    reds = reduce_axes(ast)
    if len(inner) != 2 or not reds:
        return False
    j, r = len(reds) - 1, reds[-1]
    width = _float_lanes(ren)
    size = _size(r) or 0
    if size < DOT_MIN_REDUCE or size % width or any(stride(x, r) != 1 for x in inner):
        return False
    budget = _register_tile(ren)[0]
    sides = []
    for this, other in (inner, inner[::-1]):
        axes = [
            (s, i) for i, o in enumerate(outs) if stride(other, o) == 0 and stride(this, o) != 0 and (s := _size(o))
        ]
        if not axes:
            return False
        sides.append(max(axes))
    trial, lanes = list(opts), width
    for reserve, (s, i) in zip((2, 1), sides):  # the first input's axis leaves the other room for two lanes
        amt = _tile(s, tuple(a for a in DOT_TILE if lanes * a * reserve <= budget), REGISTER_TILE_WASTE)
        if amt is not None:
            before = len(trial)
            ast = _try(ast, trial, Opt(OptOps.UPCAST, i, amt), ren)
            lanes *= amt if len(trial) > before else 1
    ast = _try(ast, trial, Opt(OptOps.UNROLL, j, width), ren)
    if not any(o.op is OptOps.UNROLL for o in trial[len(opts) :]):
        return False
    opts[:] = trial
    if math.prod(_size(o) or 1 for o in outs) * size >= GEMM_THREAD_MIN_WORK:
        _pick_thread(ast, opts, ren)
    return True


def _vector_lanes(
    opts: list[Opt], loads: list[UOp], axes: tuple[list[UOp], list[UOp]], lanes: int, ren: Renderer
) -> bool:
    """Whether the outputs already fill whole vectors of a load that walks them contiguously and the reduction
    strided (a batched vector-matrix product: a head's probabilities times its values, each step of the reduction
    a new vector of values). Unrolling the reduction then interleaves its accumulators with the lanes, and clang
    rebuilds every vector from scalars: p @ V of a decode step's attention (6x1x256 @ 6x256x64) ran 10x slower
    unrolled by 8 than with its 32 lanes alone (best 3.9 us). ``axes``: the output and reduce axes before any opt."""
    outs, reds = axes
    if lanes < _float_lanes(ren):
        return False
    upcast = [outs[o.axis] for o in opts if o.op is OptOps.UPCAST]
    return any(stride(x, o) == 1 and any(stride(x, r) not in (0, 1) for r in reds) for x in loads for o in upcast)


#: the longest reduction (all its axes together) taken as a small window, as a pool's: see ``_small_windows``; with
#: fewer outputs than ``SMALL_WINDOW_MIN_OUTPUTS`` a kernel runs in a few microseconds either way and keeps its loops
SMALL_WINDOW = 16
SMALL_WINDOW_MIN_OUTPUTS = 1024


def _small_windows(ast: UOp, opts: list[Opt], ren: Renderer, reds: list[UOp]) -> tuple[UOp, int]:
    """A reduction over a small window per output (a pool's 2x2 or 3x3) has no loop worth keeping: each window axis is
    unrolled whole, and the innermost output axis (and the next, when the first fits whole) takes 4 or 2 lanes, so
    neighbouring windows share their loads' index math and the stores are short vectors. Timed on the shared 2-core
    EPYC, kernel alone, best of alternating rounds: max_pool2d 2x2 of 64x16x8x8 0.070 -> 0.005 ms, of 8x64x56x56
    0.36 -> 0.12-0.16 ms; 3x3 stride 2 of 8x64x56x56 0.75 -> 0.63 ms."""
    lanes = 1
    for j, r in enumerate(reds):
        if (_size(r) or 0) >= 2:
            ast = _try(ast, opts, Opt(OptOps.UNROLL, j, _size(r) or 0), ren)
    outs = output_axes(ast)
    for i in reversed(range(len(outs))[-2:]):
        size = _size(outs[i]) or 0
        amt = _tile(size, (4, 2))
        if amt is None:
            break
        before = len(opts)
        ast = _try(ast, opts, Opt(OptOps.UPCAST, i, amt), ren)
        lanes *= amt if len(opts) > before else 1
        if amt < size:
            break
    return ast, lanes


#: vectors of accumulators a pass of a fused row keeps where its steps are cheap (``_cheap_steps``). Kernel alone,
#: 2-core EPYC (AVX-512), best of 30, rows of 2048^2: layernorm one vector (16 lanes) 0.636 ms, two 0.565, four
#: 0.581; softmax with two on its max pass 1.03, on both passes 1.05, on neither 1.11; softmax's gradient (five
#: passes, exps among them) two everywhere 3.19, one everywhere 2.82, two on its cheap passes 2.84 (best of 60)
ROW_PASS_VECTORS = 2


def _cheap_steps(ast: UOp, r: UOp) -> bool:
    """Whether every reduction over ``r`` steps by loads and plain arithmetic: its step computes none of the
    ``COSTLY_OPS`` (an exp, a log, a root, a division), whose cost hides the accumulator's latency already."""
    reds = [u for u in ast.toposort() if u.op is Ops.REDUCE and r in u.src[1:]]
    return bool(reds) and not any(u.op in COSTLY_OPS for red in reds for u in _step_ops(red))


def _unroll_reductions(
    ast: UOp, opts: list[Opt], ren: Renderer, reds: list[UOp], streamed: list[UOp], lanes: int, budget: int, rowed: bool
) -> tuple[UOp, int]:
    """Independent accumulators for a reduction read contiguously (the first one; every pass of a fused row,
    which run one after another), or a small window unrolled whole (``_small_windows``). ``reds``: the reduce axes
    before any opt. Returns the AST and the lanes now in flight."""
    sizes = [_size(r) for r in reds]
    outputs = math.prod(s for r in output_axes(ast) if (s := _size(r)) is not None)
    small = None not in sizes and math.prod(s or 1 for s in sizes) <= SMALL_WINDOW
    if not opts and lanes == 1 and small and outputs >= SMALL_WINDOW_MIN_OUTPUTS:
        return _small_windows(ast, opts, ren, reds)
    first = lanes
    # a fused row's later passes read the row from L1, where one accumulator's add or max chain, not the loads,
    # is the limit of a pass with cheap steps: two vectors of accumulators (see ROW_PASS_VECTORS)
    widest = ROW_PASS_VECTORS * _float_lanes(ren)
    for j, r in enumerate(reds):
        if any(stride(x, r) == 1 for x in streamed) and first < budget:
            wide = (widest,) if rowed and _cheap_steps(ast, r) else ()
            choices = tuple(dict.fromkeys(a for a in (*wide, *REDUCE_UNROLLS) if first * a <= budget))
            amt = _reduce_unroll(_size(r) or 1, choices)
            if amt is not None:
                before = len(opts)
                ast = _try(ast, opts, Opt(OptOps.UNROLL, j, amt), ren)
                lanes *= amt if len(opts) > before and lanes == first else 1
            if not rowed:
                break  # a row's reductions run one after another: each gets its own accumulators
    return ast, lanes


def hand_coded_opts(ast: UOp, ren: Renderer) -> list[Opt]:
    """The default opts for ``ast`` on ``ren``'s kind of target."""
    opts: list[Opt] = []
    ast = _row_loops(ast, opts, ren)
    rowed = bool(opts)
    if ren.device == "PYTHON":
        return opts  # an interpreter runs every lane in lockstep already: other opts only add uops
    outs, reds, loads = output_axes(ast), reduce_axes(ast), _loads(ast)
    gpu = ren.global_max is not None
    red_len = math.prod(s for r in reds if (s := _size(r)) is not None)
    n_elems = math.prod(s for r in outs if (s := _size(r)) is not None)
    lanes, looped, rows_streamed, tiled, transposed = 1, 1, False, False, False
    if reds:
        # what the reduction streams decides the layout; an epilogue's reads (a bias, a residual, the token ids
        # of a fused embedding) do not
        inner = [x for x in loads if any(stride(x, r) not in (0, None) for r in reds)] or loads
        # register tile: output axes whose streamed loads are reused across lanes, the contiguous one widest
        reuse = [
            (i, r)
            for i, r in enumerate(outs)
            if _size(r) is not None and any(stride(x, r) == 0 for x in inner) and len(outs) > 1
        ]
        contiguous = {i for i, r in enumerate(outs) if any(stride(x, r) == 1 for x in inner)}
        transposed = not gpu and _transposed_b(reuse, inner, outs, reds)
        if not gpu and not transposed and _dot_tile(ast, opts, ren, inner, outs):
            return opts
        if transposed:
            contiguous.add(len(outs) - 1)  # its panels, once packed, are
        order = sorted(reuse, key=lambda ir: ir[0] in contiguous)
        budget, col_tiles, row_tiles = _register_tile(ren)
        odd = None
        if not gpu and len(order) == 2 and order[1][0] in contiguous:
            row_tiles, col_tiles = _flat_tile(row_tiles, col_tiles, budget, order, red_len)
            odd = None if transposed else _odd_tile(row_tiles, col_tiles, budget, order, ren)
        for side, (i, r) in enumerate(order):
            size = _size(r) or 1
            want = col_tiles if i in contiguous and not gpu else (4, 2) if gpu else row_tiles
            if transposed and i not in contiguous:  # two row tiles at least: PACK copies outside a row loop
                want = tuple(a for a in want if 2 * a <= size)
            amt = (
                odd[side]
                if odd is not None
                else _tile(
                    size, tuple(a for a in want if lanes * a <= budget), REGISTER_TILE_WASTE if not gpu else TILE_WASTE
                )
            )
            if amt is not None:
                before = len(opts)
                ast = _try(ast, opts, Opt(OptOps.UPCAST, i, amt), ren)
                lanes *= amt if len(opts) > before else 1
        tiled = sum(1 for o in opts if o.op is OptOps.UPCAST) >= 2
        red_contig = any(stride(x, r) == 1 for x in _streamed(loads, outs) for r in reds)
        if red_contig and not gpu and lanes == 1 and red_len >= ROWS_MIN_REDUCE and _vector_sum(ast):
            ast, lanes = _row_streams(ast, opts, ren, loads)
            rows_streamed = True
        if not red_contig and not gpu and lanes == 1 and contiguous:
            ast, looped = _strided_reduction(ast, opts, ren, max(contiguous))
        elif not red_contig and not gpu:
            ast, lanes = _strided_lines(ast, opts, ren, (outs, reds), sorted(contiguous, reverse=True), lanes)
        if gpu:
            ast = _pick_group(ast, opts, ren, loads, red_len)
        elif not tiled and not _vector_lanes(opts, loads, (outs, reds), lanes, ren):
            # a 2-D register tile's FMAs are independent already: more accumulators only spill (16x slower)
            ast, lanes = _unroll_reductions(ast, opts, ren, reds, _streamed(loads, outs), lanes, budget, rowed)
    if gpu:
        _pick_local(ast, opts, ren)
        return opts
    work = math.prod(s for r in output_axes(ast) if (s := _size(r)) is not None) * max(red_len, 1) * lanes * looped
    # a streamed reduction: outputs x reduce length (counted before the opts) elements, each read once
    streamed = (looped > 1 or rows_streamed) and _one_core_stream(ast, n_elems * max(red_len, 1))
    b_bytes = red_len * n_elems // max(1, _size(outs[-2]) or 1) * 4 if len(outs) >= 2 else 0  # B: K x N
    transposed = transposed and tiled
    packs = transposed or (tiled and red_len >= PACK_MIN_REDUCE and b_bytes >= PACK_MIN_BYTES)
    if work >= (GEMM_THREAD_MIN_WORK if tiled else THREAD_MIN_WORK) and not streamed:
        # a tiled matmul's chunks copy nothing twice when each packs its own column strips (or nothing is packed)
        ast = _pick_thread(ast, opts, ren, len(outs) - 1 if packs else None, GEMM_CHUNKS_PER_CORE if tiled else 1)
    if not tiled or transposed or b_bytes >= PACK_MIN_BYTES:
        # a BLOCKed reduction adds to its outputs, so an overlapped tile would be masked instead: 10x slower
        exact = all((_size(outs[o.axis]) or 0) % o.amount == 0 for o in opts if o.op is OptOps.UPCAST)
        _tile_loop_order(ast, opts, ren, red_len, exact, transposed)
    return opts


def _pick_group(ast: UOp, opts: list[Opt], ren: Renderer, loads: list[UOp], red_len: int) -> UOp:
    """GPU-style: few outputs with long reductions share each reduction among a workgroup's threads."""
    n_out = math.prod(s for r in output_axes(ast) if (s := _size(r)) is not None)
    if n_out <= 2048 and red_len >= 256:
        for j, r in enumerate(reduce_axes(ast)):
            amt = _divisor(_size(r) or 1, (256, 128, 64, 32, 16))
            if amt is not None:
                op = OptOps.GROUP if any(stride(x, r) == 1 for x in loads) else OptOps.GROUPTOP
                return _try(ast, opts, Opt(op, j, amt), ren)
    return ast


def _pick_local(ast: UOp, opts: list[Opt], ren: Renderer) -> UOp:
    """GPU-style: workgroup threads along the innermost output axis of two or more (none beside a GROUP)."""
    cur = output_axes(ast)
    for i in reversed(range(len(cur))):
        n = _size(cur[i])
        if n is not None and n >= 2 and not any(o.op in (OptOps.GROUP, OptOps.GROUPTOP) for o in opts):
            sizes = (128, 64, 32, 16, 8, 4, 2)
            amt = _divisor(n, sizes) or _tile(n, sizes) or (128 if n > 128 else None)
            if amt is not None:
                ast = _try(ast, opts, Opt(OptOps.LOCAL, i, amt), ren)
            break
    return ast


def thread_axis(ast: UOp, threads: int, prefer: int | None = None) -> int | None:
    """The output axis a kernel is split across ``threads`` cores on: the one whose chunks come out most even (its
    loop count after the register tile is a multiple of the cores, or long enough that the last chunk's shortfall is
    small), the outermost of equals; None when no axis has a chunk for every core. A matmul of 24 rows in tiles of 8
    splits its columns (3 row tiles would leave one core idle a third of the time), decode's one row its columns.
    ``prefer`` wins a tie: a packed matmul's column tiles, so each core copies only its own strips of B (the MLP's
    512x1024x4096 timed 1.23x faster split by columns than by rows)."""
    best: tuple[float, int] | None = None
    for i, r in enumerate(output_axes(ast)):
        n = _size(r)
        if n is None or n < threads:
            continue
        even = n / (-(-n // threads) * threads)
        if best is None or even > best[0] + 1e-9 or (i == prefer and even >= best[0] - 1e-9):
            best = (even, i)
    return None if best is None else best[1]


#: chunks per core of a register-tiled matmul whose chunks copy nothing twice: the workers claim them as they come
#: free, so a core that another process holds for a while costs its share of chunks, not half the kernel (the MLP's
#: 512x1024x4096 on the shared 2-core Xeon, alternating rounds: 8 chunks 1.4-1.6x faster while the machine was busy,
#: the same time while it was quiet)
GEMM_CHUNKS_PER_CORE = 4


def _pick_thread(ast: UOp, opts: list[Opt], ren: Renderer, prefer: int | None = None, per_core: int = 1) -> UOp:
    """CPU-style: the output axis ``thread_axis`` picks is split across the cores, in ``per_core`` chunks per core
    where the axis has that many (given a ``prefer``red axis, only that one gets more than one)."""
    threads = int(getattr(ren, "threads", 1))
    axis = thread_axis(ast, threads, prefer) if threads > 1 else None
    if axis is None:
        return ast
    chunks = threads * per_core if prefer is None or axis == prefer else threads
    size = _size(output_axes(ast)[axis]) or 0
    if size < chunks:
        chunks = threads
    while chunks > threads and size % chunks:  # 12 column tiles: 6 chunks, not 8 of uneven size (1.33x slower)
        chunks -= threads
    return _try(ast, opts, Opt(OptOps.THREAD, axis, chunks), ren)


#: reduce length from which a register-tiled matmul's strip of B no longer stays in L1 across row tiles
TILE_ORDER_MIN_REDUCE = 256
#: reduce length from which a register-tiled matmul's reduction is BLOCKed: its strip of B, rows a
#: power-of-two stride apart, no longer stays in cache. Timed on the 2-core EPYC (best of alternating
#: rounds, blocks of 256): 30% faster at 2048^3, 15-20% at 1024^3, 7% slower at 512^3
BLOCK_MIN_REDUCE = 1024
#: rows of B per block: at 1024^3 blocks of 256 or 512 beat unblocked by 15-20%, 128 a little, and 64 is
#: slower (short strips defeat the prefetchers, though a cache simulation without prefetching favours 64)
BLOCK_ROWS = 256


#: reduce length from which a register-tiled matmul PACKs its strips of B: timed at 256^3 (alternating rounds,
#: machine shared) the copy ties on the best run and loses 30% on the median, B being in L2 anyway; 512^3 wins 2x
PACK_MIN_REDUCE = 512
#: reduce blocks tried when a whole strip of B is too big to PACK, largest first (the biggest packed strip won)
PACK_BLOCKS = (1024, 512, 256)


def _overlapping_windows(ast: UOp, buf: UOp) -> bool:
    """Whether the reduction reads ``buf`` through overlapping windows: a reduce step moves a read by less than the
    span of the column lanes it feeds (a convolution's input in the flattened form, whose kernel rows and columns are
    steps of Wp and 1 under a strip of 64 positions). Such a strip is compact already, and a packed copy repeats each
    element once per window that reads it: the 8x64x56x56 3x3 conv ran 17.9 ms packed, 10.3 ms not (alternating
    rounds, the 2-core EPYC)."""
    lanes = [u for u in axes_of(ast, AxisType.UPCAST) if _size(u)]
    reds = reduce_axes(ast)
    reads = [u.src[0].src[1] for u in ast.toposort() if u.op is Ops.LOAD and u.src[0].src[0] is buf]
    for x in reads:
        for u in lanes:
            if stride(x, u) == 1 and any(0 < abs(stride(x, r) or 0) < (_size(u) or 0) for r in reds):
                return True
    return False


def _pack_tile(ast: UOp, opts: list[Opt], ren: Renderer, rows: int, cols: int, may_block: bool = True) -> bool:
    """Column tiles outermost (SWAP) and the input that does not depend on the rows (a matmul's B) copied into one
    contiguous panel per column tile (PACK), read from L1 by every row tile; the reduction is BLOCKed only where
    a whole strip does not fit the PACK buffer. Appends to ``opts`` and returns True when it applies. Timed on the
    2-core EPYC (alternating rounds, machine shared): 1024^3 2.3-3x faster than blocked, 2048^3 2.3x (blocks of
    1024), 512^3 2x faster than the plain SWAP."""
    packable = [i for i, buf in enumerate(packable_inputs(ast)) if not _overlapping_windows(ast, buf)]
    if not packable:
        return False
    reds = reduce_axes(ast)
    k = _size(reds[0]) if len(reds) == 1 else None
    # a block that divides the reduction first: a masked last block gates the loads inside the tile's loop
    exact = tuple(k // n for n in range(2, 9) if k is not None and k % n == 0 and k // n >= min(PACK_BLOCKS))
    for block in (None, *exact, *PACK_BLOCKS) if may_block else (None,):
        trial, cur = list(opts), ast
        if block is not None:
            cur = _try(cur, trial, Opt(OptOps.BLOCK, 0, block), ren)
            if len(trial) == len(opts):
                continue
        n = len(trial)
        cur = _try(cur, trial, Opt(OptOps.SWAP, rows, cols), ren)
        if len(trial) == n:
            return False
        for i in packable:
            before = len(trial)
            cur = _try(cur, trial, Opt(OptOps.PACK, i, 0), ren)
            if len(trial) > before:
                opts[:] = trial
                return True
    return False


def _tile_loop_order(
    ast: UOp, opts: list[Opt], ren: Renderer, red_len: int, may_block: bool = True, must_pack: bool = False
) -> None:
    """Column tiles outermost for a 2-D register tile over a long reduction (appended to ``opts``): each
    strip of B is then read from cache by every row tile instead of all of B streaming once per row tile.
    Applied after THREAD (a packed tile splits its column tiles across the cores, each copying its own strips).
    From ``PACK_MIN_REDUCE`` each strip is also packed (``_pack_tile``); where PACK does not apply, a reduction
    of ``BLOCK_MIN_REDUCE`` or more is cut into blocks of ``BLOCK_ROWS`` rows of B (BLOCK) instead, each block's
    partial sums added to the output: timed at 1024^3 and 2048^3 without packing, blocks in the default loop order
    beat both SWAP and SWAP with blocks."""
    outs = output_axes(ast)
    if (red_len < TILE_ORDER_MIN_REDUCE and not must_pack) or len(outs) < 2:
        return
    rows, cols = len(outs) - 2, len(outs) - 1
    upcast = {o.axis for o in opts if o.op is OptOps.UPCAST}
    if {rows, cols} <= upcast and all((_size(outs[i]) or 0) >= 2 for i in (rows, cols)):
        if (red_len >= PACK_MIN_REDUCE or must_pack) and _pack_tile(ast, opts, ren, rows, cols, may_block):
            return
        reds = reduce_axes(ast)
        if may_block and red_len >= BLOCK_MIN_REDUCE and len(reds) == 1 and (_size(reds[0]) or 0) > BLOCK_ROWS:
            before = len(opts)
            _try(ast, opts, Opt(OptOps.BLOCK, 0, BLOCK_ROWS), ren)
            if len(opts) > before:
                return  # blocked, the rows sweep every column tile of a block: 10-15% faster than with SWAP
        _try(ast, opts, Opt(OptOps.SWAP, rows, cols), ren)
