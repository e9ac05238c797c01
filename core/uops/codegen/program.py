"""The one compiler path: PROGRAM(SINK) -> +LINEAR -> +SOURCE -> +BINARY, and ProgramSpec.

Each step is one rule of ``pm_to_program`` applied by graph_rewrite; with ``UOPS_SPEC=1`` the stage
checks verify every PROGRAM form. ``get_program`` returns a ProgramSpec that serialises to plain data, so a
program compiled here runs anywhere the runtime is installed, and that carries the PROGRAM node it was read
from (``spec.program``), so one lowering gives both. Running never compiles.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any

from uops.codegen.heuristics import hand_coded_opts
from uops.codegen.linearizer import linearize
from uops.codegen.lowerer import LOWERING, LowerContext, Pass, kernel_name, run_passes
from uops.codegen.opt import Opt
from uops.compiler import Compiler
from uops.dtypes import PtrDType, dtypes
from uops.ir.ops import GroupOp, Ops
from uops.ir.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.ir.serialize import uops_from_data, uops_to_data
from uops.ir.spec import verify_own
from uops.ir.symbolic import symbolic
from uops.ir.uop import UOp
from uops.renderer import Renderer

__all__ = [
    "PASSES",
    "PROGRAM_PASSES",
    "Estimates",
    "ProgramSpec",
    "format_stages",
    "get_program",
    "kernel_name",
    "lower_to_program",
    "pm_to_program",
    "program_spec",
    "program_stages",
]

SPEC_FORMAT = 1


def _add_linear(ctx: LowerContext, prg: UOp, sink: UOp) -> UOp:
    out = prg.replace(src=(sink, UOp(Ops.LINEAR, src=tuple(linearize(sink)))))
    verify_own(out, "program")
    return out


def _add_source(ctx: LowerContext, prg: UOp, sink: UOp, lin: UOp) -> UOp:
    src = ctx.ren.render(prg.arg, list(lin.src))
    out = prg.replace(src=(sink, lin, UOp(Ops.SOURCE, arg=src)))
    verify_own(out, "program")
    return out


def _add_binary(ctx: LowerContext, prg: UOp, sink: UOp, lin: UOp, source: UOp) -> UOp:
    lib = ctx.compiler.compile_cached(source.arg)
    out = prg.replace(src=(sink, lin, source, UOp(Ops.BINARY, arg=lib)))
    verify_own(out, "program")
    return out


_sink, _lin, _source = UPat(Ops.SINK, name="sink"), UPat(Ops.LINEAR, name="lin"), UPat(Ops.SOURCE, name="source")
pm_linearize = PatternMatcher([(UPat(Ops.PROGRAM, src=(_sink,), name="prg"), _add_linear)])
pm_render = PatternMatcher([(UPat(Ops.PROGRAM, src=(_sink, _lin), name="prg"), _add_source)])
pm_compile = PatternMatcher([(UPat(Ops.PROGRAM, src=(_sink, _lin, _source), name="prg"), _add_binary)])
#: PROGRAM(SINK) through its four forms in one rewrite
pm_to_program = pm_linearize + pm_render + pm_compile

#: low-level SINK -> PROGRAM(SINK, LINEAR, SOURCE, BINARY), after ``LOWERING``
PROGRAM_PASSES: list[tuple[str, Pass]] = [
    ("program", lambda sink, ctx: UOp(Ops.PROGRAM, src=(sink,), arg=ctx.name)),
    ("linearize", lambda prg, ctx: graph_rewrite(prg, pm_linearize, ctx=ctx)),
    ("render", lambda prg, ctx: graph_rewrite(prg, pm_render, ctx=ctx)),
    ("compile", lambda prg, ctx: graph_rewrite(prg, pm_compile, ctx=ctx)),
]
#: the one compiler path: every pass from the kernel AST to its PROGRAM node, by name
PASSES: list[tuple[str, Pass]] = LOWERING + PROGRAM_PASSES


def lower_to_program(
    ast: UOp, renderer: Renderer, compiler: Compiler, opts: list[Opt] | None = None, trace: bool = False
) -> tuple[UOp, LowerContext]:
    """Kernel AST -> its PROGRAM node through ``PASSES``, and the passes' context (launch dims, the opts, and with
    ``trace`` each pass's name and graph size). ``opts=None``: the default heuristics."""
    if opts is None:
        opts = hand_coded_opts(ast, renderer)
    ctx = LowerContext(renderer, list(opts), compiler=compiler, trace=[] if trace else None)
    return run_passes(ast, ctx, PASSES), ctx


