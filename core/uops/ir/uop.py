"""The immutable, hash-consed UOp: one node of every graph in uops.

Building the same (op, dtype, src, arg) twice returns the same object, from any thread, so
equality is identity and hashing is by address. The cache holds nodes weakly: a node nobody references
is freed. Nothing here recurses on graph depth.
"""

from __future__ import annotations

import math
import weakref
from _weakref import _remove_dead_weakref  # type: ignore[attr-defined]
from collections.abc import Callable, Iterator
from typing import Any

from uops.dtypes import DType, PtrDType, dtypes, truncate
from uops.errors import UopsError
from uops.ir.alu import eval_scalar, idiv
from uops.ir.ops import AxisType, GroupOp, Ops


class _Ref(weakref.ref):
    """A node's cache entry: a weak reference that remembers its cache key (C-level construction, unlike
    weakref.KeyedRef), and the node's lazily known facts. The facts live here, reached by the node's ``_ref``,
    because the entry takes plain attribute stores: the node's own ``__setattr__`` refuses them, and a slot
    setter call costs ~1,000 instructions in 3.11."""

    __slots__ = ("key", "vrange", "flat", "memo")
    key: tuple
    # the node's value range (see UOp._range); None until it is known
    vrange: tuple[ConstType, ConstType] | None
    # symbolic's fact about an integer sum (see symbolic._collect); None until it is known
    flat: dict[UOp, int] | None
    # (key, result) of the last remembering graph_rewrite that reached this node; result None: itself
    memo: tuple[object, UOp | None] | None


# the hash-consing cache: key -> weak reference to the node; a dead node's entry removes itself.
# Thread safety rests on single dict operations being atomic (under the GIL, and per-dict locks in
# free-threaded builds): lookups are plain gets, inserts are setdefault, removals delete only dead entries.
_cache: dict[tuple, _Ref] = {}
_setdefault = _cache.setdefault


def _remove_dead(wr: _Ref, _cache: dict[tuple, _Ref] = _cache) -> None:
    _remove_dead_weakref(_cache, wr.key)  # deletes the entry only if it still holds a dead reference


ConstType = bool | int | float
_BOOL_TOK = dtypes.bool._tok

# Ops members by module name: reading ``Ops.X`` at run time goes through EnumType's __getattr__ hook
# (Python 3.11), which costs more than building the node it names
_ADD, _SUB, _MUL, _MAX, _IDIV, _MOD, _FDIV = Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.FDIV
_NEG, _CMPLT, _CMPNE, _CMPEQ, _AND, _OR, _XOR = Ops.NEG, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR
_SHL, _SHR, _WHERE, _CAST, _BITCAST = Ops.SHL, Ops.SHR, Ops.WHERE, Ops.CAST, Ops.BITCAST
_EXP2, _LOG2, _SIN, _SQRT, _RECIPROCAL, _TRUNC = Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC
_CONST, _VCONST, _DEFINE_VAR, _RANGE, _SINK = Ops.CONST, Ops.VCONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.SINK
_INDEX, _LOAD, _STORE, _REDUCE, _END, _GEP = Ops.INDEX, Ops.LOAD, Ops.STORE, Ops.REDUCE, Ops.END, Ops.GEP
_COMPARISON = GroupOp.Comparison


class _UOpFields:
    """A UOp's storage. A new node is filled in as one of these, with plain attribute stores (UOp's
    ``__setattr__`` refuses them, and a setter call per field costs more than the rest of a new
    node), and then becomes a UOp before anyone else can see it."""

    # _ref: the node's cache entry, which also holds its lazily known facts
    __slots__ = ("op", "dtype", "src", "arg", "_ref", "__weakref__")


