"""Algebraic simplification: constant folding, identities and index (div/mod) math.

Two rule sets, both plain PatternMatchers so a pass can reuse them in graph_rewrite:

* ``symbolic_simple``: cheap folding only (constants, identities, canonical order).
* ``symbolic``: everything, including the rules that reason with value ranges (vmin/vmax),
  collect like terms and split sums under integer division and modulo.

Semantics are the ALU table's (``uops.ir.alu``): integer IDIV/MOD truncate toward zero and are 0 for
a zero divisor, integer arithmetic wraps, floats round to their dtype. A rule never changes a value and
never grows the expression (tree size). Integer ADD/SUB/MUL/NEG form a ring modulo 2**bits, so
regrouping them is exact even when they wrap; every rule that needs true (unwrapped) integers
(division, modulo, comparisons) first checks that the value range of each node it looks
through is not the whole dtype, which is how the range analysis marks "may have wrapped".
"""

from __future__ import annotations

import math
import struct
from math import gcd

from uops.dtypes import SCALARS, DType, dtypes, truncate
from uops.ir.alu import eval_scalar, idiv
from uops.ir.ops import (
    ADD,
    AND,
    BITCAST,
    CAST,
    CMPEQ,
    CMPLT,
    CMPNE,
    CONST,
    IDIV,
    MAX,
    MOD,
    MUL,
    NEG,
    OR,
    SUB,
    WHERE,
    XOR,
    GroupOp,
    Ops,
)
from uops.ir.rewrite import PatternMatcher, UPat, remembering_rewrite
from uops.ir.uop import ConstType, UOp, install_simplifier, new_uop

__all__ = ["simplify", "symbolic", "symbolic_simple", "tree_size"]

_INTS = frozenset(d for d in SCALARS if d._ibounds is not None)  # the scalar integer dtypes
_INTS_BOOL = _INTS | {dtypes.bool}
_MULACC = (
    Ops.MULACC
)  # rule code reads module names (uop.py's aliases): an Ops member read through the enum costs far more


# ----------------------------------------------------------------------------------------
# constant evaluation: the ALU table, with the folding policy on top
# ----------------------------------------------------------------------------------------
def _fold_value(op: Ops, dt: DType, src: tuple[UOp, ...]) -> ConstType | None:
    """The constant ``op`` folds to, or None: never a NaN (its sign and payload are the hardware's), never
    a float MULACC (fused or not is the backend's choice), nothing the table leaves undefined."""
    vals = tuple(s.arg for s in src)
    if op is not WHERE and any(v.__class__ is float and v != v for v in vals):
        return None
    operand = src[-1].dtype
    if op is _MULACC and operand.kind == "f":
        return None
    v = eval_scalar(op, dt, vals, operand)
    return None if v.__class__ is float and v != v else v


def _cast_const(v: ConstType, src: DType, dst: DType) -> ConstType | None:
    if dst.kind in "iu" and isinstance(v, float):
        if not math.isfinite(v) or not dtypes.min(dst) <= math.trunc(v) <= dtypes.max(dst):
            return None  # out-of-range float -> int is undefined in C
    return truncate(v, dst)


def _bitcast_const(v: ConstType, src: DType, dst: DType) -> ConstType | None:
    if src.fmt is None or dst.fmt is None or src.itemsize != dst.itemsize:
        return None
    out = struct.unpack(dst.fmt, struct.pack(src.fmt, v))[0]
    return None if isinstance(out, float) and math.isnan(out) else out


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------
def tree_size(u: UOp) -> int:
    """The size of ``u`` written out as an expression tree (shared nodes counted at each use)."""
    size: dict[UOp, int] = {}
    for n in u.toposort():
        size[n] = 1 + sum(size[s] for s in n.src)
    return size[u]


def _is_int(u: UOp) -> bool:
    dt = u.dtype
    return dt.count == 1 and (dt.kind == "i" or dt.kind == "u")


def _exact(u: UOp) -> bool:
    """True when the range of integer node ``u`` proves it did not wrap (not the whole dtype)."""
    lo, hi = u._ref.vrange or u._range()
    dt = u.dtype
    b = dt._ibounds
    dmin, dmax = b if b is not None else (dtypes.min(dt), dtypes.max(dt))
    return not (lo == dmin and hi == dmax)


class _Sum:
    """An integer expression flattened into sum(coeff * base) + const (bases in first-use order)."""

    __slots__ = ("terms", "occ", "k", "nconst", "skel", "exact", "rep", "mods", "muls")

    # no __init__: _flatten, the one maker, sets every field (and the bare class call allocates cheapest)
    terms: dict[UOp, int]
    occ: dict[UOp, int]  # uses of the bases used more than once
    k: int
    nconst: int
    skel: int  # nodes of the ADD/SUB/NEG/MUL-by-const skeleton, constants included
    exact: bool  # no skeleton node may have wrapped
    rep: bool  # some base occurs more than once
    mods: bool  # some base is a MOD
    muls: dict[UOp, UOp]  # base -> a node base*m met at coefficient +/-1 (so _build can reuse it)


_LINEAR = frozenset({Ops.ADD, Ops.SUB, Ops.NEG, Ops.MUL})


