"""The rewrite engine: UPat matching, PatternMatcher rule order and calling convention, graph_rewrite."""

from __future__ import annotations

import functools
import gc
import random
import weakref
from typing import Any

import pytest

from uops import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite

x, y = UOp.variable("x", 0, 10), UOp.variable("y", 0, 10)


def c(v: int) -> UOp:
    return UOp.const(dtypes.int32, v)


# ----------------------------------------------------------------------------------------
# matching
# ----------------------------------------------------------------------------------------
def test_rules_are_tried_in_order() -> None:
    pm = PatternMatcher(
        [
            (UPat(Ops.ADD, src=(UPat.var("a"), UPat.cvar("k"))), lambda a, k: a * 2),
            (UPat(Ops.ADD, name="n"), lambda n: c(0)),
        ]
    )
    assert pm.rewrite(x + 1) is x * 2
    assert pm.rewrite(x + y) is c(0)
    swapped = PatternMatcher(list(reversed(pm.rules)))
    assert swapped.rewrite(x + 1) is c(0)


def test_declining_rule_falls_through_to_the_next() -> None:
    pm = PatternMatcher(
        [(UPat(Ops.ADD, name="n"), lambda n: None), (UPat(Ops.ADD, src=(UPat.var("a"), UPat())), lambda a: a)]
    )
    assert pm.rewrite(x + y) is x


def test_rule_returning_its_input_counts_as_no_match() -> None:
    pm = PatternMatcher([(UPat(Ops.ADD, name="n"), lambda n: n), (UPat(Ops.ADD, name="n"), lambda n: c(1))])
    assert pm.rewrite(x + y) is c(1)


def test_any_order_src_matches_commuted_operands() -> None:
    pat = UPat(Ops.ADD, src=[UPat.var("v", dtype=dtypes.int32), UPat.cvar("k")])
    pm = PatternMatcher([(pat, lambda v, k: v if k.arg == 0 else None)])
    assert pm.rewrite(UOp(Ops.ADD, dtypes.int32, (x, c(0)))) is x
    assert pm.rewrite(UOp(Ops.ADD, dtypes.int32, (c(0), x))) is x
    assert pm.rewrite(x + y) is None
    fixed = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("v"), UPat.cvar("k"))), lambda v, k: v)])
    assert fixed.rewrite(UOp(Ops.ADD, dtypes.int32, (c(0), x))) is None  # tuple src: in order only


def test_any_order_backtracks_into_the_second_permutation() -> None:
    # the first assignment binds a=y, then fails on the repeated name; the swap must be tried
    pat = UPat(Ops.ADD, src=[UPat.var("a"), UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k")))])
    pm = PatternMatcher([(pat, lambda a, k: a * (k.arg + 1))])
    assert pm.rewrite(x + x * 3) is x * 4
    assert pm.rewrite(x * 3 + x) is x * 4
    assert pm.rewrite(y + x * 3) is None


def test_var_and_cvar_capture_and_filter_by_dtype() -> None:
    seen: dict[str, Any] = {}

    def grab(a: UOp, k: UOp) -> None:
        seen.update(a=a, k=k)

    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("a", dtypes.int32), UPat.cvar("k", dtypes.int32))), grab)])
    pm.rewrite(x * 5)
    assert seen == {"a": x, "k": c(5)}
    seen.clear()
    f = UOp.const(dtypes.float32, 1.0)
    pm.rewrite(f * f)
    assert seen == {}  # dtype filter rejects floats


def test_repeated_name_must_bind_the_same_node() -> None:
    pm = PatternMatcher([(UPat(Ops.SUB, src=(UPat.var("a"), UPat.var("a"))), lambda a: c(0))])
    assert pm.rewrite(x - x) is c(0)
    assert pm.rewrite(x - y) is None


def test_arg_and_repeated_src_patterns() -> None:
    pm = PatternMatcher(
        [
            (UPat(Ops.ADD, src=UPat(Ops.CONST), name="n"), lambda n: c(n.src[0].arg + n.src[1].arg)),
            (UPat(Ops.DEFINE_VAR, arg=("y", 0, 10)), lambda: c(7)),
        ]
    )
    assert pm.rewrite(c(2) + c(3)) is c(5)
    assert pm.rewrite(x + c(3)) is None  # every source must match
    assert pm.rewrite(y) is c(7)
    assert pm.rewrite(x) is None


