"""The one rewrite engine: UPat patterns, PatternMatcher rule sets and graph_rewrite.

Every pass in uops is a PatternMatcher applied by graph_rewrite. The walk keeps its own
stack (no Python recursion on graph depth) and memoizes per call, so a shared subgraph is
rewritten once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from uops.dtypes import DType
from uops.ops import GroupOp, Ops
from uops.uop import UOp

_ANY = object()


class UPat:
    """A pattern over UOps.

    ``src`` as a tuple matches sources in order; as a list, in any order (commutative ops);
    as a single UPat, every source must match it. ``name`` captures the node.
    """

    __slots__ = ("ops", "dtypes", "src", "arg", "name", "allow_any_len", "_early")

    def __init__(
        self,
        op: Ops | Iterable[Ops] | None = None,
        dtype: DType | Iterable[DType] | None = None,
        src: tuple[UPat, ...] | list[UPat] | UPat | None = None,
        arg: Any = _ANY,
        name: str | None = None,
        allow_any_len: bool = False,
    ):
        self.ops: frozenset[Ops] | None = (
            None if op is None else frozenset((op,)) if isinstance(op, Ops) else frozenset(op)
        )
        self.dtypes: frozenset[DType] | None = (
            None if dtype is None else frozenset((dtype,)) if isinstance(dtype, DType) else frozenset(dtype)
        )
        self.arg = arg
        self.name = name
        self.allow_any_len = allow_any_len
        # src alternatives: a list of tuples of patterns, or a single "repeat" pattern
        self.src: list[tuple[UPat, ...]] | UPat | None
        if src is None or isinstance(src, UPat):
            self.src = src
        elif isinstance(src, list):
            self.src = _permutations(tuple(src))
        else:
            self.src = [tuple(src)]

    # ----- convenient constructors -----
    @staticmethod
    def var(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(dtype=dtype, name=name)

    @staticmethod
    def cvar(name: str | None = None, dtype: DType | Iterable[DType] | None = None) -> UPat:
        return UPat(Ops.CONST, dtype=dtype, name=name)

    @staticmethod
    def const(dtype: DType | Iterable[DType] | None, value: Any) -> UPat:
        return UPat(Ops.CONST, dtype=dtype, arg=value)

    def named(self, name: str) -> UPat:
        p = UPat.__new__(UPat)
        for k in UPat.__slots__:
            if k != "_early":
                object.__setattr__(p, k, getattr(self, k))
        p.name = name
        return p

    def _alu(self, op: Ops, *others: UPat | int | float) -> UPat:
        srcs = [self, *(o if isinstance(o, UPat) else UPat.const(None, o) for o in others)]
        return UPat(op, src=srcs if op in GroupOp.Commutative else tuple(srcs))

    def __add__(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.ADD, o)

    def __mul__(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.MUL, o)

    def __floordiv__(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.IDIV, o)

    def __mod__(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.MOD, o)

    def __neg__(self) -> UPat:
        return UPat(Ops.NEG, src=(self,))

    def lt(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.CMPLT, o)

    def ne(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.CMPNE, o)

    def maximum(self, o: UPat | int | float) -> UPat:
        return self._alu(Ops.MAX, o)

    def where(self, a: UPat, b: UPat) -> UPat:
        return UPat(Ops.WHERE, src=(self, a, b))

    def cast(self, dtype: DType | None = None) -> UPat:
        return UPat(Ops.CAST, dtype=dtype, src=(self,))

    # ----- matching -----
    def match(self, u: UOp, store: dict[str, UOp]) -> list[dict[str, UOp]]:
        if (
            (self.ops is not None and u.op not in self.ops)
            or (self.dtypes is not None and u.dtype not in self.dtypes and u.dtype.scalar() not in self.dtypes)
            or (self.arg is not _ANY and self.arg != u.arg)
        ):
            return []
        if self.name is not None:
            prev = store.get(self.name)
            if prev is None:
                store = {**store, self.name: u}
            elif prev is not u:
                return []
        src = self.src
        if src is None:
            return [store]
        if isinstance(src, UPat):
            stores = [store]
            for s in u.src:
                stores = [r for st in stores for r in src.match(s, st)]
                if not stores:
                    return []
            return stores
        out: list[dict[str, UOp]] = []
        n = len(u.src)
        for alt in src:
            if len(alt) != n and not (self.allow_any_len and n >= len(alt)):
                continue
            stores = [store]
            for p, s in zip(alt, u.src):
                stores = [r for st in stores for r in p.match(s, st)]
                if not stores:
                    break
            out.extend(stores)
        return out

    def __repr__(self) -> str:
        ops = "*" if self.ops is None else "|".join(sorted(o.name for o in self.ops))
        return f"UPat({ops}{', name=' + repr(self.name) if self.name else ''})"


def _permutations(items: tuple[UPat, ...]) -> list[tuple[UPat, ...]]:
    if len(items) <= 1:
        return [items]
    out: list[tuple[UPat, ...]] = []
    for i, first in enumerate(items):
        for rest in _permutations(items[:i] + items[i + 1 :]):
            out.append((first, *rest))
    return out


Rule = tuple[UPat, Callable[..., Any]]


class PatternMatcher:
    """Ordered rules. A rule's function gets the named captures (and ``ctx`` if it names it) and
    returns a replacement UOp, or None to decline. Rules are indexed by op."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = list(rules)
        self.by_op: dict[Ops, list[tuple[UPat, Callable[..., Any], bool]]] = {op: [] for op in Ops}
        for pat, fn in self.rules:
            if not isinstance(pat, UPat) or not callable(fn):
                raise TypeError(f"a rule is (UPat, callable), got ({type(pat).__name__}, {type(fn).__name__})")
            wants_ctx = "ctx" in inspect.signature(fn).parameters
            for op in pat.ops if pat.ops is not None else Ops:
                self.by_op[op].append((pat, fn, wants_ctx))

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.rules + other.rules)

    def rewrite(self, u: UOp, ctx: Any = None) -> UOp | None:
        for pat, fn, wants_ctx in self.by_op[u.op]:
            for store in pat.match(u, {}):
                ret = fn(ctx=ctx, **store) if wants_ctx else fn(**store)
                if ret is None or ret is u:
                    continue
                if not isinstance(ret, UOp):
                    raise TypeError(
                        f"rewrite rule {getattr(fn, '__qualname__', fn)} for {pat} returned "
                        f"{type(ret).__name__}, expected a UOp or None"
                    )
                return ret
        return None