def _flatten(u: UOp, exact: bool = True, limit: int = 48, sub: UOp | None = None, neg: bool = False) -> _Sum | None:
    """Flatten ``u`` into a _Sum; with ``exact``, also check that no skeleton node may have wrapped. With ``sub``,
    flatten the sum ``u + sub`` (``u - sub`` with ``neg``) that is not built yet, as the node would (not ``exact``)."""
    if exact:
        dt = u.dtype
        b = dt._ibounds
        dmin, dmax = b if b is not None else (dtypes.min(dt), dtypes.max(dt))
    s = _Sum()  # every field is set below
    terms: dict[UOp, int] = {}
    occ: dict[UOp, int] = {}
    muls: dict[UOp, UOp] = {}
    k = nconst = skel = 0
    ok = exact
    rep = mods = False
    # depth first, sources left to right: the first source is followed in place, the others stacked
    stack: list[tuple[UOp, int]] = []
    n, c = u, 1
    if sub is not None:  # the root the node would be, counted as the loop below counts it
        skel = 1
        if sub.op is CONST:
            k = -sub.arg if neg else sub.arg
            nconst = 1
            skel = 2
        else:
            stack.append((sub, -1 if neg else 1))
    while True:
        op = n.op
        if op in _LINEAR and (op is not MUL or n.src[1].op is CONST):  # one set test for a leaf
            skel += 1
            if ok:
                lo, hi = n._ref.vrange or n._range()
                if lo == dmin and hi == dmax:
                    ok = False
            src = n.src
            if op is ADD or op is SUB:
                t = src[1]
                if t.op is CONST:  # a constant adds to k in any order: no need to stack it
                    k += t.arg * c if op is ADD else -t.arg * c
                    nconst += 1
                    skel += 1
                else:
                    stack.append((t, c if op is ADD else -c))
            elif op is NEG:
                c = -c
            else:
                skel += 1
                if c == 1 or c == -1:
                    muls[src[0]] = n
                c = c * src[1].arg
            n = src[0]
            continue
        if op is CONST:
            k += c * n.arg
            nconst += 1
            skel += 1
        elif n in terms:
            terms[n] += c
            occ[n] = occ.get(n, 1) + 1
            rep = True
        else:
            terms[n] = c
            if op is MOD:
                mods = True
        if not stack:
            break
        n, c = stack.pop()
    if len(terms) > limit:  # terms only grow: the same answer as a test at each new base, once
        return None
    s.terms, s.occ, s.k, s.nconst, s.skel, s.exact, s.rep, s.mods = terms, occ, k, nconst, skel, ok and exact, rep, mods
    s.muls = muls
    return s


def _leaf(u: UOp) -> bool:
    """Not part of a linear skeleton: flattening stops here."""
    op = u.op
    return op not in _SKELETON or (op is MUL and u.src[1].op is not CONST)


_SKELETON = _LINEAR | {Ops.CONST}


_NO_MULS: dict[UOp, UOp] = {}  # read only


def _build(
    terms: list[tuple[UOp, int]],
    k: int,
    like: UOp,
    acc: UOp | None = None,
    muls: dict[UOp, UOp] | None = None,
    shape: list[int] | None = None,
) -> UOp:
    """sum(coeff * base) + k, constants last, negative coefficients as SUB, continuing the sum ``acc`` when
    one is given. For the scalar integer dtypes the new nodes get their value ranges as they are built
    (what ``_range`` gives them, without the post-order walk it would make later). ``muls``
    (see _Sum) has nodes base*m that are taken as they are where the sum has that term, not looked up.
    ``shape``, a list, gets the sum's skeleton size (what _flatten counts) and whether it is a
    fixed point of ``symbolic``: signed, every base of the sum's dtype, no NEG first (ADD of a NEG is rewritten)
    and every coefficient far from the dtype's edges."""
    if muls is None:
        muls = _NO_MULS
    dt = like.dtype
    bounds = dt._ibounds
    # coefficients within +/-lim are far from the dtype's edges
    lim = bounds[1] >> 1 if bounds is not None and dt.kind == "i" else 0
    settled = lim > 0
    skel = 0
    lo: ConstType = 0
    hi: ConstType = 0
    if acc is not None:
        if acc.dtype is not dt:
            bounds = None
        elif bounds is not None:
            lo, hi = acc._ref.vrange or acc._range()
    for b, c in terms:
        if c == 0:
            continue
        bd = b.dtype
        if bd is not dt:
            bounds = None  # mixed dtypes: ranges are left to _range
            settled = False
        if not -lim < c < lim:
            settled = False
        if acc is None:
            if c == 1:
                acc = b
                if bounds is not None:
                    lo, hi = b._ref.vrange or b._range()
                continue
            if (
                c != -1
                and (t := muls.get(b)) is not None
                and t.src[1].arg == c
                and t.dtype is bd
                and t.src[1].dtype is bd
            ):
                acc = t  # the node b*c, met in the flattened sum
                skel = 2
                if bounds is not None:
                    lo, hi = t._ref.vrange or t._range()
                continue
            if c == -1:
                skel = 1
                settled = False  # ADD of a NEG is rewritten
            else:
                skel = 2
            r = None
            if bounds is not None:
                lo, hi = b._ref.vrange or b._range()
                lo, hi = (-hi, -lo) if c == -1 else (lo * c, hi * c) if c > 0 else (hi * c, lo * c)
                if not bounds[0] <= lo <= hi <= bounds[1]:
                    lo, hi = bounds
                r = (lo, hi)
            acc = (
                new_uop(UOp, NEG, bd, (b,), None, r)
                if c == -1
                else new_uop(UOp, MUL, bd, (b, UOp.const(bd, c)), None, r)
            )
            continue
        m = c if c > 0 else -c
        skel += 1 if m == 1 else 3
        if m == 1:
            t = b
        elif (t := muls.get(b)) is None or t.src[1].arg != m or t.dtype is not bd or t.src[1].dtype is not bd:
            t = None  # not met: made below
        if bounds is None:
            if t is None:
                t = new_uop(UOp, MUL, bd, (b, UOp.const(bd, m)))
            acc = new_uop(UOp, ADD if c > 0 else SUB, acc.dtype, (acc, t))
            continue
        if t is not None:
            t0, t1 = t._ref.vrange or t._range()
        else:
            t0, t1 = b._ref.vrange or b._range()
            t0, t1 = t0 * m, t1 * m
            if not bounds[0] <= t0 <= t1 <= bounds[1]:
                t0, t1 = bounds
            t = new_uop(UOp, MUL, bd, (b, UOp.const(bd, m)), None, (t0, t1))
        lo, hi = (lo + t0, hi + t1) if c > 0 else (lo - t1, hi - t0)
        if not bounds[0] <= lo <= hi <= bounds[1]:
            lo, hi = bounds
        acc = new_uop(UOp, ADD if c > 0 else SUB, dt, (acc, t), None, (lo, hi))
    if acc is None:
        if shape is not None:
            shape += (1, 0)
        return like.const_like(k)
    # a constant that wraps to 0 is left out; one inside the dtype's range does not wrap (no truncate call)
    if bounds is not None and bounds[0] <= k <= bounds[1]:
        if k:
            lo, hi = lo + k, hi + k
            r = (lo, hi) if bounds[0] <= lo <= hi <= bounds[1] else bounds
            acc = new_uop(UOp, ADD, dt, (acc, UOp.const(dt, k)), None, r)
            skel += 2
    elif k and truncate(k, dt):
        acc = new_uop(UOp, ADD, acc.dtype, (acc, UOp.const(acc.dtype, k)))
        skel += 2
    if shape is not None:
        shape += (skel, settled)  # a bool is an int
    return acc