def test_allow_any_len() -> None:
    pm = PatternMatcher([(UPat(Ops.SINK, src=(UPat.var("first"),), allow_any_len=True), lambda first: first)])
    assert pm.rewrite(UOp.sink(x, y)) is x
    strict = PatternMatcher([(UPat(Ops.SINK, src=(UPat.var("first"),)), lambda first: first)])
    assert strict.rewrite(UOp.sink(x, y)) is None


def test_named_repeated_src_falls_back_to_the_interpreter() -> None:
    # a name inside a repeated source pattern: every source must be that same node
    pm = PatternMatcher([(UPat(Ops.ADD, src=UPat.var("a")), lambda a: a * 2)])
    assert pm.rewrite(x + x) is x * 2
    assert pm.rewrite(x + y) is None


def test_ctx_is_passed_when_the_rule_names_it() -> None:
    got: list[Any] = []

    def with_ctx(ctx: list[str], v: UOp) -> None:
        ctx.append(v.arg[0])

    def without_ctx(v: UOp) -> None:
        got.append("no ctx")

    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), with_ctx), (UPat(Ops.DEFINE_VAR, name="v"), without_ctx)])
    names: list[str] = []
    graph_rewrite(x + y, pm, ctx=names)
    assert sorted(names) == ["x", "y"] and got == ["no ctx", "no ctx"]


def test_wrapped_and_keyword_rule_functions_are_called_correctly() -> None:
    def base(a: UOp) -> UOp:
        return a

    @functools.wraps(base)
    def wrapped(*args: Any, **kwargs: Any) -> UOp:
        return base(*args, **kwargs)

    def kw_only(*, a: UOp) -> UOp:
        return a

    for fn in (wrapped, kw_only, functools.partial(base)):
        pm = PatternMatcher([(UPat(Ops.NEG, src=(UPat.var("a"),)), fn)])
        assert pm.rewrite(-x) is x


def test_rule_parameters_past_the_captures_keep_their_defaults() -> None:
    seen: list[tuple[UOp, UOp, int]] = []

    def record(b: UOp, a: UOp, k: int = 7) -> None:
        seen.append((a, b, k))

    pm = PatternMatcher(
        [
            (UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("b"))), record),
            # the captures are not the leading parameters: called by keyword, the defaults untouched
            (UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("b"))), lambda a, k=3, b=None: seen.append((a, b, k))),
        ]
    )
    assert pm.rewrite(x + y) is None
    assert seen == [(x, y, 7), (x, y, 3)]


def test_rule_returning_non_uop_names_the_rule() -> None:
    def bad_rule(v: UOp) -> int:
        return 3

    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), bad_rule)])
    with pytest.raises(TypeError, match="bad_rule"):
        graph_rewrite(x, pm)


def test_malformed_rule_is_rejected() -> None:
    with pytest.raises(TypeError, match="UPat, callable"):
        PatternMatcher([(Ops.ADD, lambda: None)])  # type: ignore[list-item]


def test_matchers_compose_with_plus() -> None:
    a = PatternMatcher([(UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("v"),)),)), lambda v: v)])
    b = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.const(None, 1))), lambda v: v)])
    neg = -(x * 1)
    assert graph_rewrite(-neg, a + b) is x


# ----------------------------------------------------------------------------------------
# graph_rewrite
# ----------------------------------------------------------------------------------------
def test_fixed_point_rewrites_results_again() -> None:
    # each step removes one "+0"; the result must be rewritten until nothing fires
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("v"), UPat.const(None, 0))), lambda v: v)])
    e = x
    for _ in range(5):
        e = e + 0
    assert graph_rewrite(e, pm) is x
    assert graph_rewrite(e, pm, bottom_up=True) is x


