"""The one rewrite engine: UPat patterns, PatternMatcher rule sets and graph_rewrite.

Every pass in uops is a PatternMatcher applied by graph_rewrite. The walk keeps its own
stack (no Python recursion on graph depth) and memoizes per call, so a shared subgraph is
rewritten once.
"""

from __future__ import annotations

import gc
import inspect
import itertools
import keyword
import operator
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from uops.dtypes import DType
from uops.ir.ops import GroupOp, Ops
from uops.ir.uop import UOp, new_uop

_ANY = object()


class UPat:
    """A pattern over UOps.

    ``src`` as a tuple matches sources in order; as a list, in any order (commutative ops);
    as a single UPat, every source must match it. ``name`` captures the node.
    """

    __slots__ = ("ops", "dtypes", "src", "arg", "name", "allow_any_len", "_items", "_perms")

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
        self._items: tuple[UPat, ...] = ()
        self._perms: list[tuple[int, ...]] = []
        if src is None or isinstance(src, UPat):
            self.src = src
        elif isinstance(src, list):
            self._items = tuple(src)
            self.src = _permutations(self._items)
            self._perms = list(itertools.permutations(range(len(src))))
        else:
            self._items = tuple(src)
            self.src = [self._items]

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


# ----------------------------------------------------------------------------------------
# compiled matching: each op's rules become one generated Python function
# ----------------------------------------------------------------------------------------
class _Fallback(Exception):
    """A pattern the code generator does not handle; that rule is interpreted with UPat.match."""


def _names_in(p: UPat) -> bool:
    if p.name is not None:
        return True
    if p.src is None:
        return False
    if isinstance(p.src, UPat):
        return _names_in(p.src)
    return any(_names_in(q) for q in p.src[0])


def _trivial(p: UPat) -> bool:
    return p.ops is None and p.dtypes is None and p.arg is _ANY and p.name is None and p.src is None