def _tree_size_upto(u: UOp, limit: int) -> int:
    """tree_size(u) if it is at most ``limit``, else some number above ``limit`` (a walk of the tree
    that stops early, cheaper than tree_size for the small expressions rules compare)."""
    todo = [u]
    for n in todo:  # each node's sources join the list it is read from: its length is the size so far
        todo += n.src
        if len(todo) > limit:
            return len(todo)
    return len(todo)


def _not_larger(new: UOp, old: UOp) -> bool:
    size = _tree_size_upto(old, 256)
    if size > 256:
        size = tree_size(old)
    return _tree_size_upto(new, size) <= size


# ----------------------------------------------------------------------------------------
# rule functions
# ----------------------------------------------------------------------------------------
def _fold_alu(x: UOp) -> UOp | None:
    return _fold_parts(x.op, x.dtype, x.src)


def _fold_parts(op: Ops, dt: DType, src: tuple[UOp, ...]) -> UOp | None:
    """The constant an ALU op of constant sources folds to, or None (see _fold_value)."""
    if dt.count != 1:
        return None
    if len(src) == 2:
        # two Python ints (not bools): what the ALU table computes, without its general dispatch
        a, b = src[0].arg, src[1].arg
        if a.__class__ is int and b.__class__ is int:
            if op in _CMP3 and src[0].dtype.kind in "iu":
                return UOp.const(dt, a < b if op is CMPLT else a != b if op is CMPNE else a == b)
            if dt._ibounds is not None:
                if op in _RING:
                    return UOp.const(
                        dt, a + b if op is ADD else a - b if op is SUB else a * b if op is MUL else max(a, b)
                    )
                if op is IDIV or op is MOD:
                    q = idiv(a, b)  # wraps in UOp.const: INT_MIN IDIV -1 == INT_MIN
                    return UOp.const(dt, q if op is IDIV else a - q * b if b else 0)
    v = _fold_value(op, dt, src)
    return None if v is None else UOp.const(dt, v)


_CMP3 = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
_RING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX})


def _fold_cast(x: UOp, c: UOp) -> UOp | None:
    return _fold_cast_parts(x.op, x.dtype, c)


def _fold_cast_parts(op: Ops, dt: DType, c: UOp) -> UOp | None:
    v = c.arg
    if op is CAST and (v.__class__ is int or v.__class__ is bool):
        # an int or bool to a scalar integer dtype that holds it: the value itself (what truncate gives)
        if (b := dt._ibounds) is not None and b[0] <= (v := v + 0) <= b[1]:
            return UOp.const(dt, v)
    if dt.count != 1:
        return None
    v = _cast_const(c.arg, c.dtype, dt) if op is CAST else _bitcast_const(c.arg, c.dtype, dt)
    return None if v is None else UOp.const(dt, v)


def _const_right(x: UOp) -> UOp | None:
    a, b = x.src
    if a.op is CONST and b.op is not CONST:
        return new_uop(UOp, x.op, x.dtype, (b, a), x.arg)
    return None