def test_rewrite_of_sources_is_seen_by_parents() -> None:
    pm = PatternMatcher(
        [
            (UPat(Ops.DEFINE_VAR, arg=("x", 0, 10)), lambda: c(2)),
            (UPat(Ops.ADD, src=(UPat.cvar("p"), UPat.cvar("q"))), lambda p, q: c(p.arg + q.arg)),
        ]
    )
    assert graph_rewrite(x + 3, pm) is c(5)
    assert graph_rewrite(x + 3, pm, bottom_up=True) is c(5)


def test_top_down_sees_the_node_before_its_sources() -> None:
    # ADD(MUL(a, 2), b) -> special, but MUL(a, 2) -> SHL(a, 1) would destroy the pattern first
    rules = [
        (
            UPat(Ops.ADD, src=(UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(None, 2))), UPat.var("b"))),
            lambda a, b: a - b,
        ),
        (UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(None, 2))), lambda a: a << 1),
    ]
    pm = PatternMatcher(rules)
    e = x * 2 + y
    assert graph_rewrite(e, pm) is x - y  # top-down: the parent matches first
    assert graph_rewrite(e, pm, bottom_up=True) is (x << 1) + y  # bottom-up: the child is rewritten first


def test_bottom_up_rules_see_rewritten_sources() -> None:
    order: list[str] = []

    def visit(v: UOp) -> None:
        order.append(v.op.name)

    pm = PatternMatcher([(UPat((Ops.ADD, Ops.MUL, Ops.DEFINE_VAR), name="v"), visit)])
    graph_rewrite((x * 3) + y, pm, bottom_up=True)
    assert order.index("MUL") < order.index("ADD") and order.index("DEFINE_VAR") < order.index("MUL")
    order.clear()
    graph_rewrite((x * 3) + y, pm)
    assert order[0] == "ADD"  # top-down offers the root first


def test_shared_subgraph_is_rewritten_once() -> None:
    calls: list[UOp] = []

    def count(v: UOp) -> None:
        calls.append(v)

    shared = (x * 7) + y
    e = UOp.sink(shared * 2, shared * 3, shared + 1)
    pm = PatternMatcher([(UPat(Ops.ADD, name="v"), count)])
    graph_rewrite(e, pm, bottom_up=True)
    assert calls.count(shared) == 1
    calls.clear()
    graph_rewrite(e, pm)
    assert calls.count(shared) == 1


def test_memoized_result_is_reused_for_every_parent() -> None:
    calls = 0

    def fold(v: UOp, k: UOp) -> UOp | None:
        nonlocal calls
        if k.arg != 1:
            return None
        calls += 1
        return v

    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.cvar("k"))), fold)])
    shared = x * 1
    out = graph_rewrite(UOp.sink(shared + 1, shared + 2, shared + 3), pm)
    assert out is UOp.sink(x + 1, x + 2, x + 3)
    assert calls == 1


def test_remembered_results_are_reused_by_the_next_call() -> None:
    calls: list[UOp] = []

    def fold(v: UOp, k: UOp) -> UOp | None:
        calls.append(v)
        return v if k.arg == 1 else None

    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.cvar("k"))), fold)])
    shared = (x * 1) * 5
    first = graph_rewrite(shared + 1, pm, bottom_up=True, remember=True)
    assert first is (x * 5) + 1 and len(calls) == 2  # x*1, and (x*1)*5 rebuilt as x*5
    calls.clear()
    assert graph_rewrite(shared + 2, pm, bottom_up=True, remember=True) is (x * 5) + 2
    assert calls == []  # the shared part came from the first call
    # the other direction and other matchers keep their own results
    assert graph_rewrite(shared + 2, pm, remember=True) is (x * 5) + 2 and calls
    calls.clear()
    other = PatternMatcher(list(pm.rules))
    assert graph_rewrite(shared + 2, other, bottom_up=True) is (x * 5) + 2 and calls


def test_remember_refuses_a_ctx() -> None:
    pm = PatternMatcher([(UPat(Ops.ADD, name="v"), lambda v, ctx: None)])
    with pytest.raises(ValueError, match="ctx"):
        graph_rewrite(x + y, pm, ctx={"k": 1}, remember=True)


