"""Rewrite-engine throughput: uops vs tinygrad (when installed), in one run, as ratios.

  .venv/bin/python bench/rewrite.py [--quick] [--profile | --callgrind]

(a) simplify 10,000 random index expressions (fixed seed), nodes per second;
(b) rewrite a 100,000-node graph with a 50-rule PatternMatcher, nodes per second.
Both workloads are described once in a neutral form and built in each IR with the same raw
ops (tinygrad's FLOORDIV/FLOORMOD stand in for IDIV/MOD: every value here is nonnegative, so
floor and C division agree). Each timing is the best of five runs on freshly built graphs, the two
engines taking turns run by run; the ratios of each pair of runs are printed too, for the spread.
The node count of uops' simplified expressions is checked against the count the simplifier
reached before its speed work (SIMPLIFIED_NODES_BEFORE): faster must not mean simplifying less.
--profile runs workload (a) under cProfile for uops alone and prints where the time goes.
--callgrind reruns this script under valgrind and prints the instructions each engine spends in
each timed section (the second of two repeats: matchers compiled), a measure a shared machine's
load does not move, for A/B comparisons.
"""

from __future__ import annotations

import argparse
import gc
import glob
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

Spec = tuple  # ("var", i) | ("const", v) | (opname, spec, spec)

# uops' total simplified node count for workload (a) at this seed, by expression count, with the
# simplifier as it was before its speed work (commit 4d69a9c)
SIMPLIFIED_NODES_BEFORE = {1_000: 7_847, 10_000: 79_382}

VARS = [("gidx0", 0, 31), ("gidx1", 0, 15), ("lidx0", 0, 15), ("lidx1", 0, 7), ("ridx0", 0, 63), ("ridx1", 0, 2)]


# ----------------------------------------------------------------------------------------
# workload descriptions
# ----------------------------------------------------------------------------------------
def index_expr(rng: random.Random, depth: int) -> Spec:
    """Index math as a lowering makes it: flatten, split, reshape, pad, stride."""
    if depth == 0 or rng.random() < 0.15:
        return ("var", rng.randrange(len(VARS))) if rng.random() < 0.8 else ("const", rng.randint(0, 9))
    r = rng.random()
    a = index_expr(rng, depth - 1)
    if r < 0.30:  # flatten / split: a*K + b
        return ("add", ("mul", a, ("const", rng.choice([2, 3, 4, 8, 16, 32]))), index_expr(rng, depth - 1))
    if r < 0.45:
        return ("idiv", a, ("const", rng.choice([2, 3, 4, 8, 16])))
    if r < 0.60:
        return ("mod", a, ("const", rng.choice([2, 3, 4, 8, 16])))
    if r < 0.75:
        return ("add", a, ("const", rng.randint(-3, 8)))
    if r < 0.85:
        return ("add", a, index_expr(rng, depth - 1))
    if r < 0.92:
        return ("lt", a, ("const", rng.randint(0, 64)))
    return ("max", a, ("const", rng.randint(0, 4)))


def big_graph(rng: random.Random, n: int) -> list[Spec]:
    """A DAG of about n ALU nodes: each node uses the previous one and a recent one or a constant."""
    nodes: list[Any] = [("var", i) for i in range(len(VARS))]
    ops = ["add", "mul", "sub", "max", "add", "mul"]
    for _ in range(n):
        a = nodes[-1]
        r = rng.random()
        if r < 0.45:
            b: Any = ("const", rng.choice([0, 1, 2, 3, 5, 7, 1, 0]))
        else:
            b = nodes[-rng.randint(1, min(64, len(nodes)))]
        nodes.append((rng.choice(ops), a, b) if rng.random() < 0.5 else (rng.choice(ops), b, a))
    return nodes


class Builder:
    """Turns specs into UOps of one IR, sharing built nodes (the specs are DAGs)."""

    def __init__(self, make_var: Callable, make_const: Callable, make_op: Callable) -> None:
        self.make_var, self.make_const, self.make_op = make_var, make_const, make_op
        self.memo: dict[int, Any] = {}

    def build(self, spec: Spec) -> Any:
        # iterative: the big graph is deep
        stack: list[tuple[Spec, bool]] = [(spec, False)]
        memo = self.memo
        while stack:
            s, ready = stack.pop()
            if id(s) in memo:
                continue
            if s[0] == "var":
                memo[id(s)] = self.make_var(*VARS[s[1]])
            elif s[0] == "const":
                memo[id(s)] = self.make_const(s[1])
            elif ready:
                memo[id(s)] = self.make_op(s[0], memo[id(s[1])], memo[id(s[2])])
            else:
                stack.append((s, True))
                stack.append((s[2], False))
                stack.append((s[1], False))
        return memo[id(spec)]