def _build_node(op: Ops, dt: DType, src: tuple[UOp, ...], arg: object, collect: bool = True) -> UOp:
    """The node simplify's walk rebuilds on new sources, with the first rules of symbolic_simple applied as
    it is made (folding constants, constants to the right): the node they would replace is never built.
    With ``collect`` (symbolic's walk), an integer sum that only _collect can rewrite is collected as it is
    rebuilt, so the node it replaces is never made either, and a sum it keeps is final at once."""
    if len(src) == 2:
        a, b = src
        if a.op is CONST:
            if b.op is not CONST:
                if op in _COMMUTATIVE:
                    src = (b, a)
            elif op in _ALU and (r := _fold_parts(op, dt, src)) is not None:
                return r
        elif collect and (op is ADD or op is SUB) and arg is None and a.dtype is dt and b.dtype is dt:
            ao, bo = a.op, b.op
            # the rules before _collect: x + 0, x - c, x - x, NEG sources (a is no constant here)
            if (
                ao is not NEG
                and bo is not NEG
                and (bo is not CONST or (op is ADD and b.arg != 0))
                and (op is ADD or a is not b)
                and dt._ibounds is not None
            ):
                r = _collect_sum(op, dt, a, b, None)
                if r.op is op and (s := r.src)[0] is a and s[1] is b:  # kept: a fixed point of every rule
                    if (memo := r._ref.memo) is None or memo[0] is not _FINAL[0]:
                        r._ref.memo = _FINAL
                    return r
                if r.op is CONST or ((memo := r._ref.memo) is not None and memo[0] is _FINAL[0]):
                    return r  # final, or known to the walk
                # a result the walk must still take apart (its new sources are not final): the plain node,
                # for the rules to rewrite as they would have
    elif len(src) == 1 and (op is CAST or op is BITCAST) and src[0].op is CONST:
        if (r := _fold_cast_parts(op, dt, src[0])) is not None:
            return r
    elif src and op in _ALU and all(s.op is CONST for s in src) and (r := _fold_parts(op, dt, src)) is not None:
        return r
    return new_uop(UOp, op, dt, src, arg)


def _build_simple(op: Ops, dt: DType, src: tuple[UOp, ...], arg: object) -> UOp:
    """symbolic_simple's build: _build_node without collecting sums (a rule of symbolic only)."""
    return _build_node(op, dt, src, arg, False)


_ALU = GroupOp.ALU
_COMMUTATIVE = GroupOp.Commutative


def _is_neg_zero(v: ConstType) -> bool:
    return isinstance(v, float) and v == 0 and math.copysign(1.0, v) < 0


def _add_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    v = c.arg
    if v == 0 and (x.dtype.kind != "f" or _is_neg_zero(v)):
        return a  # x + 0 (x + -0.0 is exact for floats; x + 0.0 is not for x = -0.0)
    return None


def _sub_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    v = c.arg
    if v == 0 and not _is_neg_zero(v):
        return a  # x - 0.0 is exact for every float, x - (-0.0) is not for x = -0.0
    if _is_int(x):
        return a + (-v)  # canonical: constants are added
    return None


def _mul_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    v = c.arg
    if v == 1:
        return a
    if v == -1 or (x.dtype.kind == "u" and v == dtypes.max(x.dtype)):
        return new_uop(UOp, NEG, x.dtype, (a,))
    if v == 0 and x.dtype.kind != "f":
        return c
    return None


def _idiv_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    if x.dtype.kind == "f":
        return None
    v = c.arg
    if v == 1:
        return a
    if v == 0:
        return c  # x IDIV 0 == 0
    if v == -1 and x.dtype.kind == "i":
        return new_uop(UOp, NEG, x.dtype, (a,))  # wraps like INT_MIN IDIV -1
    return None


def _mod_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    if x.dtype.kind != "f" and (c.arg == 1 or c.arg == 0 or (c.arg == -1 and x.dtype.kind == "i")):
        return x.const_like(0)
    return None


def _bitwise_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    v, dt = c.arg, x.dtype
    if dt.kind == "f":
        return None
    ones = True if dt.kind == "b" else truncate(-1, dt)
    op = x.op
    if op is AND:
        return a if v == ones else c if v == 0 else None
    if op is OR:
        return a if v == 0 else c if v == ones else None
    if op is XOR:
        return a if v == 0 else None
    return a if v == 0 else None  # SHL/SHR by 0


def _same_src(x: UOp, a: UOp) -> UOp | None:
    """Binary ops of a node with itself."""
    op = x.op
    if op is MAX or op is AND or op is OR:
        return a
    if x.src[0].dtype.kind == "f":
        return None  # NaN != NaN
    if op is SUB or op is XOR:
        return x.const_like(0)
    if op is CMPNE or op is CMPLT:
        return x.const_like(False)
    if op is CMPEQ:
        return x.const_like(True)
    if (op is IDIV or op is MOD) and (a.vmin > 0 or a.vmax < 0):
        return x.const_like(1 if op is IDIV else 0)
    return None


def _where(c: UOp, a: UOp, b: UOp) -> UOp | None:
    if a is b:
        return a
    if c.op is CONST:
        return a if c.arg else b
    if c.op is CMPNE and c.src[1].op is CONST and c.src[1].arg is True and c.src[0].dtype.kind == "b":
        return new_uop(UOp, WHERE, a.dtype, (c.src[0], b, a))  # where(not c, a, b) -> where(c, b, a)
    if a.op is CONST and b.op is CONST and a.dtype.kind == "b" and c.dtype.count == 1:
        if a.arg is True and b.arg is False:
            return c
        if a.arg is False and b.arg is True:
            return new_uop(UOp, CMPNE, c.dtype, (c, c.const_like(True)))
    return None