def test_remembered_results_do_not_keep_their_nodes_alive() -> None:
    pm = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.const(dtypes.int32, 1))), lambda v: v)])
    tmp = UOp.variable("tmp_memo", 0, 3)
    e = (tmp * 1) + 2
    out = graph_rewrite(e, pm, bottom_up=True, remember=True)
    assert out is tmp + 2 and (tmp + 2)._ref.memo is not None
    ref = weakref.ref(e)
    del e
    assert ref() is None  # freed by its reference count: the memo made no cycle


def _random_index_graph(rng: random.Random, n_nodes: int) -> UOp:
    """A DAG of integer index math over two variables: unary, binary and three-source (WHERE) nodes,
    shared subexpressions and constants, the shapes simplify meets."""
    a, b = UOp.variable("a_walk", 0, 12), UOp.variable("b_walk", -3, 5)
    nodes = [a, b, c(0), c(1), c(3)]
    for _ in range(n_nodes):
        p, q = rng.choice(nodes[-8:]), rng.choice(nodes)
        kind = rng.randrange(8)
        if kind == 0:
            nodes.append((p < q).where(p, q + 1))
        elif kind == 1:
            nodes.append(-p)
        elif kind == 2:
            nodes.append(p // rng.choice([1, 2, 4]))
        elif kind == 3:
            nodes.append(p % rng.choice([1, 3, 4]))
        elif kind == 4:
            nodes.append(p * rng.choice([0, 1, 2, -1]))
        elif kind == 5:
            nodes.append(p - q)
        else:
            nodes.append(p + q)
    return UOp.sink(*nodes[-4:])


def test_remembering_walk_gives_the_plain_walks_results() -> None:
    # the remembering walk keeps results on the nodes; the plain walk keeps a dict
    from uops.ir.symbolic import symbolic

    rng = random.Random(7)
    for _ in range(40):
        g = _random_index_graph(rng, rng.randrange(3, 30))
        kept = graph_rewrite(g, PatternMatcher(symbolic.rules), bottom_up=True, remember=True)
        plain = graph_rewrite(g, symbolic, bottom_up=True)  # built after: the same nodes only if kept's are entered
        assert kept is plain
        assert graph_rewrite(g, symbolic, bottom_up=True, remember=True) is plain


def test_remembering_walk_node_a_rule_kept_is_the_cached_one() -> None:
    # (x*1) + y is rebuilt as x + y; this (stateful, so misused) rule replaces it but holds on to it:
    # the held node must still be the one every construction of x + y returns (never a node left out of the cache)
    held: list[UOp] = []

    def keep_and_replace(n: UOp) -> UOp | None:
        if n.src[0] is x:
            held.append(n)
            return c(7)
        return None

    pm = PatternMatcher(
        [
            (UPat(Ops.MUL, src=(UPat.var("v"), UPat.const(dtypes.int32, 1))), lambda v: v),
            (UPat(Ops.ADD, name="n"), keep_and_replace),
        ]
    )
    assert graph_rewrite((x * 1) + y, pm, bottom_up=True, remember=True) is c(7)
    assert held and held[0] is x + y


def test_deep_chain_without_recursion_error() -> None:
    e = x
    for _ in range(100_000):
        e = e + 1
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.cvar("k"))), lambda a, k: None)])
    assert graph_rewrite(e, pm) is e
    assert graph_rewrite(e, pm, bottom_up=True) is e
    # every node rewritten: +1 -> +2, rebuilt all the way up
    bump = PatternMatcher([(UPat(Ops.CONST, arg=1, dtype=dtypes.int32), lambda: c(2))])
    out = graph_rewrite(e, bump, bottom_up=True)
    assert out.src[1] is c(2) and out.vmax == 10 + 200_000


def test_rewrite_keeps_hash_consing() -> None:
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, arg=("y", 0, 10)), lambda: x)])
    out = graph_rewrite(x + y, pm)
    assert out is x + x  # the rebuilt node is the existing one


def test_substitute_replaces_by_identity() -> None:
    e = (x + y) * (x + 1)
    assert e.substitute({x: y}) is (y + y) * (y + 1)
    assert e.substitute({}) is e
    assert e.substitute({x + y: c(0)}) is c(0) * (x + 1)