@dataclass
class Estimates:
    """Work of one launch; with symbolic sizes, an upper bound from the variables' maxima."""

    ops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass
class ProgramSpec:
    name: str
    src: str
    device: str
    target: str
    ast: UOp
    uops: list[UOp]
    lib: bytes
    global_size: tuple[UOp, ...]  # workgroups per dimension (CONST or an expression of variables)
    local_size: tuple[int, ...]
    vars: list[UOp]  # DEFINE_VARs in parameter order
    outs: list[int]  # buffer slots written
    ins: list[int]  # buffer slots read
    buffers: dict[int, str] = field(default_factory=dict)  # slot -> dtype name
    estimates: Estimates = field(default_factory=Estimates)
    opts: list[Opt] = field(default_factory=list)  # the kernel optimizations applied
    # the PROGRAM(SINK, LINEAR, SOURCE, BINARY) node this spec was read from; None for a spec loaded from data
    program: UOp | None = field(default=None, compare=False, repr=False)

    @property
    def var_names(self) -> list[str]:
        return [v.arg[0] for v in self.vars]

    def launch_dims(self, var_vals: dict[str, int] | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(global, local) sizes padded to 3 dimensions, evaluating symbolic sizes."""
        vals = var_vals or {}
        g = tuple(_eval_int(x, vals) for x in self.global_size)
        loc = tuple(self.local_size)
        return (g + (1,) * (3 - len(g))), (loc + (1,) * (3 - len(loc)))

    def vals(self, var_vals: dict[str, int] | None = None) -> tuple[int, ...]:
        vals = var_vals or {}
        out = []
        for v in self.vars:
            name, lo, hi = v.arg
            if name not in vals:
                raise ValueError(f"kernel {self.name} needs a value for variable {name!r}")
            if not lo <= vals[name] <= hi:
                raise ValueError(f"variable {name}={vals[name]} is outside its declared range [{lo}, {hi}]")
            out.append(int(vals[name]))
        return tuple(out)

    # ----- plain data -----
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe values plus ``lib`` as bytes. Never pickle."""
        roots = [self.ast, *self.uops, *self.global_size, *self.vars]
        return {
            "format": SPEC_FORMAT,
            "name": self.name,
            "src": self.src,
            "device": self.device,
            "target": self.target,
            "lib": self.lib,
            "graph": uops_to_data(roots),
            "n_uops": len(self.uops),
            "n_global": len(self.global_size),
            "local_size": list(self.local_size),
            "outs": list(self.outs),
            "ins": list(self.ins),
            "buffers": {str(k): v for k, v in self.buffers.items()},
            "estimates": [self.estimates.ops, self.estimates.bytes_read, self.estimates.bytes_written],
            "opts": [o.to_data() for o in self.opts],
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ProgramSpec:
        if d.get("format") != SPEC_FORMAT:
            raise ValueError(f"ProgramSpec format {d.get('format')!r} is not supported (this core reads {SPEC_FORMAT})")
        if not isinstance(d.get("lib"), bytes):
            raise ValueError("ProgramSpec data has no compiled 'lib' bytes")
        roots = uops_from_data(d["graph"])
        n, g = d["n_uops"], d["n_global"]
        return ProgramSpec(
            name=d["name"],
            src=d["src"],
            device=d["device"],
            target=d["target"],
            ast=roots[0],
            uops=roots[1 : 1 + n],
            lib=d["lib"],
            global_size=tuple(roots[1 + n : 1 + n + g]),
            local_size=tuple(d["local_size"]),
            vars=roots[1 + n + g :],
            outs=list(d["outs"]),
            ins=list(d["ins"]),
            buffers={int(k): v for k, v in d["buffers"].items()},
            estimates=Estimates(*d["estimates"]),
            opts=[Opt.from_data(o) for o in d.get("opts", [])],
        )

    def to_json(self) -> str:
        d = self.to_dict()
        d["lib"] = base64.b64encode(self.lib).decode()
        return json.dumps(d)

    @staticmethod
    def from_json(text: str) -> ProgramSpec:
        d = json.loads(text)
        d["lib"] = base64.b64decode(d["lib"])
        return ProgramSpec.from_dict(d)


_bind_vars = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: UOp.const(v.dtype, ctx[v.arg[0]]))])


