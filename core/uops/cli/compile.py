"""`uops compile`: compile a small tensor expression, or a saved ProgramSpec, for any target.

Only the device's compile `Target` is used (renderer + compiler), never its runtime, so this
cross-compiles for hardware that is not present. Names in the expression are tensors whose
shapes come from ``--shape name=4,4`` (default ``--default-shape``).
"""

from __future__ import annotations

import ast as pyast
from pathlib import Path

from uops.codegen.program import ProgramSpec, format_stages, lower_to_program, program_spec
from uops.dtypes import dtype_from_name
from uops.errors import UopsError
from uops.frontend.tensor import Tensor
from uops.plugins import Device
from uops.renderer import Target


class CompileCommandError(UopsError, ValueError):
    """Bad input to `uops compile` (the message is shown as one sentence)."""


_ALLOWED_NODES = (
    pyast.Expression, pyast.BinOp, pyast.UnaryOp, pyast.Call, pyast.Attribute, pyast.Name, pyast.Constant,
    pyast.Load, pyast.keyword, pyast.Tuple, pyast.List, pyast.Subscript, pyast.Slice, pyast.Compare,
    pyast.operator, pyast.unaryop, pyast.cmpop,
)  # fmt: skip


def parse_shapes(specs: list[str]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for s in specs:
        name, sep, dims = s.partition("=")
        try:
            if not sep or not name.isidentifier():
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError:
            raise CompileCommandError(f"--shape expects NAME=D0,D1,... (like a=4,4), got {s!r}") from None
    return shapes


def expression_names(expr: str) -> list[str]:
    try:
        tree = pyast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise CompileCommandError(f"the expression {expr!r} is not valid Python: {e.msg}") from None
    names: list[str] = []
    for node in pyast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise CompileCommandError(f"the expression may not contain {type(node).__name__} ({expr!r})")
        if isinstance(node, pyast.Attribute) and node.attr.startswith("_"):
            raise CompileCommandError(f"the expression may not use private attribute {node.attr!r}")
        if isinstance(node, pyast.Name) and node.id not in names and node.id != "Tensor":
            names.append(node.id)
    return names


def build_expression(
    expr: str, shapes: dict[str, tuple[int, ...]], default_shape: tuple[int, ...], dtype: str
) -> Tensor:
    dt = dtype_from_name(dtype)
    # tensors are placeholders on PYTHON: only the kernel ASTs are wanted, never their data
    env: dict[str, object] = {"Tensor": Tensor}
    for name in expression_names(expr):
        env[name] = Tensor.empty(*shapes.get(name, default_shape), dtype=dt, device="PYTHON")
    try:
        out = eval(compile(pyast.parse(expr, mode="eval"), "<expr>", "eval"), {"__builtins__": {}}, env)  # noqa: S307
    except (ValueError, TypeError, IndexError, AttributeError) as e:
        raise CompileCommandError(f"cannot build {expr!r}: {e}") from None
    if not isinstance(out, Tensor):
        raise CompileCommandError(f"the expression {expr!r} gives {type(out).__name__}, not a Tensor")
    return out


def compile_expression(
    expr: str, target: Target, shapes: dict[str, tuple[int, ...]], default_shape: tuple[int, ...],
    dtype: str = "float32", beam: int = 0,
) -> list[tuple[ProgramSpec, str]]:  # fmt: skip
    """Every kernel of ``expr`` compiled for ``target``, lowered once: (spec, its passes and four stages) each.

    ``beam`` > 0 searches the opts on the device (this one needs its runtime); else the default heuristics."""
    out = build_expression(expr, shapes, default_shape, dtype)
    results = []
    for item in out.schedule():
        if item.kind != "kernel" or item.ast is None:
            continue
        opts = None
        if beam > 0:
            from uops.codegen.search import beam_search

            runtime = Device[target.device].runtime
            opts = beam_search(item.ast, target.device, target.renderer, target.compiler, runtime, beam)
        prg, ctx = lower_to_program(item.ast, target.renderer, target.compiler, opts, trace=True)
        results.append((program_spec(prg, ctx), format_stages(prg, ctx.trace)))
    if not results:
        raise CompileCommandError(f"{expr!r} needs no kernel (it is only a view of its inputs)")
    return results


def describe_spec_file(path: Path) -> str:
    try:
        spec = ProgramSpec.from_json(path.read_text())
    except (OSError, ValueError, KeyError) as e:
        raise CompileCommandError(f"{path} is not a saved ProgramSpec: {e}") from None
    lines = [
        f"kernel {spec.name} for {spec.device} ({spec.target}): {len(spec.uops)} uops, {len(spec.lib)} bytes of binary",
        f"launch global={tuple(str(g.arg) if g.op.name == 'CONST' else 'sym' for g in spec.global_size)} "
        f"local={spec.local_size} vars={spec.var_names} outs={spec.outs} ins={spec.ins}",
        "===== SOURCE =====",
        spec.src.rstrip(),
    ]
    return "\n".join(lines)