def test_hash_consing_cache_drops_dead_nodes() -> None:
    from uops.ir import uop

    before = len(uop._cache)
    tmp = [UOp.variable("tmp_cache", 0, i) for i in range(1000)]
    assert len(uop._cache) >= before + 1000
    ref = weakref.ref(tmp[0])
    del tmp
    gc.collect()
    assert ref() is None
    assert len(uop._cache) < before + 1000
    assert UOp.variable("tmp_cache", 0, 5) is UOp.variable("tmp_cache", 0, 5)


def test_equal_dtype_objects_share_nodes() -> None:
    a, b = dtypes.int32.vec(2), dtypes.int32.vec(2)
    assert a is not b and a == b
    assert UOp(Ops.VCONST, a, (), (1, 2)) is UOp(Ops.VCONST, b, (), (1, 2))
    assert UOp(Ops.VCONST, a, (), (1, 2)) is not UOp(Ops.VCONST, dtypes.int64.vec(2), (), (1, 2))


def test_dtype_patterns_match_equal_dtypes_and_vectors_of_them() -> None:
    # compiled dtype checks compare the dtypes' cache tokens: an equal dtype that is another object
    # matches, a vector matches by its scalar, and other dtypes do not
    pm = PatternMatcher([(UPat(Ops.ADD, dtype=dtypes.int32, name="a"), lambda a: a.src[0])])
    other_int32 = dtypes.int32.vec(4).scalar()
    assert other_int32 is not dtypes.int32
    v = UOp.variable("dt_pat", 0, 3)
    assert pm.rewrite(UOp(Ops.ADD, other_int32, (v, v))) is v
    vec = UOp(Ops.VECTORIZE, dtypes.int32.vec(2), (v, v))
    assert pm.rewrite(UOp(Ops.ADD, dtypes.int32.vec(2), (vec, vec))) is vec
    f = UOp.const(dtypes.float32, 1.0)
    assert pm.rewrite(UOp(Ops.ADD, dtypes.float32, (f, f))) is None
    i64 = UOp.const(dtypes.int64, 1)
    assert pm.rewrite(UOp(Ops.ADD, dtypes.int64, (i64, i64))) is None


# ----------------------------------------------------------------------------------------
# the fast engine against the reference walk (reference_rewrite: UPat.match, plain recursion)
# ----------------------------------------------------------------------------------------
def test_fast_walks_and_generated_matchers_agree_with_the_reference_walk() -> None:
    """Every walk graph_rewrite has (top-down, bottom-up, remembering, with the matchers' build shortcuts) and
    the generated matcher code give what the plainly written reference walk gives with interpreted matching."""
    from uops.ir.rewrite import reference_rewrite
    from uops.ir.symbolic import simplify, symbolic, symbolic_simple

    rng = random.Random(11)
    for n in range(60):
        g = _random_index_graph(rng, rng.randrange(3, 30))
        for pm in (symbolic, symbolic_simple):
            for bottom_up in (False, True):
                want = reference_rewrite(g, pm, bottom_up=bottom_up)
                assert graph_rewrite(g, pm, bottom_up=bottom_up) is want, (n, bottom_up)
                assert graph_rewrite(g, pm, bottom_up=bottom_up, remember=True) is want, (n, bottom_up)
        assert simplify(g) is reference_rewrite(g, symbolic, bottom_up=True)


def test_reference_walk_passes_ctx_and_follows_rule_results() -> None:
    from uops.ir.rewrite import reference_rewrite

    seen: list[Ops] = []
    pm = PatternMatcher(
        [
            (UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k"))), lambda ctx, a, k: ctx.append(Ops.MUL) or a + a),
            (UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a"))), lambda ctx, a: ctx.append(Ops.ADD) or a),
        ]
    )
    g = UOp.sink((x * 2) + y, (x * 2) * 3)
    for bottom_up in (False, True):
        seen.clear()
        want = reference_rewrite(g, pm, ctx=seen, bottom_up=bottom_up)
        fired = list(seen)
        seen.clear()
        assert graph_rewrite(g, pm, ctx=seen, bottom_up=bottom_up) is want and sorted(seen) == sorted(fired)
    assert want is UOp.sink(x + y, x)