def _eval_int(u: UOp, vals: dict[str, int]) -> int:
    if u.op is Ops.CONST:
        return int(u.arg)
    missing = [v.arg[0] for v in u.variables if v.arg[0] not in vals]
    if missing:
        raise ValueError(f"launch size depends on variables {missing} that were not given")
    c = graph_rewrite(graph_rewrite(u, _bind_vars, ctx=vals), symbolic)
    if c.op is not Ops.CONST:
        raise ValueError(f"launch size did not reduce to a number: {c}")
    return int(c.arg)


def _address_math(uops: list[UOp]) -> set[UOp]:
    """The ALU nodes that only compute addresses, loop bounds or gates (what INDEX and RANGE read)."""
    users: dict[UOp, list[UOp]] = {}
    for u in uops:
        for s in u.src:
            users.setdefault(s, []).append(u)
    found: set[UOp] = set()
    todo = [s for u in uops if u.op in (Ops.INDEX, Ops.RANGE) for s in u.src[1 if u.op is Ops.INDEX else 0 :]]
    while todo:
        x = todo.pop()
        if x in found or x.op not in GroupOp.ALU:
            continue
        if all(v in found or v.op in (Ops.INDEX, Ops.RANGE) for v in users.get(x, ())):
            found.add(x)
            todo.extend(x.src)
    return found


def _estimate(uops: list[UOp], threads: int) -> Estimates:
    """The work of one launch: arithmetic on values (each lane of a vector op; a multiply-add counts two), not
    the index math that addresses memory, and the bytes of global memory loaded and stored, lane by lane."""
    est = Estimates()
    mult = [threads]
    addressing = _address_math(uops)
    for u in uops:
        if u.op is Ops.RANGE:
            end = u.src[0]
            mult.append(mult[-1] * max(int(end.vmax), 0))
        elif u.op is Ops.END:
            mult.pop()
        elif u.op in GroupOp.ALU and u.dtype.scalar() != dtypes.bool and u not in addressing:
            est.ops += mult[-1] * u.dtype.count * (2 if u.op is Ops.MULACC else 1)
        elif u.op in (Ops.LOAD, Ops.STORE):
            buf = u.src[0].src[0]
            while buf.op is Ops.AFTER:
                buf = buf.src[0]
            if buf.op is Ops.DEFINE_GLOBAL:
                assert isinstance(buf.dtype, PtrDType)
                value = u if u.op is Ops.LOAD else u.src[1]
                nbytes = mult[-1] * buf.dtype.base.nbytes * value.dtype.count
                if u.op is Ops.LOAD:
                    est.bytes_read += nbytes
                else:
                    est.bytes_written += nbytes
    return est


def get_program(ast: UOp, renderer: Renderer, compiler: Compiler, opts: list[Opt] | None = None) -> ProgramSpec:
    """Kernel AST -> compiled ProgramSpec for ``renderer``'s target, its PROGRAM node as ``spec.program``;
    ``opts=None``: the default heuristics."""
    return program_spec(*lower_to_program(ast, renderer, compiler, opts))


