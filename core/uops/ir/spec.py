"""Stage checks: a malformed graph fails here with the offending node and its inputs printed.

Stages: "ast" (kernel AST from the scheduler), "lowered" (after full_rewrite_to_sink),
"linear" (the renderer's input list) and "program" (a PROGRAM node in any of its four forms).
What comes from outside (a kernel AST, a loaded program) is always checked; the graphs the compiler
makes itself only with ``UOPS_SPEC=1`` (``verify_own``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from uops.dtypes import AddrSpace, PtrDType, dtypes
from uops.errors import UopsError
from uops.ir.ops import AxisType, GroupOp, Ops
from uops.ir.uop import UOp


class SpecError(UopsError, ValueError):
    """A graph that breaks a stage's rules. The message prints the node and its sources."""


def _fail(u: UOp, stage: str, why: str) -> SpecError:
    srcs = "\n".join(f"    src[{i}]: {s.op.name} {s.dtype!r} arg={s.arg!r}" for i, s in enumerate(u.src))
    return SpecError(f"{stage} check failed: {why}\n  node: {u.op.name} {u.dtype!r} arg={u.arg!r}\n{srcs}".rstrip())


Check = Callable[[UOp], str | None]


def _arity(lo: int, hi: int | None = None) -> Check:
    hi = lo if hi is None else hi

    def check(u: UOp) -> str | None:
        n = len(u.src)
        if n < lo or (hi is not None and hi >= 0 and n > hi):
            want = f"{lo}" if lo == hi else f"{lo}..{'any' if hi is None or hi < 0 else hi}"
            return f"{u.op.name} takes {want} sources, got {n}"
        return None

    return check


def _alu(u: UOp) -> str | None:
    n = 1 if u.op in GroupOp.Unary else 2 if u.op in GroupOp.Binary else 3
    if len(u.src) != n:
        return f"{u.op.name} takes {n} sources, got {len(u.src)}"
    if u.op is Ops.WHERE:
        if u.src[0].dtype.scalar() != dtypes.bool:
            return f"WHERE condition must be bool, got {u.src[0].dtype!r}"
        if not (u.src[1].dtype == u.src[2].dtype == u.dtype):
            return (
                f"WHERE branches and result must share a dtype: {u.src[1].dtype!r}, {u.src[2].dtype!r} -> {u.dtype!r}"
            )
        return None
    if u.op in GroupOp.Comparison:
        if u.dtype.scalar() != dtypes.bool:
            return f"{u.op.name} produces bool, not {u.dtype!r}"
        if u.src[0].dtype != u.src[1].dtype:
            return f"{u.op.name} compares different dtypes {u.src[0].dtype!r} and {u.src[1].dtype!r}"
        return None
    if u.op in (Ops.SHL, Ops.SHR):
        return None if u.src[0].dtype == u.dtype else f"{u.op.name} result dtype differs from its input"
    for s in u.src:
        if s.dtype != u.dtype:
            return f"{u.op.name} of {u.dtype!r} has a source of dtype {s.dtype!r}; insert a CAST"
    if u.op is Ops.IDIV and not dtypes.is_int(u.dtype):
        return f"IDIV is integer division; use FDIV for {u.dtype!r}"
    if u.op is Ops.MOD and dtypes.is_bool(u.dtype):
        return "MOD of bools; cast to an integer first"
    return None


def _const(u: UOp) -> str | None:
    if u.src:
        return "CONST has no sources"
    if not isinstance(u.arg, (bool, int, float)):
        return f"CONST arg must be a number, got {type(u.arg).__name__}"
    return None


def _index(u: UOp) -> str | None:
    if len(u.src) not in (2, 3):
        return f"INDEX takes (buffer, index[, gate]), got {len(u.src)} sources"
    if not isinstance(u.src[0].dtype, PtrDType):
        return f"INDEX base must be a pointer, got {u.src[0].dtype!r}"
    if not dtypes.is_int(u.src[1].dtype):
        return f"INDEX index must be an integer, got {u.src[1].dtype!r}"
    if len(u.src) == 3 and u.src[2].dtype != dtypes.bool:
        return f"INDEX gate must be bool, got {u.src[2].dtype!r}"
    return None


def _load(u: UOp) -> str | None:
    if len(u.src) not in (1, 2) or u.src[0].op is not Ops.INDEX:
        return "LOAD takes (INDEX[, alt])"
    if len(u.src) == 2 and len(u.src[0].src) != 3:
        return "a LOAD with an alternative value needs a gated INDEX"
    if len(u.src[0].src) == 3 and len(u.src) != 2:
        return "a LOAD from a gated INDEX needs the value to use when the gate is false"
    return None


def _store(u: UOp) -> str | None:
    if len(u.src) != 2 or u.src[0].op is not Ops.INDEX:
        return "STORE takes (INDEX, value)"
    return None


def _define_global(u: UOp) -> str | None:
    if not isinstance(u.dtype, PtrDType) or u.dtype.addrspace is not AddrSpace.GLOBAL:
        return f"DEFINE_GLOBAL must have a global pointer dtype, got {u.dtype!r}"
    return None if isinstance(u.arg, int) else "DEFINE_GLOBAL arg is the buffer slot (int)"


def _define_var(u: UOp) -> str | None:
    a = u.arg
    if not (isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], str)):
        return "DEFINE_VAR arg is (name, min, max)"
    return None if dtypes.is_int(u.dtype) else "DEFINE_VAR must be an integer"