def _bool_cmp_const(x: UOp, a: UOp, c: UOp) -> UOp | None:
    """CMPNE/CMPEQ of a bool with a bool constant: b != False -> b, b == True -> b, not not b -> b."""
    if a.dtype.kind != "b" or x.dtype.count != 1:
        return None
    v = bool(c.arg)
    if (x.op is CMPNE) != v:  # b != False, b == True
        return a
    if x.op is CMPEQ:  # b == False -> not b
        return new_uop(UOp, CMPNE, x.dtype, (a, a.const_like(True)))
    # not b: fold double negation and negated integer comparisons
    if a.op is CMPNE and a.src[1].op is CONST and a.src[1].arg is True and a.src[0].dtype.kind == "b":
        return a.src[0]
    if a.op is CMPLT and _is_int(a.src[0]):
        l, r = a.src
        if r.op is CONST and r.arg > dtypes.min(r.dtype):  # not (l < d) -> d-1 < l
            return new_uop(UOp, CMPLT, x.dtype, (r.const_like(r.arg - 1), l))
        if l.op is CONST and l.arg < dtypes.max(l.dtype):  # not (d < r) -> r < d+1
            return new_uop(UOp, CMPLT, x.dtype, (r, l.const_like(l.arg + 1)))
    return None


def _range_fold(x: UOp) -> UOp | None:
    lo, hi = x._ref.vrange or x._range()
    if lo != hi:
        return None
    dt = x.dtype
    if dt.count != 1 or dt.kind == "f" or dt.kind == "v":
        return None
    if x.op in GroupOp.Comparison and x.src[0].dtype.kind == "f":
        return None  # float ranges are not rounded like the hardware rounds: no decisions from them
    return UOp.const(dt, lo)


def _neg_neg(x: UOp) -> UOp:
    return x


def _mul_neg(x: UOp, y: UOp, c: UOp) -> UOp | None:
    return y * (-c.arg) if c.arg != dtypes.min(c.dtype) or c.dtype.kind == "f" else None


def _add_neg(x: UOp, y: UOp) -> UOp:
    return new_uop(UOp, SUB, x.dtype, (x, y))


def _collect(x: UOp) -> UOp | None:
    """Collect like terms and constants of an integer sum, recombine (y//c)*c + y%c into y, and fold a sum
    whose range is one value. The range is asked of the node the rule returns: a sum that is rebuilt
    never needs its own (the rebuilt one's range is at least as narrow, and is known as it is built)."""
    dt = x.dtype
    if dt.count != 1 or (dt.kind != "i" and dt.kind != "u"):  # not _is_int(x), spelled out: the hottest rule
        lo, hi = x._ref.vrange or x._range()
        return UOp.const(dt, lo) if lo == hi and dt.count == 1 else None
    a, b = x.src
    return _collect_sum(x.op, dt, a, b, x)


def _collect_sum(op: Ops, dt: DType, a: UOp, b: UOp, x: UOp | None) -> UOp:
    """_collect of the integer sum ``x`` = op(a, b), or of that sum before it is built (``x`` None, a and b of
    dtype ``dt``: see _build_node). Returns the node the sum becomes, ``x`` itself (made now if it was not)
    when it is kept."""
    # x._ref.flat, a structural fact kept on the node: the bases of x's flattening when they are distinct,
    # with no constant and no (y//c, y%c) pair to recombine. Then x + c flattens to the same terms and
    # one constant, last; x +/- t*k, t a new base that is no IDIV or MOD, to distinct bases and no pair
    # (the pairs only involve IDIV and MOD bases). Nothing changes either way.
    ta = a._ref.flat
    if ta is not None:
        if b.op is CONST:
            if op is ADD:
                if x is None:
                    x = new_uop(UOp, op, dt, (a, b))
                lo, hi = x._ref.vrange or x._range()  # _kept(x), spelled out
                return UOp.const(dt, lo) if lo == hi else x
        else:
            bb = b.src[0] if b.op is MUL and b.src[1].op is CONST else b
            if bb not in ta and bb.op is not MOD and bb.op is not IDIV and _leaf(bb):
                t = ta.copy()
                t[bb] = 1
                if x is None:
                    x = new_uop(UOp, op, dt, (a, b))
                x._ref.flat = t
                return _kept(x)
    if a is not b:  # the common shapes, decided without flattening: y*k1 + z*k2, y*k + c, y - z ...
        ba = a.src[0] if a.op is MUL and a.src[1].op is CONST else a
        bb = b.src[0] if b.op is MUL and b.src[1].op is CONST else b
        ao, bo = ba.op, bb.op  # _leaf(ba) and _leaf(bb), spelled out
        leaf_a = ao not in _SKELETON or (ao is MUL and ba.src[1].op is not CONST)
        leaf_b = bo not in _SKELETON or (bo is MUL and bb.src[1].op is not CONST)
        if ba is not bb and leaf_a and (leaf_b or (b.op is CONST and op is ADD)):
            if not (ba.op is IDIV and bb.op is MOD) and not (ba.op is MOD and bb.op is IDIV):
                if x is None:
                    x = new_uop(UOp, op, dt, (a, b))
                if b.op is not CONST:
                    x._ref.flat = {ba: 1, bb: 1}  # two distinct bases that do not pair, no constant
                lo, hi = x._ref.vrange or x._range()  # _kept(x), spelled out: the most common return
                return UOp.const(dt, lo) if lo == hi else x
    like = a if x is None else x  # what _build takes the dtype from
    # (y + k1) + k2 and (y + k) +/- t*m, with y a sum as _build writes it and t a new base that pairs with
    # nothing: the rebuild below would give y's terms again in y's order, so y is continued, not rebuilt
    if a.op is ADD and a.src[1].op is CONST and a is not b:
        y = a.src[0]
        if b.op is CONST:
            if op is ADD and (st := _spine(y, None)) is not None:
                return _continued(like, y, [], a.src[1].arg + b.arg, st)
        else:
            bmul = b.op is MUL and b.src[1].op is CONST
            bb = b.src[0] if bmul else b
            if bb.op is not MOD and bb.op is not IDIV and _leaf(bb) and (st := _spine(y, bb)) is not None:
                co = b.src[1].arg if bmul else 1
                return _continued(like, y, [(bb, co if op is ADD else -co)], a.src[1].arg, st)
    f = _flatten(x, exact=False) if x is not None else _flatten(a, False, 48, b, op is SUB)
    if f is None:
        return _kept(x if x is not None else new_uop(UOp, op, dt, (a, b)))
    terms = f.terms
    changed = f.rep or f.nconst >= 2
    if f.mods:
        # (y//c)*(c*m) + (y%c)*m -> y*m: C's identity a == (a/b)*b + a%b holds for every sign
        divs: dict[tuple[UOp, ...], UOp] = {}
        for u in terms:  # a loop, not a comprehension: 3.11 makes a function call of one
            if u.op is IDIV and u.arg is None:
                divs[u.src] = u
        for u in list(terms):
            if u.op is MOD and u.src[1].op is CONST and terms.get(u):
                d = divs.get(u.src)
                if d is None or (d.dtype is not u.dtype and d.dtype != u.dtype):
                    continue
                m = terms[u]
                if terms.get(d) == m * u.src[1].arg:
                    y = u.src[0]
                    terms[u] = terms[d] = 0
                    terms[y] = terms.get(y, 0) + m
                    if y.op is IDIV and y.arg is None:
                        divs.setdefault(y.src, y)
                    changed = True
    const_last = op is ADD and b.op is CONST
    if not changed and not (f.nconst == 1 and not const_last):
        if x is None:
            x = new_uop(UOp, op, dt, (a, b))
        if f.nconst == 0:
            x._ref.flat = terms
        return _kept(x)
    shape: list[int] = []
    out = _build(list(terms.items()), f.k, like, None, f.muls, shape)
    new_skel, settled = shape
    if new_skel > f.skel:  # built before it is known to be no larger: it is, nearly always
        extra = sum(
            (f.occ.get(u, 1) - (1 if co else 0)) * tree_size(u) for u, co in terms.items() if not co or u in f.occ
        )
        if new_skel > f.skel + extra:
            return _kept(x if x is not None else new_uop(UOp, op, dt, (a, b)))
    if out.op is op and (s := out.src)[0] is a and s[1] is b:  # the sum rebuilt as it was
        return _kept(out)
    if out.op is not CONST:
        lo, hi = out._ref.vrange or out._range()
        if lo == hi:
            return UOp.const(dt, lo)
    if settled and ((memo := out._ref.memo) is None or memo[0] is not _FINAL[0]):
        out._ref.memo = _FINAL  # a fixed point of every rule: the walk need not offer it to them again
    return out