# ----------------------------------------------------------------------------------------
# the IRs
# ----------------------------------------------------------------------------------------
def uops_ir() -> dict[str, Any]:
    from uops import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite
    from uops.ir.symbolic import simplify

    i32, b = dtypes.int32, dtypes.bool
    names = {"add": Ops.ADD, "mul": Ops.MUL, "sub": Ops.SUB, "max": Ops.MAX, "idiv": Ops.IDIV, "mod": Ops.MOD}

    def make_op(name: str, a: UOp, c: UOp) -> UOp:
        if name == "lt":  # a mask in index math is an int: the comparison cast back, so every node is well typed
            return UOp(Ops.CAST, i32, (UOp(Ops.CMPLT, b, (a, c)),))
        return UOp(names[name], i32, (a, c))

    return {
        "name": "uops",
        "builder": lambda: Builder(lambda n, lo, hi: UOp.variable(n, lo, hi), lambda v: UOp.const(i32, v), make_op),
        "simplify": simplify,
        "rewrite": lambda g, pm: graph_rewrite(g, pm, bottom_up=True),
        "pm": lambda: rules(Ops, UPat, PatternMatcher, i32),
        "count": lambda u: len(u.toposort()),
    }


def tinygrad_ir() -> dict[str, Any] | None:
    try:
        from tinygrad.dtype import dtypes
        from tinygrad.uop.ops import Ops, PatternMatcher, UOp, UPat, graph_rewrite
        from tinygrad.uop.symbolic import symbolic
    except ImportError:
        return None
    i32, b = dtypes.int32, dtypes.bool
    names = {"add": Ops.ADD, "mul": Ops.MUL, "sub": Ops.SUB, "max": Ops.MAX, "idiv": Ops.FLOORDIV, "mod": Ops.FLOORMOD}

    def make_op(name: str, a: UOp, c: UOp) -> UOp:
        if name == "lt":
            return UOp(Ops.CAST, i32, (UOp(Ops.CMPLT, b, (a, c)),))
        return UOp(names[name], i32, (a, c))

    return {
        "name": "tinygrad",
        "builder": lambda: Builder(
            lambda n, lo, hi: UOp.variable(n, lo, hi, i32), lambda v: UOp.const(v, i32), make_op
        ),
        "simplify": lambda u: graph_rewrite(u, symbolic),  # what UOp.simplify does, minus its Context
        "rewrite": lambda g, pm: graph_rewrite(g, pm),  # tinygrad's pm runs after the sources: bottom-up
        "pm": lambda: rules(Ops, UPat, PatternMatcher, i32, floordiv=Ops.FLOORDIV),
        "count": lambda u: len(u.toposort()),
    }