def graph_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False) -> UOp:
    """Rewrite ``sink`` with ``pm`` to a fixed point.

    Top-down (default): a node is offered to the rules before its sources are rewritten, and
    again after. Bottom-up: sources first, then the node. Either way each result is itself
    rewritten until no rule fires. Memoized within the call.
    """
    replace: dict[UOp, UOp] = {}
    rewrite = pm.rewrite
    # frames: (node, stage, pending) stage 0 = enter, 1 = sources done, 2 = alias to pending
    stack: list[tuple[UOp, int, UOp | None]] = [(sink, 0, None)]
    while stack:
        n, stage, pending = stack.pop()
        if stage == 0:
            if n in replace:
                continue
            if not bottom_up:
                r = rewrite(n, ctx)
                if r is not None:
                    stack.append((n, 2, r))
                    stack.append((r, 0, None))
                    continue
            stack.append((n, 1, None))
            for s in reversed(n.src):
                if s not in replace:
                    stack.append((s, 0, None))
        elif stage == 1:
            src = n.src
            new_src = tuple([replace[s] for s in src])
            if all(a is b for a, b in zip(new_src, src)):
                if bottom_up:
                    r = rewrite(n, ctx)
                    if r is not None:
                        stack.append((n, 2, r))
                        stack.append((r, 0, None))
                        continue
                replace[n] = n
            else:
                nn = UOp(n.op, n.dtype, new_src, n.arg)
                stack.append((n, 2, nn))
                stack.append((nn, 0, None))
        else:
            assert pending is not None
            replace[n] = replace[pending]
    return replace[sink]


def graph_substitute(sink: UOp, mapping: dict[UOp, UOp]) -> UOp:
    """Replace nodes by identity (no pattern matching), rebuilding their users."""
    if not mapping:
        return sink
    memo: dict[UOp, UOp] = {}
    for u in sink.toposort(gate=lambda x: x not in mapping):
        if u in mapping:
            memo[u] = mapping[u]
            continue
        new_src = tuple([memo[s] for s in u.src])
        memo[u] = u if all(a is b for a, b in zip(new_src, u.src)) else UOp(u.op, u.dtype, new_src, u.arg)
    return memo[sink]