def _range(ast: bool) -> Check:
    def check(u: UOp) -> str | None:
        if not u.src or not dtypes.is_int(u.src[0].dtype):
            return "RANGE takes an integer end as its first source"
        if not (isinstance(u.arg, tuple) and len(u.arg) == 2 and isinstance(u.arg[1], AxisType)):
            return "RANGE arg is (axis id, AxisType)"
        if ast and len(u.src) != 1:
            return "a kernel AST RANGE has exactly one source (its end)"
        if ast and u.arg[1] not in (AxisType.GLOBAL, AxisType.REDUCE):
            return f"a kernel AST RANGE is GLOBAL or REDUCE, got {u.arg[1].name}"
        return None

    return check


def _reduce(u: UOp) -> str | None:
    if u.arg not in (Ops.ADD, Ops.MAX, Ops.MUL):
        return f"REDUCE arg must be ADD, MAX or MUL, got {u.arg!r}"
    if not u.src or any(r.op is not Ops.RANGE for r in u.src[1:]):
        return "REDUCE takes (value, *RANGEs)"
    return None if u.src[0].dtype == u.dtype else "REDUCE dtype must match its value"


def _end(u: UOp) -> str | None:
    if len(u.src) < 2 or u.src[-1].op is not Ops.RANGE:
        return "END takes (*statements, RANGE)"
    return None


_COMMON: dict[Ops, Check] = {
    Ops.CONST: _const,
    Ops.DEFINE_GLOBAL: _define_global,
    Ops.DEFINE_VAR: _define_var,
    Ops.INDEX: _index,
    Ops.LOAD: _load,
    Ops.STORE: _store,
    Ops.CAST: _arity(1),
    Ops.BITCAST: _arity(1),
    Ops.SINK: _arity(0, -1),
    Ops.VECTORIZE: _arity(1, -1),
    Ops.GEP: _arity(1),
    Ops.VCONST: _arity(0),
}
for _op in GroupOp.ALU:
    _COMMON[_op] = _alu

AST_SPEC: dict[Ops, Check] = {**_COMMON, Ops.RANGE: _range(True), Ops.REDUCE: _reduce}
LOWERED_SPEC: dict[Ops, Check] = {
    **_COMMON,
    Ops.RANGE: _range(False),
    Ops.END: _end,
    Ops.DEFINE_REG: _arity(0),
    Ops.DEFINE_LOCAL: _arity(0),
    Ops.SPECIAL: _arity(1),
    Ops.AFTER: _arity(1, -1),
    Ops.BARRIER: _arity(0, -1),
    Ops.SHUFFLE: _arity(1),
}
LINEAR_SPEC: dict[Ops, Check] = {k: v for k, v in LOWERED_SPEC.items() if k is not Ops.SINK}


def _program(u: UOp) -> str | None:
    forms = [(Ops.SINK,), (Ops.SINK, Ops.LINEAR), (Ops.SINK, Ops.LINEAR, Ops.SOURCE),
             (Ops.SINK, Ops.LINEAR, Ops.SOURCE, Ops.BINARY)]  # fmt: skip
    got = tuple(s.op for s in u.src)
    if got not in forms:
        return f"PROGRAM sources must be one of SINK / +LINEAR / +SOURCE / +BINARY, got {[o.name for o in got]}"
    if len(got) >= 3 and not isinstance(u.src[2].arg, str):
        return "SOURCE arg must be the source text"
    if len(got) == 4 and not isinstance(u.src[3].arg, bytes):
        return "BINARY arg must be bytes"
    return None


STAGES: dict[str, dict[Ops, Check]] = {"ast": AST_SPEC, "lowered": LOWERED_SPEC, "linear": LINEAR_SPEC}


def verify(graph: UOp | list[UOp], stage: str) -> None:
    """Raise SpecError naming the first node that breaks ``stage``'s rules."""
    if stage == "program":
        assert isinstance(graph, UOp)
        if graph.op is not Ops.PROGRAM:
            raise _fail(graph, stage, "expected a PROGRAM node")
        if (why := _program(graph)) is not None:
            raise _fail(graph, stage, why)
        verify(graph.src[0], "lowered")
        if len(graph.src) > 1:
            verify(list(graph.src[1].src), "linear")
        return
    try:
        table = STAGES[stage]
    except KeyError:
        raise ValueError(f"unknown stage {stage!r}; stages are {[*STAGES, 'program']}") from None
    nodes = graph.toposort() if isinstance(graph, UOp) else graph
    if stage == "ast" and isinstance(graph, UOp):
        if graph.op is not Ops.SINK or not graph.src or any(s.op is not Ops.STORE for s in graph.src):
            raise _fail(graph, stage, "a kernel AST is a SINK of STOREs")
    for u in nodes:
        check = table.get(u.op)
        if check is None:
            raise _fail(u, stage, f"{u.op.name} is not allowed in the {stage} stage")
        if (why := check(u)) is not None:
            raise _fail(u, stage, why)
    if stage == "linear":
        seen: set[UOp] = set()
        for u in nodes:
            for s in u.src:
                if s not in seen:
                    raise _fail(u, stage, f"uses {s.op.name} before it is defined")
            seen.add(u)


def self_checks() -> bool:
    """``UOPS_SPEC=1``: the compiler also checks the graphs it makes itself (the test suite turns this on).

    Why off by default: those checks walk every lowered graph and linear program of every kernel again, a
    large share of a cold first call, and they guard the compiler's own invariants, not its input.
    """
    return os.environ.get("UOPS_SPEC", "").strip() not in ("", "0")


def verify_own(graph: UOp | list[UOp], stage: str) -> None:
    """``verify`` for a graph the compiler made itself: only when ``self_checks()``."""
    if self_checks():
        verify(graph, stage)