def rules(Ops: Any, UPat: Any, PatternMatcher: Any, dt: Any, floordiv: Any = None) -> Any:
    """50 rules written with only what both engines share: ops, names, captures, const_like."""
    idiv = floordiv if floordiv is not None else Ops.IDIV
    V, C = UPat.var, UPat.cvar
    r: list[tuple[Any, Callable]] = [
        # rules that fire on this graph
        (UPat(Ops.ADD, src=[V("x"), UPat(Ops.CONST, arg=0)]), lambda x: x),
        (UPat(Ops.MUL, src=[V("x"), UPat(Ops.CONST, arg=1)]), lambda x: x),
        (UPat(Ops.MUL, src=[V("x"), UPat(Ops.CONST, arg=0, name="z")]), lambda x, z: z),
        (UPat(Ops.SUB, src=(V("x"), UPat(Ops.CONST, arg=0))), lambda x: x),
        (UPat(Ops.SUB, src=(V("x"), V("x")), name="s"), lambda s, x: s.const_like(0)),
        (UPat(Ops.MAX, src=(V("x"), V("x"))), lambda x: x),
        (UPat(Ops.MAX, src=[V("x"), UPat(Ops.CONST, arg=0)]), lambda x: x if x.op.name == "MAX" else None),
    ]
    # rules that match often and decline (the function runs and returns None)
    for k in range(15):
        op = [Ops.ADD, Ops.MUL, Ops.SUB, Ops.MAX][k % 4]
        src: Any = [V("x"), C("c")] if op is not Ops.SUB else (V("x"), C("c"))
        r.append((UPat(op, src=src, name="n"), lambda n, x, c, k=k: None if c.arg != 1000 + k else x))
    # nested patterns that are tried and fail deeper in the graph
    for k in range(14):
        inner = UPat([Ops.ADD, Ops.MUL][k % 2], src=[V("y"), C("c1")])
        outer = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.SUB][k % 4]
        src = [inner, C("c2")] if outer is not Ops.SUB else (inner, C("c2"))
        r.append((UPat(outer, src=src), lambda y, c1, c2, k=k: y if c1.arg == 2000 + k else None))
    # rules for ops this graph does not contain
    for k in range(14):
        op = [Ops.WHERE, Ops.CMPLT, Ops.NEG, idiv, Ops.CMPNE, Ops.RECIPROCAL, Ops.EXP2][k % 7]
        r.append((UPat(op, name="w"), lambda w, k=k: None))
    assert len(r) == 50, len(r)
    return PatternMatcher(r)


# ----------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------
class Section:
    """Under --callgrind: instructions are counted only inside ``with section(name)`` of the last repeat,
    each section dumped to its own file; otherwise nothing happens.

    Counting starts and stops a moment after the callgrind_control call that asks for it, so the Python
    code of that call is counted too; the cycle collector is paused around it, so a collection that
    the section's allocations have made due does not run there (the timer, stopped before, leaves it
    out as well)."""

    def __init__(self) -> None:
        self.active = False

    def __call__(self, name: str, last: bool) -> Section:
        self.name, self.counting = name, self.active and last
        return self

    def _control(self, *args: str) -> None:
        enabled = gc.isenabled()
        gc.disable()
        try:
            subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)
        finally:
            if enabled:
                gc.enable()

    def __enter__(self) -> None:
        if self.counting:
            self._control("-i", "on")

    def __exit__(self, *exc: object) -> None:
        if self.counting:
            self._control("-i", "off")
            self._control("-d", self.name)


section = Section()


def time_simplify(ir: dict[str, Any], specs: list[Spec], counted: bool) -> tuple[float, int, int]:
    """One timed simplify of freshly built expressions: (seconds, nodes in, nodes out)."""
    simplify = ir["simplify"]
    exprs = [ir["builder"]().build(s) for s in specs]  # fresh nodes every repeat
    nodes = sum(ir["count"](e) for e in exprs)
    gc.collect()
    with section(f"{ir['name']}:a", counted):
        t0 = time.perf_counter()
        out = [simplify(e) for e in exprs]
        t1 = time.perf_counter()
    out_nodes = sum(ir["count"](o) for o in out)
    del out, exprs
    return t1 - t0, nodes, out_nodes


def profile_simplify(specs: list[Spec]) -> None:
    import cProfile
    import pstats

    ir = uops_ir()
    simplify = ir["simplify"]
    exprs = [ir["builder"]().build(s) for s in specs]
    gc.collect()
    prof = cProfile.Profile()
    prof.enable()
    out = [simplify(e) for e in exprs]
    prof.disable()
    del out
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def time_rewrite(ir: dict[str, Any], pm: Any, graph: list[Spec], counted: bool) -> tuple[float, int, int]:
    """One timed rewrite of a freshly built graph: (seconds, nodes in, nodes out)."""
    g = ir["builder"]().build(graph[-1])
    nodes = ir["count"](g)
    gc.collect()
    with section(f"{ir['name']}:b", counted):
        t0 = time.perf_counter()
        out = ir["rewrite"](g, pm)
        t1 = time.perf_counter()
    out_nodes = ir["count"](out)
    del out, g
    return t1 - t0, nodes, out_nodes