def program_spec(prg: UOp, ctx: LowerContext) -> ProgramSpec:
    """The ProgramSpec of a PROGRAM(SINK, LINEAR, SOURCE, BINARY) node; ``ctx`` the context its passes ran with."""
    _, lin, source, binary = prg.src
    uops, dims, renderer = list(lin.src), ctx.dims, ctx.ren
    assert ctx.ast is not None
    globals_ = [u for u in uops if u.op is Ops.DEFINE_GLOBAL]
    outs = sorted({u.src[0].src[0].arg for u in uops if u.op is Ops.STORE and u.src[0].src[0].op is Ops.DEFINE_GLOBAL})
    ins = sorted({u.src[0].src[0].arg for u in uops if u.op is Ops.LOAD and u.src[0].src[0].op is Ops.DEFINE_GLOBAL})
    buffers = {u.arg: u.dtype.base.name for u in globals_ if isinstance(u.dtype, PtrDType)}
    threads = math.prod(int(g.vmax) for g in dims.global_size) * math.prod(dims.local_size)
    return ProgramSpec(
        name=prg.arg,
        src=source.arg,
        device=renderer.device,
        target=renderer.target,
        ast=ctx.ast,
        uops=uops,
        lib=binary.arg,
        global_size=tuple(dims.global_size),
        local_size=tuple(dims.local_size),
        vars=sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda v: v.arg[0]),
        outs=outs,
        ins=ins,
        buffers=buffers,
        estimates=_estimate(uops, threads),
        opts=list(ctx.opts),
        program=prg,
    )


def format_stages(prg: UOp, trace: list[tuple[str, int]] | None = None) -> str:
    """The four forms of one kernel, for a person: SINK, LINEAR, SOURCE, BINARY; with ``trace`` (from
    ``lower_to_program(..., trace=True)``) first the passes that made them, each with the graph's size after it."""
    if prg.op is not Ops.PROGRAM:
        raise ValueError(f"format_stages expects a PROGRAM node, got {prg.op.name}")
    parts: list[str] = []
    if trace:
        parts.append("===== PASSES (graph nodes after each) =====")
        parts += [f"{n:>3} {name:<16} {size}" for n, (name, size) in enumerate(trace, 1)]
    names = ["SINK (lowered kernel)", "LINEAR (ordered uops)", "SOURCE", "BINARY"]
    for title, s in zip(names, prg.src):
        parts.append(f"===== {title} =====")
        if s.op is Ops.SINK:
            parts.append(s.pretty())
        elif s.op is Ops.LINEAR:
            num = {u: i for i, u in enumerate(s.src)}
            depth = 0
            for i, u in enumerate(s.src):
                if u.op is Ops.END:
                    depth -= 1
                srcs = ", ".join(f"%{num[x]}" for x in u.src)
                arg = "" if u.arg is None else f" {u.arg!r}"
                parts.append(f"%{i:<4}{'  ' * depth}{u.op.name:<14} {u.dtype!r:<24} [{srcs}]{arg}")
                if u.op is Ops.RANGE:
                    depth += 1
        elif s.op is Ops.SOURCE:
            parts.append(s.arg.rstrip())
        else:
            lib: bytes = s.arg
            hexdump = " ".join(f"{b:02x}" for b in lib[:32])
            parts.append(f"{len(lib)} bytes: {hexdump}{' ...' if len(lib) > 32 else ''}")
    return "\n".join(parts)


def program_stages(ast: UOp, renderer: Renderer, compiler: Compiler, opts: list[Opt] | None = None) -> UOp:
    """The PROGRAM node of ``ast`` in its final form (for printing its stages; ``get_program(...).program`` is the
    same node, next to its ProgramSpec)."""
    return lower_to_program(ast, renderer, compiler, opts)[0]