def _spine(y: UOp, new: UOp | None) -> bool | None:
    """None unless ``y`` is a sum exactly as _build writes it from its terms (a left spine of ADD/SUB of a
    base or base*m, m > 1, over a first base, NEG base or base*c) with no base ``new``; else whether its
    terms are settled ones (see _build's ``shape``)."""
    dt = y.dtype
    b = dt._ibounds
    lim = b[1] >> 1 if b is not None and dt.kind == "i" else 0
    ok = lim > 0
    n = y
    while True:
        op = n.op
        if op is ADD or op is SUB:
            t = n.src[1]
            if t.op is MUL and t.src[1].op is CONST:
                m = t.src[1].arg
                if m.__class__ is not int or m < 2:
                    return None
                if m >= lim:
                    ok = False
                t = t.src[0]
            if t is new or not _leaf(t):
                return None
            if t.dtype is not dt:
                ok = False
            n = n.src[0]
            continue
        if op is NEG:
            t, ok = n.src[0], False  # a NEG first is rewritten when something is added to it
        elif op is MUL and n.src[1].op is CONST:
            t = n.src[0]
            c = n.src[1].arg
            if c.__class__ is not int or -1 <= c <= 1:
                return None
            if not -lim < c < lim:
                ok = False
        else:
            t = n
        if t is new or not _leaf(t):
            return None
        return ok and t.dtype is dt


def _continued(x: UOp, y: UOp, extra: list[tuple[UOp, int]], k: int, settled: bool) -> UOp:
    """_collect's result for a sum whose terms are y's and then ``extra``, constant k (see _spine)."""
    out = _build(extra, k, x, y)
    if out.op is not CONST:
        lo, hi = out._ref.vrange or out._range()
        if lo == hi:
            return UOp.const(x.dtype, lo)
    if settled and extra:
        b, c = extra[0]
        lim = x.dtype._ibounds[1] >> 1  # type: ignore[index]  # settled: x's dtype is a signed integer one
        settled = b.dtype is x.dtype and -lim < c < lim
    if settled and ((memo := out._ref.memo) is None or memo[0] is not _FINAL[0]):
        out._ref.memo = _FINAL
    return out


def _kept(x: UOp) -> UOp:
    """What _collect returns for an integer sum it keeps: its constant if its range is one value, else the sum
    itself (which a matcher takes as a rule declining)."""
    lo, hi = x._ref.vrange or x._range()
    return UOp.const(x.dtype, lo) if lo == hi else x