def run_callgrind(argv: list[str]) -> None:
    """This script again under callgrind, counting only the timed sections; prints their instructions."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
        env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts every run
        subprocess.run([*cmd, sys.executable, __file__, *argv, "--callgrind-child"], check=True, env=env)
        counts: dict[str, int] = {}
        for f in glob.glob(out + ".*"):
            text = open(f).read()
            lines = text.splitlines()
            trigger = next(ln for ln in lines if ln.startswith("desc: Trigger:"))  # names the section dumped
            name = trigger.rsplit(" ", 1)[-1].strip("'\"")
            if ":" in name:
                counts[name] = next(int(ln.split()[1]) for ln in lines if ln.startswith("totals:"))
    for name, total in sorted(counts.items()):
        print(f"{name:>12}: {total / 1e6:9.1f} M instructions")
    for w in "ab":
        if f"uops:{w}" in counts and f"tinygrad:{w}" in counts:
            print(f"instruction ratio tinygrad/uops ({w}): {counts[f'tinygrad:{w}'] / counts[f'uops:{w}']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tenth of the work, one repeat (smoke test)")
    ap.add_argument("--no-tinygrad", action="store_true")
    ap.add_argument("--profile", action="store_true", help="cProfile uops on workload (a) and stop")
    ap.add_argument("--callgrind", action="store_true", help="instructions per timed section, under valgrind")
    ap.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.callgrind:
        run_callgrind([a for a in sys.argv[1:] if a != "--callgrind"])
        return
    section.active = args.callgrind_child
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
    n_expr, n_graph, repeats = (1_000, 10_000, 1) if args.quick else (10_000, 100_000, 5)
    if args.callgrind_child:
        repeats = 2  # the first compiles the matchers
    rng = random.Random(1234)
    specs = [index_expr(rng, 5) for _ in range(n_expr)]
    graph = big_graph(random.Random(5678), n_graph)
    if args.profile:
        profile_simplify(specs)
        return

    irs = [uops_ir()]
    tg = None if args.no_tinygrad else tinygrad_ir()
    if tg is not None:
        irs.append(tg)
    else:
        print("tinygrad not importable: uops numbers only")
    # The engines take turns, repeat by repeat, and each keeps its best time: a busy spell of a shared
    # machine then slows both sides of a ratio instead of one. Node counts come from the uops graphs, so
    # both engines are credited with the same work.
    times: dict[tuple[str, str], list[float]] = {}
    counts: dict[str, tuple[int, int]] = {}
    pms = {ir["name"]: ir["pm"]() for ir in irs}
    for work in ("simplify", "rewrite"):
        for rep in range(repeats):
            for ir in irs:
                counted = rep == repeats - 1
                if work == "simplify":
                    t, n_in, n_out = time_simplify(ir, specs, counted)
                    if ir["name"] == "uops" and n_out > SIMPLIFIED_NODES_BEFORE[n_expr]:
                        limit = SIMPLIFIED_NODES_BEFORE[n_expr]
                        sys.exit(f"uops simplified (a) to {n_out} nodes, more than the {limit} before")
                else:
                    t, n_in, n_out = time_rewrite(ir, pms[ir["name"]], graph, counted)
                times.setdefault((ir["name"], work), []).append(t)
                counts[f"{ir['name']}:{work}"] = (n_in, n_out)
    for ir in irs:
        name = ir["name"]
        ns, nso = counts["uops:simplify"][0], counts[f"{name}:simplify"][1]
        nr, nout = counts["uops:rewrite"][0], counts[f"{name}:rewrite"][1]
        ts, tr = min(times[name, "simplify"]), min(times[name, "rewrite"])
        print(
            f"{name:>9}: (a) simplify {n_expr} exprs ({ns} nodes -> {nso}):"
            f" {ts * 1e3:6.0f} ms = {ns / ts:>9,.0f} nodes/s"
            f" | (b) 50 rules, {nr} nodes -> {nout}: {tr * 1e3:6.0f} ms = {nr / tr:>9,.0f} nodes/s"
        )
    if tg is not None:
        best = {w: min(times["tinygrad", w]) / min(times["uops", w]) for w in ("simplify", "rewrite")}
        print(f"ratio uops/tinygrad: (a) simplify {best['simplify']:.1f}x  (b) rewrite {best['rewrite']:.1f}x")
        for w, label in (("simplify", "(a)"), ("rewrite", "(b)")):
            pairs = sorted(t / u for u, t in zip(times["uops", w], times["tinygrad", w]))
            spread = " ".join(f"{p:.1f}x" for p in pairs)
            print(f"  {label} run by run, sorted: {spread} (of the best times: {best[w]:.1f}x)")


if __name__ == "__main__":
    main()