class UOp(_UOpFields):
    __slots__ = ()
    op: Ops
    dtype: DType
    src: tuple[UOp, ...]
    arg: Any
    _ref: _Ref

    def __new__(
        cls,
        op: Ops,
        dtype: DType = dtypes.void,
        src: tuple[UOp, ...] = (),
        arg: Any = None,
        _known_range: tuple[ConstType, ConstType] | None = None,
    ) -> UOp:
        # _known_range (internal): the node's value range, proven by the caller (what _range gives), kept
        # when the node has none yet: a new node takes it with the other fields, no setter call
        # the dtype enters the key as its token (DType._tok): hashing a DType is a Python-level call. A None
        # arg (most nodes) is tested first: it skips the float test's __class__ read
        try:
            key = (
                op,
                dtype._tok,
                src,
                arg if arg is None or arg.__class__ is not float or arg != 0.0 and arg == arg else _float_key(arg),
            )
            ref = _cache.get(key)
        except TypeError:
            raise TypeError(f"UOp arg must be hashable, got {type(arg).__name__} for {op}") from None
        except AttributeError:
            if isinstance(dtype, DType):
                raise
            raise TypeError(f"UOp dtype must be a DType, got {type(dtype).__name__} for {op}") from None
        if ref is not None and (hit := ref()) is not None:
            if _known_range is not None and ref.vrange is None:
                ref.vrange = _known_range
            return hit
        node: Any = _UOpFields()  # the class call allocates faster than object.__new__(cls)
        node.op = op
        node.dtype = dtype
        node.src = src
        node.arg = arg
        node._ref = ref = _Ref(node, _remove_dead)
        node.__class__ = cls
        ref.key = key
        ref.vrange = _known_range
        ref.flat = None
        ref.memo = None
        # insert-if-absent is atomic: a thread that built the same node a moment earlier wins, and we
        # return its node. A dead entry (its node freed, its callback not yet run) is removed and we retry.
        while (cur := _setdefault(key, ref)) is not ref:
            if (hit := cur()) is not None:
                if _known_range is not None and hit._ref.vrange is None:
                    hit._ref.vrange = _known_range
                return hit
            _remove_dead_weakref(_cache, key)
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"UOp is immutable; use .replace({name}=...) to make a new node")

    def __reduce__(self) -> Any:
        raise TypeError("UOps are not pickled; serialise programs with ProgramSpec.to_dict()")

    # identity equality (inherited object.__eq__/__hash__) is what hash-consing buys us

    # ----- construction helpers -----
    def replace(self, **kwargs: Any) -> UOp:
        return _new_uop(
            UOp,
            kwargs.get("op", self.op),
            kwargs.get("dtype", self.dtype),
            kwargs.get("src", self.src),
            kwargs.get("arg", self.arg),
        )

    @staticmethod
    def const(dtype: DType, value: ConstType) -> UOp:
        vc = value.__class__
        if vc is int and (b := dtype._ibounds) is not None and b[0] <= value <= b[1]:
            # an int the scalar integer dtype holds (what truncate returns): the cache lookup of __new__ for
            # this key, without the call, as constants are built often
            ref = _cache.get((_CONST, dtype._tok, (), value))
            if ref is not None and (hit := ref()) is not None:
                return hit
            return _new_uop(UOp, _CONST, dtype, (), value)
        if vc is bool and dtype._tok == _BOOL_TOK:  # a comparison's folded value
            ref = _cache.get((_CONST, _BOOL_TOK, (), value))
            if ref is not None and (hit := ref()) is not None:
                return hit
            return _new_uop(UOp, _CONST, dtype, (), value)
        if dtype.count > 1:
            return _new_uop(UOp, _VCONST, dtype, (), (truncate(value, dtype.scalar()),) * dtype.count)
        return _new_uop(UOp, _CONST, dtype, (), truncate(value, dtype))

    @staticmethod
    def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.int32) -> UOp:
        if min_val > max_val:
            raise ValueError(f"variable {name!r}: min {min_val} > max {max_val}")
        return _new_uop(UOp, _DEFINE_VAR, dtype, (), (name, min_val, max_val))

    @staticmethod
    def range(end: UOp | int, axis: int, kind: AxisType = AxisType.LOOP) -> UOp:
        end_u = end if isinstance(end, UOp) else UOp.const(dtypes.index, end)
        return _new_uop(UOp, _RANGE, end_u.dtype, (end_u,), (axis, kind))

    @staticmethod
    def sink(*srcs: UOp, arg: Any = None) -> UOp:
        return _new_uop(UOp, _SINK, dtypes.void, srcs, arg)

    def const_like(self, value: ConstType) -> UOp:
        return UOp.const(self.dtype, value)

    def _ufix(self, x: UOp | ConstType) -> UOp:
        if isinstance(x, UOp):
            return x
        if not isinstance(x, (bool, int, float)):
            raise TypeError(f"cannot combine a UOp with {type(x).__name__}")
        return UOp.const(self.dtype, x)

    def alu(self, op: Ops, *srcs: UOp | ConstType) -> UOp:
        if len(srcs) == 1:  # the binary operators
            x = srcs[0]
            s: tuple[UOp, ...] = (self, x if isinstance(x, UOp) else self._ufix(x))
        else:
            s = (self, *(self._ufix(x) for x in srcs))
        if op is _WHERE:
            out = s[1].dtype
        elif op in _COMPARISON:
            out = dtypes.bool.vec(self.dtype.count)
        else:
            out = self.dtype
        return _new_uop(UOp, op, out, s)

    def __add__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_ADD, x)

    def __radd__(self, x: ConstType) -> UOp:
        return self._ufix(x).alu(_ADD, self)

    def __sub__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_SUB, x)

    def __rsub__(self, x: ConstType) -> UOp:
        return self._ufix(x).alu(_SUB, self)

    def __mul__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_MUL, x)

    def __rmul__(self, x: ConstType) -> UOp:
        return self._ufix(x).alu(_MUL, self)

    def __floordiv__(self, x: UOp | ConstType) -> UOp:
        """C-style division (truncates toward zero), as in every backend language."""
        return self.alu(_IDIV, x)

    def __rfloordiv__(self, x: ConstType) -> UOp:
        return self._ufix(x).alu(_IDIV, self)

    def __truediv__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_FDIV, x)

    def __mod__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_MOD, x)

    def __rmod__(self, x: ConstType) -> UOp:
        return self._ufix(x).alu(_MOD, self)

    def __neg__(self) -> UOp:
        return self.alu(_NEG)

    def __lt__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_CMPLT, x)

    def __gt__(self, x: UOp | ConstType) -> UOp:
        return self._ufix(x).alu(_CMPLT, self)

    def __and__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_AND, x)

    def __or__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_OR, x)

    def __xor__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_XOR, x)

    def __lshift__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_SHL, x)

    def __rshift__(self, x: UOp | ConstType) -> UOp:
        return self.alu(_SHR, x)

    def ne(self, x: UOp | ConstType) -> UOp:
        return self.alu(_CMPNE, x)

    def eq(self, x: UOp | ConstType) -> UOp:
        return self.alu(_CMPEQ, x)

    def logical_not(self) -> UOp:
        return self.ne(True)

    def maximum(self, x: UOp | ConstType) -> UOp:
        return self.alu(_MAX, x)

    def minimum(self, x: UOp | ConstType) -> UOp:
        return -((-self).maximum(-self._ufix(x)))

    def where(self, a: UOp | ConstType, b: UOp | ConstType) -> UOp:
        a_u = a if isinstance(a, UOp) else (b.const_like(a) if isinstance(b, UOp) else UOp.const(dtypes.float32, a))
        b_u = b if isinstance(b, UOp) else a_u.const_like(b)
        return _new_uop(UOp, _WHERE, a_u.dtype, (self, a_u, b_u))

    def cast(self, dtype: DType) -> UOp:
        return self if dtype == self.dtype else _new_uop(UOp, _CAST, dtype, (self,))

    def bitcast(self, dtype: DType) -> UOp:
        if dtype.nbytes != self.dtype.nbytes:
            raise ValueError(f"bitcast {self.dtype} -> {dtype}: sizes differ ({self.dtype.nbytes} vs {dtype.nbytes})")
        return _new_uop(UOp, _BITCAST, dtype, (self,))

    def exp2(self) -> UOp:
        return self.alu(_EXP2)

    def log2(self) -> UOp:
        return self.alu(_LOG2)

    def sin(self) -> UOp:
        return self.alu(_SIN)

    def sqrt(self) -> UOp:
        return self.alu(_SQRT)

    def reciprocal(self) -> UOp:
        return self.alu(_RECIPROCAL)

    def trunc(self) -> UOp:
        return self.alu(_TRUNC)

    def index(self, idx: UOp, gate: UOp | None = None) -> UOp:
        src = (self, idx) if gate is None else (self, idx, gate)
        return _new_uop(UOp, _INDEX, self.dtype, src)

    def load(self, alt: UOp | None = None) -> UOp:
        base = self.dtype.base if isinstance(self.dtype, PtrDType) else self.dtype
        return _new_uop(UOp, _LOAD, base, (self,) if alt is None else (self, alt))

    def store(self, value: UOp) -> UOp:
        return _new_uop(UOp, _STORE, dtypes.void, (self, value))

    def reduce(self, *ranges: UOp, op: Ops = Ops.ADD) -> UOp:
        return _new_uop(UOp, _REDUCE, self.dtype, (self, *ranges), op)

    def end(self, *ranges: UOp) -> UOp:
        return _new_uop(UOp, _END, dtypes.void, (self, *ranges))

    # ----- graph walking -----
    def toposort(
        self, gate: Callable[[UOp], bool] | None = None, sources: Callable[[UOp], tuple[UOp, ...]] | None = None
    ) -> list[UOp]:
        """Every node reachable from self, each after its sources. Iterative: deep graphs are fine. ``gate``
        says which nodes' sources are entered; ``sources`` stands for ``.src`` (a walk over another edge set)."""
        order: list[UOp] = []
        seen: set[UOp] = set()
        stack: list[tuple[UOp, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            if gate is None or gate(node):
                for s in reversed(node.src if sources is None else sources(node)):
                    if s not in seen:
                        stack.append((s, False))
        return order

    def simplify(self) -> UOp:
        """This graph with the symbolic rules applied to a fixed point (`uops.ir.symbolic.simplify`).

        The rules are built from UOps, so their module sits above this one and installs itself here
        (`install_simplifier`); ``uops.ir`` loads it with the package, so it is always in place.
        """
        if _simplifier is None:
            raise UopsError("UOp.simplify: uops.ir.symbolic has not installed its rules (it loads with uops.ir)")
        return _simplifier(self)

    def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
        """Replace nodes by identity (no pattern matching), rebuilding their users; keys are not entered."""
        if not mapping:
            return self
        memo: dict[UOp, UOp] = {}
        for u in self.toposort(gate=lambda x: x not in mapping):
            if u in mapping:
                memo[u] = mapping[u]
                continue
            new_src = tuple([memo[s] for s in u.src])
            memo[u] = u if all(a is b for a, b in zip(new_src, u.src)) else _new_uop(UOp, u.op, u.dtype, new_src, u.arg)
        return memo[self]

    @property
    def ranges(self) -> list[UOp]:
        return [u for u in self.toposort() if u.op is _RANGE]

    @property
    def variables(self) -> list[UOp]:
        return sorted((u for u in self.toposort() if u.op is _DEFINE_VAR), key=lambda v: v.arg[0])

    # ----- value ranges -----
    @property
    def vmin(self) -> ConstType:
        return self._range()[0]

    @property
    def vmax(self) -> ConstType:
        return self._range()[1]

    def _range(self) -> tuple[ConstType, ConstType]:
        ref = self._ref
        r = ref.vrange
        if r is not None:
            return r
        src = self.src
        if len(src) == 2:
            ra, rb = src[0]._ref.vrange, src[1]._ref.vrange
            if ra is not None and rb is not None:  # the common case while rewriting: no walk needed
                op = self.op
                if (bounds := self.dtype._ibounds) is not None:
                    # scalar integers, the common ops: the answers of _compute_range_general, cheaper.
                    # Anything unusual (a float or out-of-range bound, a wide multiplier) is left to it.
                    (a0, a1), (b0, b1) = ra, rb
                    if op is _ADD:
                        lo, hi = a0 + b0, a1 + b1
                    elif op is _MUL and b0 == b1 and b0 >= 0:
                        lo, hi = a0 * b0, a1 * b0
                        if lo == hi:
                            hi = lo  # max() of equal corners keeps the first
                    elif op is _MOD and b0 > 0 and a0 >= 0:
                        m = b1 - 1  # min() and max() are spelled out: they take the slow call path in 3.11
                        r = ref.vrange = (a0 if a1 < b0 else 0), (m if m < a1 else a1)
                        return r
                    elif (
                        op is _IDIV
                        and b0 == b1
                        and b0 > 0
                        and a0 >= 0
                        and a0.__class__ is int
                        and a1.__class__ is int
                        and b0.__class__ is int
                    ):
                        lo, hi = a0 // b0, a1 // b0
                    elif op is _SUB:
                        lo, hi = a0 - b1, a1 - b0
                    elif op is _MAX:
                        lo, hi = (b0 if b0 > a0 else a0), (b1 if b1 > a1 else a1)
                    else:
                        lo = hi = bounds[0] - 1  # no fast answer: out of the bounds, so left to the general code
                    if bounds[0] <= lo and hi <= bounds[1]:  # lo <= hi: the sources' ranges are ordered
                        r = ref.vrange = lo, hi
                        return r
                r = ref.vrange = _compute_range_general(self)
                return r
        for s in src:
            if s._ref.vrange is None:
                break
        else:
            r = ref.vrange = _compute_range_general(self)
            return r
        # post-order over the nodes whose range is unknown (a rule's new subexpression, a fresh graph)
        stack = [self]
        while stack:
            node = stack[-1]
            if node._ref.vrange is not None:
                stack.pop()
                continue
            n = len(stack)
            for s in node.src:
                if s._ref.vrange is None:
                    stack.append(s)
            if len(stack) > n:
                continue
            stack.pop()
            node._range()  # its sources are known: no walk
        return ref.vrange  # type: ignore[return-value]

    # ----- printing -----
    def __repr__(self) -> str:
        return _short_repr(self)

    def pretty(self) -> str:
        """A numbered listing, one node a line, sources by number: readable for graphs of any depth."""
        lines = []
        num: dict[UOp, int] = {}
        for i, u in enumerate(self.toposort()):
            num[u] = i
            srcs = ", ".join(f"%{num[s]}" for s in u.src)
            arg = "" if u.arg is None else f" {_fmt_arg(u.arg)}"
            lines.append(f"%{i:<4} {u.op.name:<14} {u.dtype!r:<28} [{srcs}]{arg}")
        return "\n".join(lines)

    def __iter__(self) -> Iterator[UOp]:
        raise TypeError("a UOp is not iterable; use .src or .toposort()")

    def __bool__(self) -> bool:
        raise TypeError(f"the truth value of a UOp ({self.op}) is not known at build time; use .where or simplify")


# UOp's constructor without the class call around it, for the places that build many nodes
#: the constructor without the class call's lookups, for the rewrite walks' hot paths: ``new_uop(UOp, op, ...)``
new_uop = _new_uop = UOp.__new__

#: `uops.ir.symbolic.simplify` once that module has loaded: UOp.simplify's rules live above UOp
_simplifier: Callable[[UOp], UOp] | None = None


def install_simplifier(simplify: Callable[[UOp], UOp]) -> None:
    """How `uops.ir.symbolic` gives ``UOp.simplify`` its rules without this module importing it."""
    global _simplifier
    _simplifier = simplify


def _float_key(x: float) -> tuple[type, str]:
    """-0.0 == 0.0 and nan != nan, so these floats are keyed by their spelling (a NaN's sign included)."""
    neg = math.copysign(1.0, x) < 0
    return (float, ("-nan" if neg else "nan") if x != x else "-0.0" if neg else "0.0")


def _fmt_arg(arg: Any) -> str:
    if isinstance(arg, bytes):
        return f"<{len(arg)} bytes>"
    if isinstance(arg, str) and len(arg) > 60:
        return repr(arg[:57] + "...")
    if isinstance(arg, UOp):
        return arg.op.name
    return repr(arg)


def _short_repr(u: UOp) -> str:
    """A one-line repr for small graphs, falling back to a summary for deep ones."""
    n = 0
    parts: list[str] = []
    stack: list[UOp | str] = [u]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            parts.append(x)
            continue
        n += 1
        if n > 40:
            return f"UOp({u.op}, {u.dtype!r}, <{len(u.src)} srcs>, arg={_fmt_arg(u.arg)}, ...)"
        head = f"UOp({x.op}, {x.dtype!r}"
        if not x.src:
            parts.append(f"{head}, arg={_fmt_arg(x.arg)})")
            continue
        parts.append(f"{head}, src=(")
        stack.append(f"), arg={_fmt_arg(x.arg)})" if x.arg is not None else "))")
        for i, s in enumerate(reversed(x.src)):
            stack.append(s)
            if i < len(x.src) - 1:
                stack.append(", ")
    return "".join(parts)


# ----- value range rules -----
def _clamp(lo: float, hi: float, dt: DType) -> tuple[ConstType, ConstType]:
    dmin, dmax = dtypes.min(dt), dtypes.max(dt)
    if (
        lo < dmin
        or hi > dmax
        or (isinstance(lo, float) and math.isnan(lo))
        or (isinstance(hi, float) and math.isnan(hi))
    ):
        return dmin, dmax  # may wrap: nothing better is known
    return lo, hi


# the general path's op tests read module names (the Ops aliases above and these sets)
_RANGE_LIKE = frozenset({Ops.RANGE, Ops.SPECIAL})
_FLOAT_RANGED = frozenset({_ADD, _MUL, _NEG, _MAX, _SUB})
_RING = frozenset({_ADD, _SUB, _MUL, _MAX})
_ALU = GroupOp.ALU


def _compute_range_general(u: UOp) -> tuple[ConstType, ConstType]:
    """A node's value range from its sources' (known). UOp._range answers the common integer cases itself."""
    dt = u.dtype
    op = u.op
    if isinstance(dt, PtrDType) or dt.kind == "v" or dt.count > 1:
        return dtypes.min(dt.scalar()) if dt.kind != "v" else 0, dtypes.max(dt.scalar()) if dt.kind != "v" else 0
    if op is _CONST:
        return u.arg, u.arg
    if op is _DEFINE_VAR:
        return u.arg[1], u.arg[2]
    if op in _RANGE_LIKE:
        return 0, max(0, u.src[0].vmax - 1)
    if not u.src:
        return dtypes.min(dt), dtypes.max(dt)
    s = u.src
    if op is _WHERE:
        c = s[0]
        if c.vmin == c.vmax:
            return s[1]._range() if c.vmin else s[2]._range()
        return min(s[1].vmin, s[2].vmin), max(s[1].vmax, s[2].vmax)
    if op is _CAST:
        lo, hi = s[0]._range()
        if dtypes.is_float(dt):
            return float(lo), float(hi)
        if dtypes.is_bool(dt):
            return (False, True) if lo <= 0 <= hi else (True, True)
        if dtypes.is_float(s[0].dtype):
            if math.isinf(lo) or math.isinf(hi) or math.isnan(lo) or math.isnan(hi):
                return dtypes.min(dt), dtypes.max(dt)
            lo, hi = math.trunc(lo), math.trunc(hi)
        return _clamp(int(lo), int(hi), dt)
    if dtypes.is_float(dt) and op not in _FLOAT_RANGED:
        return -math.inf, math.inf
    if op in _COMPARISON:
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        if op is _CMPLT:
            if a1 < b0:
                return True, True
            if a0 >= b1:
                return False, False
        elif a1 < b0 or b1 < a0:  # disjoint
            return (True, True) if op is _CMPNE else (False, False)
        elif a0 == a1 == b0 == b1:
            return (False, False) if op is _CMPNE else (True, True)
        return False, True
    if op is _NEG:
        lo, hi = s[0]._range()
        if dtypes.is_bool(dt):
            return False, True
        return _clamp(-hi, -lo, dt)
    if op in _RING:
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        try:
            if op is _ADD:
                lo, hi = a0 + b0, a1 + b1
            elif op is _SUB:
                lo, hi = a0 - b1, a1 - b0
            elif op is _MAX:
                lo, hi = max(a0, b0), max(a1, b1)
            else:
                corners = [x * y for x in (a0, a1) for y in (b0, b1)]
                if any(isinstance(c, float) and math.isnan(c) for c in corners):
                    return -math.inf, math.inf
                lo, hi = min(corners), max(corners)
        except TypeError:
            return dtypes.min(dt), dtypes.max(dt)
        if dtypes.is_bool(dt):
            return bool(lo), bool(hi)
        if dtypes.is_float(dt):
            return lo, hi
        return _clamp(lo, hi, dt)
    if op is _IDIV and dtypes.is_int(dt):
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        if b0 > 0 or b1 < 0:
            qs = [idiv(int(x), int(y)) for x in (a0, a1) for y in (b0, b1)]
            return _clamp(min(qs), max(qs), dt)
    if op is _MOD and dtypes.is_int(dt):
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        if b0 > 0:
            m = b1 - 1
            if a0 >= 0:
                return (a0 if a1 < b0 else 0), min(a1, m)
            if a1 <= 0:
                return max(a0, -m), 0
            return -m, m
    if op in _ALU:
        # every source a single known integer value: the op's value itself, from the ALU table
        vals = []
        for x in s:
            lo, hi = x._range()
            if lo != hi or x.dtype.kind == "f":
                break
            vals.append(lo)
        else:
            v = eval_scalar(op, dt, tuple(vals), s[-1].dtype)
            if v is not None:
                return v, v
    if op is _AND:
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        if dtypes.is_bool(dt):
            return bool(a0 and b0), bool(a1 and b1)
        if a0 >= 0 and b0 >= 0:
            return 0, min(a1, b1)
    if op is _OR and dtypes.is_bool(dt):
        (a0, a1), (b0, b1) = s[0]._range(), s[1]._range()
        return bool(a0 or b0), bool(a1 or b1)
    if op is _SHL and s[1].op is _CONST and dtypes.is_int(dt):
        lo, hi = s[0]._range()
        return (
            _clamp(lo << s[1].arg, hi << s[1].arg, dt)
            if lo >= 0 and s[1].arg >= 0
            else (dtypes.min(dt), dtypes.max(dt))
        )
    if op is _SHR and s[1].op is _CONST and dtypes.is_int(dt):
        lo, hi = s[0]._range()
        return (lo >> s[1].arg, hi >> s[1].arg) if lo >= 0 and s[1].arg >= 0 else (dtypes.min(dt), dtypes.max(dt))
    return dtypes.min(dt), dtypes.max(dt)