def _split_terms(f: _Sum, c: int) -> tuple[list[tuple[UOp, int]], list[tuple[UOp, int]]]:
    q: list[tuple[UOp, int]] = []
    r: list[tuple[UOp, int]] = []
    for b, co in f.terms.items():
        if co == 0:
            continue
        if co % c == 0:
            q.append((b, co // c))
        else:
            r.append((b, co))
    return q, r


def _divmod(x: UOp, a: UOp, c: UOp) -> UOp | None:
    """IDIV/MOD of an integer expression by a constant, using value ranges (C semantics)."""
    dt = x.dtype
    if dt.count != 1 or (dt.kind != "i" and dt.kind != "u"):  # not _is_int(x), spelled out
        return None
    v = c.arg
    is_mod = x.op is MOD
    if v <= 0:
        if is_mod and v < 0 and v != dtypes.min(dt):
            return new_uop(UOp, MOD, dt, (a, c.const_like(-v)))  # C: x % -c == x % c
        return None
    lo, hi = a._ref.vrange or a._range()
    if is_mod:
        if -v < lo and hi < v:
            return a  # |a| < c: the remainder is a itself
        if lo >= v and lo // v == hi // v and _exact(a):
            return a + (-(lo // v) * v)  # one quotient bucket: subtract it
    ao = a.op
    if ao is x.op and a.src[1].op is CONST and a.src[1].arg > 0:
        c1 = a.src[1].arg
        if is_mod and c1 % v == 0:
            return new_uop(UOp, MOD, dt, (a.src[0], c))  # (y % (k*c)) % c
        if not is_mod and c1 * v <= dtypes.max(dt):
            return new_uop(UOp, IDIV, dt, (a.src[0], c.const_like(c1 * v)))  # (y // c1) // c
        return None
    if ao not in _LINEAR:
        return None
    f = _flatten(a)
    if f is None or not f.exact:
        return None
    g = gcd(v, f.k, *f.terms.values())
    if g > 1:
        # exact division of every term: (g*t) // (g*c) == t // c and (g*t) % (g*c) == (t % c) * g
        t = _build([(b, co // g) for b, co in f.terms.items()], f.k // g, a)
        if not is_mod:
            return t if v == g else new_uop(UOp, IDIV, dt, (t, c.const_like(v // g)))
        if v == g:
            return x.const_like(0)
        out = new_uop(UOp, MOD, dt, (t, c.const_like(v // g))) * g
        return out if _not_larger(out, x) else None
    qt, rt = _split_terms(f, v)
    if lo >= 0:
        kq, kr = divmod(f.k, v)  # kr in [0, c)
    elif hi <= 0:
        kq = -((-f.k) // v)
        kr = f.k - kq * v  # kr in (-c, 0]
    else:
        return None
    if not qt and kq == 0:
        return _divmod_factor(x, f, v) if lo >= 0 else None
    r = _build(rt, kr, a, None, f.muls)
    rlo, rhi = r._ref.vrange or r._range()
    if not _exact(r) or (lo >= 0 and rlo < 0) or (lo < 0 and rhi > 0):
        return None
    fits = -v < rlo and rhi < v
    if is_mod:
        out = r if fits else new_uop(UOp, MOD, dt, (r, c))
    else:
        qe = _build(qt, kq, a)
        out = qe if fits else qe + new_uop(UOp, IDIV, dt, (r, c))
    return out if _not_larger(out, x) else None


def _divmod_factor(x: UOp, f: _Sum, v: int) -> UOp | None:
    """IDIV/MOD by ``v`` of a nonnegative sum ``g*B + s`` where ``g`` divides ``v`` and the rest ``s`` stays in
    ``[0, g)``: ``a // v == B // (v/g)`` and ``a % v == (B % (v/g))*g + s``. The flat index of a row-major view,
    ``(row*W + col) // (H*W)`` with ``col < W``, becomes ``row // H``: its division leaves the inner loop."""
    dt = x.dtype
    for g in sorted({g for co in f.terms.values() if 1 < (g := gcd(v, co)) < v}, reverse=True):
        big = [(b, co // g) for b, co in f.terms.items() if co % g == 0]
        small = [(b, co) for b, co in f.terms.items() if co % g]
        if not big or not small:
            continue
        kb, ks = divmod(f.k, g)
        rest = _build(small, ks, x)
        rlo, rhi = rest._ref.vrange or rest._range()
        if rlo < 0 or rhi >= g or not _exact(rest):
            continue
        outer = _build(big, kb, x)
        q = new_uop(UOp, x.op, dt, (outer, x.src[1].const_like(v // g)))
        out = q if x.op is not MOD else q * g + rest
        return out if _not_larger(out, x) else None
    return None


def _cmp_const(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """Integer comparisons with a constant side: move constants and common factors across."""
    ad = a.dtype
    if ad.count != 1 or (ad.kind != "i" and ad.kind != "u") or x.dtype.count != 1:  # _is_int(a), spelled out
        return None
    op = x.op
    if op is not CMPLT:
        # ring identity: a + k != d  <=>  a != d - k
        if b.op is CONST and a.op is ADD and a.src[1].op is CONST:
            return new_uop(UOp, op, x.dtype, (a.src[0], b.const_like(b.arg - a.src[1].arg)))
        return None
    left_const = a.op is CONST
    e, d = (b, a.arg) if left_const else (a, b.arg)
    if e.op not in _LINEAR:
        return None
    f = _flatten(e)
    if f is None or not f.exact or not f.terms:
        return None
    g = gcd(*f.terms.values())  # > 0: terms are nonzero... unless they cancel
    if g == 0 or (g == 1 and f.k == 0):
        return None
    t = _build([(bb, co // g) for bb, co in f.terms.items()], 0, e)
    if not _exact(t):
        return None
    num = d - f.k  # e == g*t + k with g > 0
    if left_const:  # d < g*t + k  <=>  floor((d-k)/g) < t
        bnd = num // g
        out = new_uop(UOp, CMPLT, x.dtype, (e.const_like(bnd), t)) if _fits(bnd, e.dtype) else None
    else:  # g*t + k < d  <=>  t < ceil((d-k)/g)
        bnd = -((-num) // g)
        out = new_uop(UOp, CMPLT, x.dtype, (t, e.const_like(bnd))) if _fits(bnd, e.dtype) else None
    if out is None or out is x:
        return None
    return out if _not_larger(out, x) else None


def _fits(v: int, dt: DType) -> bool:
    return dtypes.min(dt) <= v <= dtypes.max(dt)


def _max_range(x: UOp) -> UOp | None:
    a, b = x.src
    ad = a.dtype
    if ad.count != 1 or (ad.kind != "i" and ad.kind != "u"):  # not _is_int(a), spelled out
        return None
    (a0, a1), (b0, b1) = a._ref.vrange or a._range(), b._ref.vrange or b._range()
    if a0 >= b1:
        return a
    if b0 >= a1:
        return b
    return None


def _mul_mul(x: UOp, y: UOp, c1: UOp, c2: UOp) -> UOp | None:
    return y * (c1.arg * c2.arg) if _is_int(x) else None


# ----------------------------------------------------------------------------------------
# the rule sets
# ----------------------------------------------------------------------------------------
_cv = UPat.cvar("c")
_bin_with_const = (UPat.var("a"), _cv)

symbolic_simple = PatternMatcher(
    [
        # constant folding (_build_node applies these and the next as the walk rebuilds a node)
        (UPat(GroupOp.ALU, src=UPat(Ops.CONST), name="x"), _fold_alu),
        (UPat((Ops.CAST, Ops.BITCAST), src=(_cv,), name="x"), _fold_cast),
        # canonical order: constants to the right of commutative ops
        (UPat(GroupOp.Commutative, src=(UPat(Ops.CONST), UPat()), name="x"), _const_right),
        # identities with a constant
        (UPat(Ops.ADD, src=(UPat.var("a"), UPat(Ops.CONST, arg=0, name="c")), name="x"), _add_const),
        (UPat(Ops.SUB, src=_bin_with_const, name="x"), _sub_const),
        (UPat(Ops.MUL, src=_bin_with_const, name="x"), _mul_const),
        (UPat(Ops.IDIV, src=_bin_with_const, name="x"), _idiv_const),
        (UPat(Ops.MOD, src=_bin_with_const, name="x"), _mod_const),
        (UPat(Ops.FDIV, src=(UPat.var("a"), UPat.const(None, 1.0))), lambda a: a),
        (UPat((Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR), src=_bin_with_const, name="x"), _bitwise_const),
        (UPat((Ops.CMPNE, Ops.CMPEQ), src=_bin_with_const, name="x"), _bool_cmp_const),
        # a node with itself
        (UPat(GroupOp.Binary, src=(UPat.var("a"), UPat.var("a")), name="x"), _same_src),
        # negation
        (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("x"),)),)), _neg_neg),
        (UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.NEG, src=(UPat.var("y"),))]), _add_neg),
        (UPat(Ops.SUB, src=(UPat.var("x"), UPat(Ops.NEG, src=(UPat.var("y"),))), name="s"), lambda s, x, y: x + y),
        (UPat(Ops.MUL, src=(UPat(Ops.NEG, src=(UPat.var("y"),)), _cv), name="x"), _mul_neg),
        # select
        (UPat(Ops.WHERE, src=(UPat.var("c"), UPat.var("a"), UPat.var("b"))), _where),
    ],
    build=_build_simple,
)

symbolic = PatternMatcher(
    symbolic_simple.rules
    + [
        # integer/bool nodes whose value range is a single value
        # (ADD/SUB: _collect folds their ranges first, one rule call per node)
        (UPat((GroupOp.ALU | {Ops.CAST}) - {Ops.ADD, Ops.SUB}, dtype=_INTS_BOOL, name="x"), _range_fold),
        (UPat(Ops.MUL, src=(UPat(Ops.MUL, src=(UPat.var("y"), UPat.cvar("c1"))), UPat.cvar("c2")), name="x"), _mul_mul),
        (UPat((Ops.ADD, Ops.SUB), dtype=_INTS_BOOL, name="x"), _collect),
        (UPat((Ops.IDIV, Ops.MOD), dtype=_INTS, src=_bin_with_const, name="x"), _divmod),
        (UPat((Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ), src=(UPat.var("a"), UPat(Ops.CONST, name="b")), name="x"), _cmp_const),
        (UPat(Ops.CMPLT, src=(UPat(Ops.CONST, name="a"), UPat.var("b")), name="x"), _cmp_const),
        (UPat(Ops.MAX, dtype=_INTS, name="x"), _max_range),
    ],
    build=_build_node,
)


# what simplify's walk marks a finished node with (see graph_rewrite's remember): a rule's result that is
# known to be a fixed point carries it, so the walk takes it as final without matching it again
_FINAL = (symbolic.memo_keys[1], None)


def simplify(u: UOp) -> UOp:
    """``u`` with every rule of ``symbolic`` applied to a fixed point (bottom-up). The rules are pure, so
    each node keeps its result: a subexpression shared between calls is simplified once."""
    return _simplify(u)


_simplify = remembering_rewrite(symbolic, bottom_up=True)
install_simplifier(_simplify)