class _Gen:
    """Emits straight-line checks. A failed check jumps to the most recent choice point: the next
    permutation of an any-order source list (``continue``) or, with none open, the next rule (``break``)."""

    def __init__(self) -> None:
        self.env: dict[str, Any] = {}
        self.lines: list[str] = []
        self.n = 0
        self.root_dtype_tok = False  # some check reads ``udt``, the cache token of the root's dtype
        self.root_pair = False  # some check reads ``u0, u1``, the root's two sources (set when it has two)
        # a check on the root's sources written for any count: its forms for two sources and for others
        self.by_count: dict[str, tuple[str, str]] = {}
        # the lines that end a rule unless the root has exactly two sources
        self.two_sources: set[str] = set()

    def const(self, obj: Any) -> str:
        self.n += 1
        name = f"K{self.n}"
        self.env[name] = obj
        return name

    def tmp(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def emit(
        self, p: UPat, v: str, names: dict[str, str], ind: int, loop: bool, skip_op: bool = False
    ) -> tuple[int, bool]:
        fail = "continue" if loop else "break"
        pad = "    " * ind
        conds = []
        if p.ops is not None and not skip_op:
            conds.append(
                f"{v}.op is {self.const(next(iter(p.ops)))}" if len(p.ops) == 1 else f"{v}.op in {self.const(p.ops)}"
            )
        if p.arg is not _ANY:
            conds.append(f"{v}.arg == {self.const(p.arg)}")
        if p.dtypes is not None:
            # by the dtypes' cache tokens (equal for equal dtypes): no DType hashing
            toks = self.const(frozenset(x._tok for x in p.dtypes))
            tok = f"{v}.dtype._tok"
            if v == "u":  # the root's dtype token is read once per call
                tok = "udt"
                self.root_dtype_tok = True
            conds.append(f"({tok} in {toks} or {v}.dtype.scalar()._tok in {toks})")
        if conds:
            self.lines.append(f"{pad}if not ({' and '.join(conds)}): {fail}")
        if p.name is not None:
            if p.name in names:
                self.lines.append(f"{pad}if {names[p.name]} is not {v}: {fail}")
            else:
                names[p.name] = v  # ``v`` keeps this node for the rest of the rule: no copy
        if p.src is None:
            return ind, loop
        if isinstance(p.src, UPat):
            if _names_in(p.src):
                raise _Fallback("names inside a repeated source pattern")
            if not _trivial(p.src):
                pred = self.const(_compile_pred(p.src))
                q = p.src
                if v == "u" and q.ops is not None and q.dtypes is None and q.arg is _ANY and q.src is None:
                    # an op check on every source of the root: inline for two sources
                    k = self.const(next(iter(q.ops)) if len(q.ops) == 1 else q.ops)
                    c0, c1 = (f"u{i}.op {'is' if len(q.ops) == 1 else 'in'} {k}" for i in (0, 1))
                    self.root_pair = True
                    line = f"{pad}if not (({c0} and {c1}) if ul == 2 else all(map({pred}, us))): {fail}"
                    self.by_count[line] = (
                        f"{pad}if not ({c0} and {c1}): {fail}",
                        f"{pad}if not all(map({pred}, us)): {fail}",
                    )
                    self.lines.append(line)
                else:
                    self.lines.append(f"{pad}if not all(map({pred}, {v}.src)): {fail}")
            return ind, loop
        items = p.src[0] if len(p.src) == 1 else p._items
        n = len(items)
        if v == "u":  # the root's sources are loaded once per call (see _compile_op)
            s, length = "us", "ul"
        else:
            s = self.tmp()
            length = f"len({s})"
            self.lines.append(f"{pad}{s} = {v}.src")
        count_check = f"{pad}if {length} {'<' if p.allow_any_len else '!='} {n}: {fail}"
        if v == "u" and n == 2 and not p.allow_any_len and ind == 1 and fail == "break":  # failing ends the rule
            self.two_sources.add(count_check)
        self.lines.append(count_check)
        # how each source is read: the root's pair from its locals, any other source by index
        pair = v == "u" and n == 2 and not p.allow_any_len
        self.root_pair |= pair
        at = [f"u{j}" if pair else f"{s}[{j}]" for j in range(n)]
        # check the leaf sub-patterns first: they open no loops, so the order matches are found in is kept
        order = [i for i, q in enumerate(items) if q.src is None] + [
            i for i, q in enumerate(items) if q.src is not None
        ]
        if len(p.src) == 1:
            for i in order:
                q = items[i]
                if _trivial(q):
                    continue
                if pair:
                    vi = at[i]
                else:
                    vi = self.tmp()
                    self.lines.append(f"{pad}{vi} = {at[i]}")
                ind, loop = self.emit(q, vi, names, ind, loop)
                pad = "    " * ind
            return ind, loop
        vs = [self.tmp() for _ in range(n)]
        # whatever the order, each sub-pattern with an op check meets one of the sources: test that once,
        # before any permutation is tried (most nodes fail here)
        for q in items:
            if q.ops is not None:
                k, test = (self.const(next(iter(q.ops))), "is") if len(q.ops) == 1 else (self.const(q.ops), "in")
                self.lines.append(f"{pad}if not ({' or '.join(f'{at[j]}.op {test} {k}' for j in range(n))}): {fail}")
        if n == 2 and not pair:  # no tuple building for a binary source list read by index
            k = self.tmp()
            self.lines.append(f"{pad}for {k} in (0, 1):")
            self.lines.append(f"{pad}    {vs[0]} = {s}[{k}]")
            self.lines.append(f"{pad}    {vs[1]} = {s}[1 - {k}]")
        else:
            alts = ", ".join("(" + ", ".join(at[j] for j in perm) + ",)" for perm in p._perms)
            self.lines.append(f"{pad}for {', '.join(vs)}, in ({alts}):")
        ind += 1
        for i in order:
            ind, _ = self.emit(items[i], vs[i], names, ind, True)
        return ind, True


def _compile_pred(p: UPat) -> Callable[[UOp], bool]:
    g = _Gen()
    g.lines.append("while True:")
    ind, _ = g.emit(p, "q", {}, 1, False)
    g.lines.append("    " * ind + "return True")
    g.lines.append("    break")
    g.lines.append("return False")
    src = "def pred(q):\n" + "\n".join("    " + ln for ln in g.lines) + "\n"
    exec(compile(src, "<upat pred>", "exec"), g.env)
    return g.env["pred"]


def _bad_return(fn: Callable[..., Any], pat: UPat, ret: Any, result: type = UOp) -> None:
    raise TypeError(
        f"rewrite rule {getattr(fn, '__qualname__', fn)} for {pat} returned {type(ret).__name__}, "
        f"expected a {result.__name__} or None"
    )


def _interpret(pat: UPat, fn: Callable[..., Any], wants_ctx: bool, u: UOp, ctx: Any) -> Any:
    for store in pat.match(u, {}):
        ret = fn(ctx=ctx, **store) if wants_ctx else fn(**store)
        if ret is not None and ret is not u:
            return ret
    return None


def _call_args(fn: Callable[..., Any], names: dict[str, str], wants_ctx: bool) -> str:
    """Positional arguments when ``fn`` is a plain function whose parameters are exactly the captures
    (fast), else keywords (what ``fn(**captures)`` would do, errors included)."""
    wanted = set(names) | ({"ctx"} if wants_ctx else set())
    code = getattr(fn, "__code__", None)
    if isinstance(fn, types.FunctionType) and code is not None:
        params = code.co_varnames[: code.co_argcount]
        plain = code.co_kwonlyargcount == 0 and not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        # parameters past the captures are allowed when they have defaults (``lambda x, k=k: ...``)
        required = params[: len(wanted)]
        n_defaults = len(fn.__defaults__ or ())
        if plain and set(required) == wanted and len(params) - len(wanted) <= n_defaults:
            return ", ".join("ctx" if k == "ctx" else names[k] for k in required)
    pairs = list(names.items()) + ([("ctx", "ctx")] if wants_ctx else [])
    if all(k.isidentifier() and not keyword.iskeyword(k) for k, _ in pairs):
        return ", ".join(f"{k}={v}" for k, v in pairs)
    return "**{" + ", ".join(f"{k!r}: {v}" for k, v in pairs) + "}"


def _compile_op(rules: list[tuple[UPat, Callable[..., Any], bool]], result: type = UOp) -> Callable[[UOp, Any], Any]:
    g = _Gen()
    g.env["_bad"], g.env["_UOp"], g.env["_interp"] = _bad_return, result, _interpret
    blocks: list[tuple[list[str], bool]] = []  # each rule's lines, and whether they read ``udt``
    for pat, fn, wants_ctx in rules:
        f, pk = g.const(fn), g.const(pat)
        mark = len(g.lines)
        g.lines.append("while True:")
        names: dict[str, str] = {}
        g.root_dtype_tok = False
        try:
            ind, _ = g.emit(pat, "u", names, 1, False, skip_op=True)
            call = f"{f}({_call_args(fn, names, wants_ctx)})"
        except _Fallback:
            del g.lines[mark + 1 :]
            g.root_dtype_tok = False
            ind, call = 1, f"_interp({pk}, {f}, {wants_ctx}, u, ctx)"
        pad = "    " * ind
        g.lines += [
            f"{pad}r = {call}",
            f"{pad}if r is not None and r is not u:",
            f"{pad}    if r.__class__ is not _UOp and not isinstance(r, _UOp): _bad({f}, {pk}, r, _UOp)",
            f"{pad}    return r",
            "    break",
        ]
        blocks.append((g.lines[mark:], g.root_dtype_tok))
    head = "def match(u, ctx):\n    us = u.src\n    ul = len(us)\n"
    if g.root_pair:
        # most nodes have two sources: their rules, without the count checks, and the others' apart
        two, other = (_rules_for_count(blocks, g, two) for two in (True, False))
        body = ["if ul == 2:", "    u0, u1 = us", *("    " + ln for ln in two), "    return None", *other]
    else:
        body = _rules_for_count(blocks, g, None)
    src = head + "\n".join("    " + ln for ln in body) + "\n    return None\n"
    if _DEBUG_SOURCE:
        print(src)
    exec(compile(src, "<pattern matcher>", "exec"), g.env)
    return g.env["match"]


def _rules_for_count(blocks: list[tuple[list[str], bool]], g: _Gen, two: bool | None) -> list[str]:
    """The rules' lines for a root with two sources (``two``), with any other count (not ``two``: the
    rules for two are left out) or with any count (None). The root's dtype token is read at the top of the
    first rule that reads it: every later rule is reached through there."""
    out: list[str] = []
    udt = False
    for lines, reads_udt in blocks:
        if two is True:
            lines = [g.by_count[ln][0] if ln in g.by_count else ln for ln in lines if ln not in g.two_sources]
        elif two is False:
            if not g.two_sources.isdisjoint(lines):
                continue
            lines = [g.by_count[ln][1] if ln in g.by_count else ln for ln in lines]
        if reads_udt and not udt:
            lines = [lines[0], "    udt = u.dtype._tok", *lines[1:]]
            udt = True
        out += lines
    return out


_DEBUG_SOURCE = False
_COMPILED: dict[tuple[Any, ...], Callable[[UOp, Any], Any]] = {}


class PatternMatcher:
    """Ordered rules. A rule's function gets the named captures (and ``ctx`` if it names it) and
    returns a replacement UOp, or None to decline. Rules are indexed by op; each op's rules are
    compiled on first use into one Python function (shared by matchers with the same rules).

    ``build``, when given, makes the node the remembering bottom-up walk rebuilds on new sources, from
    its (op, dtype, src, arg): it may return what the matcher's first rules rewrite that node to (a
    folded constant, a canonical order), so the node they would replace at once is never made. It
    stays with the matcher's rules at the front: ``a + b`` keeps ``a``'s.

    ``result`` is the type a rule returns: a UOp for a rewrite pass; ``str`` for a renderer, whose rules
    give each node's source text (see ``uops.renderer.cstyle``)."""

    def __init__(
        self,
        rules: Sequence[Rule],
        build: Callable[[Ops, DType, tuple[UOp, ...], Any], UOp] | None = None,
        result: type = UOp,
    ):
        self.rules = list(rules)
        self.build = build
        self.result = result
        self.by_op: dict[Ops, list[tuple[UPat, Callable[..., Any], bool]]] = {op: [] for op in Ops}
        for pat, fn in self.rules:
            if not isinstance(pat, UPat) or not callable(fn):
                raise TypeError(f"a rule is (UPat, callable), got ({type(pat).__name__}, {type(fn).__name__})")
            try:
                wants_ctx = "ctx" in inspect.signature(fn).parameters
            except (TypeError, ValueError):
                wants_ctx = False
            for op in pat.ops if pat.ops is not None else Ops:
                self.by_op[op].append((pat, fn, wants_ctx))
        # what graph_rewrite(remember=True) marks its results with, top-down and bottom-up
        self.memo_keys = (object(), object())
        # table[op] -> matcher function, None when no rule can match op; filled lazily
        self.table: list[Callable[[UOp, Any], Any] | None] = [None] * (max(Ops) + 1)
        for op, rs in self.by_op.items():
            if rs:
                self.table[op] = self._lazy(op)

    def _lazy(self, op: Ops) -> Callable[[UOp, Any], Any]:
        def first_call(u: UOp, ctx: Any) -> Any:
            rs = self.by_op[op]
            key = (self.result, *((p, f) for p, f, _ in rs))
            fn = _COMPILED.get(key)
            if fn is None:
                fn = _compile_op(rs, self.result)
                if len(_COMPILED) > 512:
                    _COMPILED.clear()
                _COMPILED[key] = fn
            self.table[op] = fn
            return fn(u, ctx)

        return first_call

    def __add__(self, other: PatternMatcher) -> PatternMatcher:
        return PatternMatcher(self.rules + other.rules, self.build, self.result)

    def rewrite(self, u: UOp, ctx: Any = None) -> Any:
        """The first rule result for ``u`` that is not None (and, for a UOp, not ``u`` itself), or None."""
        f = self.table[u.op]
        return None if f is None else f(u, ctx)


def graph_rewrite(
    sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False, remember: bool = False
) -> UOp:
    """Rewrite ``sink`` with ``pm`` to a fixed point.

    Top-down (default): a node is offered to the rules before its sources are rewritten, and
    again after if a source changed. Bottom-up: sources first, then the node. Either way each
    result is itself rewritten until no rule fires. Memoized within the call; with ``remember``,
    also across calls: every node reached keeps its result, and a later call with the same
    matcher and direction takes it instead of walking the node again. Only for matchers whose
    rules are pure functions of the node they see (no ``ctx``, no outside state).
    """
    if pm.result is not UOp:
        raise TypeError(f"graph_rewrite needs a matcher whose rules return UOps, not {pm.result.__name__}s")
    if remember and ctx is not None:
        raise ValueError("graph_rewrite(remember=True) needs ctx=None: a result that depends on ctx cannot be kept")
    if remember:
        return remembering_rewrite(pm, bottom_up)(sink)
    return _paused(_bottom_up if bottom_up else _top_down, pm, ctx, None)(sink)


def reference_rewrite(sink: UOp, pm: PatternMatcher, ctx: Any = None, bottom_up: bool = False) -> UOp:
    """What ``graph_rewrite`` computes, written plainly: the definition the fast walks (their own stacks, the
    remembered results, the matchers' ``build`` shortcuts) and the generated matchers are checked against in
    tests. Rules are interpreted with ``UPat.match`` in order; recursion follows the graph's depth.

    Top-down, a node is offered to the rules first; if none fires, its sources are rewritten and the node
    rebuilt on them is offered again. Bottom-up, sources first, then the node. A rule's result is itself
    rewritten the same way; every node's result is memoized for the call."""
    done: dict[UOp, UOp] = {}

    def rules(u: UOp) -> UOp | None:
        for pat, fn, wants_ctx in pm.by_op[u.op]:
            if (r := _interpret(pat, fn, wants_ctx, u, ctx)) is not None:
                return r
        return None

    def walk(u: UOp) -> UOp:
        if (out := done.get(u)) is not None:
            return out
        if not bottom_up and (r := rules(u)) is not None:
            out = walk(r)
        else:
            src = tuple(walk(s) for s in u.src)
            new = u if src == u.src else UOp(u.op, u.dtype, src, u.arg)
            if new is not u and new in done:
                out = done[new]
            else:
                r = rules(new) if bottom_up or new is not u else None
                out = new if r is None else walk(r)
                done[new] = out
        done[u] = out
        return out

    return walk(sink)


def remembering_rewrite(pm: PatternMatcher, bottom_up: bool = False) -> Callable[[UOp], UOp]:
    """``graph_rewrite(u, pm, bottom_up=bottom_up, remember=True)`` as a function of ``u`` alone, its
    choices made once: for a caller that rewrites many small graphs (simplify)."""
    return _paused(_bottom_up_kept if bottom_up else _top_down, pm, None, pm.memo_keys[bottom_up])


def _paused(
    run: Callable[[UOp, PatternMatcher, Any, Any], UOp], pm: PatternMatcher, ctx: Any, key: object | None
) -> Callable[[UOp], UOp]:
    """``run`` of a graph with the cycle collector paused: UOps are an immutable DAG, a rewrite makes no
    reference cycles, so the collector would only rescan the many young nodes a rewrite allocates."""
    isenabled, disable, enable = gc.isenabled, gc.disable, gc.enable

    def walk(sink: UOp) -> UOp:
        if not isenabled():
            return run(sink, pm, ctx, key)
        disable()
        try:
            return run(sink, pm, ctx, key)
        finally:
            enable()

    return walk


# The two directions' walks are separate loops, not one loop with a direction flag: the walk is
# the hot path of every pass, and the flag's tests per node cost more than the shared lines save.


def _remember(replace: dict[UOp, UOp], key: object) -> None:
    """Keep each reached node's result on the node for later walks with the same matcher and direction."""
    for n, r in replace.items():
        if (m := n._ref.memo) is None or m[0] is not key:
            n._ref.memo = (key, None if r is n else r)


def _bottom_up(sink: UOp, pm: PatternMatcher, ctx: Any, key: None) -> UOp:
    table = pm.table
    replace: dict[UOp, UOp] = {}
    rget, rgetitem = replace.get, replace.__getitem__
    POST, LINK = _POST, _LINK
    new = new_uop
    stack: list[Any] = [sink]
    pop, push = stack.pop, stack.append
    while stack:
        e = pop()
        if e is POST:
            n = pop()
            src = n.src
            if len(src) == 2:  # most nodes: no tuple built when neither source changed
                s0, s1 = src
                r0, r1 = replace[s0], replace[s1]
                new_src = src if r0 is s0 and r1 is s1 else (r0, r1)
            else:
                new_src = tuple(map(rgetitem, src))
            if new_src == src:
                nn = n
            else:
                nn = new(UOp, n.op, n.dtype, new_src, n.arg)
                if (rr := rget(nn)) is not None:
                    replace[n] = rr
                    continue
            f = table[nn.op]
            if f is None or (r := f(nn, ctx)) is None:
                replace[n] = nn
                if nn is not n:
                    replace[nn] = nn
            elif (rr := rget(r)) is not None:
                replace[n] = rr
                if nn is not n:
                    replace[nn] = rr
            else:
                if nn is not n:
                    push(nn)
                    push(r)
                    push(LINK)
                push(n)
                push(r)
                push(LINK)
                push(r)
        elif e is LINK:
            r = pop()
            replace[pop()] = replace[r]
        else:
            if e in replace:
                continue
            src = e.src
            if not src:
                f = table[e.op]
                if f is not None and (r := f(e, ctx)) is not None:
                    push(e)
                    push(r)
                    push(LINK)
                    push(r)
                    continue
                replace[e] = e
                continue
            push(e)
            push(POST)
            for s in reversed(src):
                if s not in replace:
                    push(s)
    return replace[sink]


def _bottom_up_kept(sink: UOp, pm: PatternMatcher, ctx: None, key: Any) -> UOp:
    """Bottom-up with every result kept on its node (``remember``): the node's memo is the walk's
    record, so no dict is filled and copied out, and a node whose sources are already final (most
    of a small expression) is finished on its first visit; one that is not goes back under its
    sources. A node whose rule's result still needs the walk waits under ``LINK, result``. The walk
    goes straight down to the node it would pop next (a source or result just seen not to be final)
    instead of pushing it and popping it again."""
    fixed = (key, None)  # the memo of a node that is its own result
    table, build = pm.table, pm.build
    new, LINK = new_uop, _LINK
    stack: list[Any] = [sink]
    while stack:
        n = stack.pop()
        if n is LINK:  # the rule's result is final now: so is the node's
            r = stack.pop()
            m = r._ref.memo
            stack.pop()._ref.memo = (key, r) if m[1] is None else m
            continue
        if (m := n._ref.memo) is not None and m[0] is key:
            continue
        while True:  # n is not final: finish it, or go down to what it waits for
            src = n.src
            if len(src) == 2:  # most nodes: the two sources without a loop or a tuple
                s0, s1 = src
                m0, m1 = s0._ref.memo, s1._ref.memo
                if m1 is None or m1[0] is not key:
                    stack.append(n)
                    if m0 is None or m0[0] is not key:
                        stack.append(s1)
                        n = s0
                    else:
                        n = s1
                    continue
                if m0 is None or m0[0] is not key:
                    stack.append(n)
                    n = s0
                    continue
                r0, r1 = m0[1], m1[1]
                if r0 is None and r1 is None:
                    x = n
                else:
                    s2 = (s0 if r0 is None else r0, s1 if r1 is None else r1)
                    x = new(UOp, n.op, n.dtype, s2, n.arg) if build is None else build(n.op, n.dtype, s2, n.arg)
            elif src:
                waiting = False
                for s in reversed(src):
                    if (m := s._ref.memo) is None or m[0] is not key:
                        if not waiting:
                            stack.append(n)
                            waiting = True
                        stack.append(s)
                if waiting:
                    break
                new_src = tuple([s if (r := s._ref.memo[1]) is None else r for s in src])
                if all(map(_is, new_src, src)):
                    x = n
                else:
                    x = (
                        new(UOp, n.op, n.dtype, new_src, n.arg)
                        if build is None
                        else build(n.op, n.dtype, new_src, n.arg)
                    )
            else:
                x = n
            if x is not n and (m := x._ref.memo) is not None and m[0] is key:  # the rebuilt node was met before
                n._ref.memo = (key, x) if m[1] is None else m
                break
            f = table[x.op]
            if f is None or (r := f(x, None)) is None:
                if x is not n:
                    x._ref.memo = fixed
                    n._ref.memo = (key, x)
                else:
                    n._ref.memo = fixed
                break
            if (m := r._ref.memo) is not None and m[0] is key:  # a result known to be final (a rule may mark it so)
                n._ref.memo = (key, r) if m[1] is None else m
                break
            stack.append(n)
            stack.append(r)
            stack.append(LINK)
            n = r
    done: Any = sink._ref.memo
    return sink if done[1] is None else done[1]


def _top_down(sink: UOp, pm: PatternMatcher, ctx: Any, key: object | None) -> UOp:
    table = pm.table
    replace: dict[UOp, UOp] = {}
    rget, rgetitem = replace.get, replace.__getitem__
    POST, LINK = _POST, _LINK
    new = new_uop
    stack: list[Any] = [sink]
    pop, push = stack.pop, stack.append
    while stack:
        e = pop()
        if e is POST:
            n = pop()
            src = n.src
            if len(src) == 2:  # most nodes: no tuple built when neither source changed
                s0, s1 = src
                r0, r1 = replace[s0], replace[s1]
                new_src = src if r0 is s0 and r1 is s1 else (r0, r1)
            else:
                new_src = tuple(map(rgetitem, src))
            if new_src == src:
                replace[n] = n  # offered to the rules before its sources
                continue
            # every new source is final, so the rebuilt node only needs the rules once more
            nn = new(UOp, n.op, n.dtype, new_src, n.arg)
            if (rr := rget(nn)) is not None:
                replace[n] = rr
                continue
            f = table[nn.op]
            if f is None or (r := f(nn, ctx)) is None:
                replace[nn] = nn
                replace[n] = nn
            elif (rr := rget(r)) is not None:
                replace[nn] = rr
                replace[n] = rr
            else:
                push(nn)
                push(r)
                push(LINK)
                push(n)
                push(r)
                push(LINK)
                push(r)
        elif e is LINK:
            r = pop()
            replace[pop()] = replace[r]
        else:
            if e in replace:
                continue
            if key is not None and (m := e._ref.memo) is not None and m[0] is key:
                replace[e] = e if m[1] is None else m[1]
                continue
            f = table[e.op]
            if f is not None and (r := f(e, ctx)) is not None:
                if (rr := rget(r)) is not None:
                    replace[e] = rr
                else:
                    push(e)
                    push(r)
                    push(LINK)
                    push(r)
                continue
            src = e.src
            if not src:
                replace[e] = e
                continue
            push(e)
            push(POST)
            for s in reversed(src):
                if s not in replace:
                    push(s)
    if key is not None:
        _remember(replace, key)
    return replace[sink]


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_POST, _LINK = _Marker("POST"), _Marker("LINK")
_is = operator.is_
