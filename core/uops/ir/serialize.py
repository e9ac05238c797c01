"""UOp graphs to and from plain JSON-safe data (never pickle).

Used by ProgramSpec.to_dict/from_dict and by the PYTHON backend, whose "source" is the
serialised linear program.
"""

from __future__ import annotations

import math
from typing import Any

from uops.dtypes import AddrSpace, DType, PtrDType, dtype_from_name, dtypes
from uops.ir.ops import AxisType, Ops
from uops.ir.uop import UOp


def dtype_to_data(dt: DType) -> list[Any]:
    if isinstance(dt, PtrDType):
        return [dt.base.name, dt.base.count, int(dt.addrspace), dt.size]
    return [dt.name, dt.count]


def dtype_from_data(d: list[Any]) -> DType:
    base = dtypes.void if d[0] == "void" else dtype_from_name(d[0])
    if d[1] > 1:
        base = base.vec(d[1])
    if len(d) == 4:
        return base.ptr(d[3], AddrSpace(d[2]))
    return base


def arg_to_data(a: Any) -> Any:
    if a is None or isinstance(a, (bool, str)):
        return a
    # the enums first: they are ints too, and a bare number would load back as an int (and change with the enum)
    if isinstance(a, Ops):
        return {"op": a.name}
    if isinstance(a, AxisType):
        return {"axis": a.name}
    if isinstance(a, int):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": repr(a)}
    if isinstance(a, tuple):
        return {"tuple": [arg_to_data(x) for x in a]}
    raise TypeError(f"cannot serialise UOp arg of type {type(a).__name__}: {a!r}")


def arg_from_data(d: Any) -> Any:
    if not isinstance(d, dict):
        return d
    if "float" in d:
        return float(d["float"])
    if "op" in d:
        return Ops[d["op"]]
    if "axis" in d:
        return AxisType[d["axis"]]
    if "tuple" in d:
        return tuple(arg_from_data(x) for x in d["tuple"])
    raise ValueError(f"unknown serialised arg {d!r}")


def uops_to_data(roots: list[UOp]) -> dict[str, Any]:
    """All nodes reachable from ``roots`` in topological order, sources by index."""
    index: dict[UOp, int] = {}
    nodes: list[list[Any]] = []
    for root in roots:
        for u in root.toposort():
            if u in index:
                continue
            index[u] = len(nodes)
            nodes.append([u.op.name, dtype_to_data(u.dtype), [index[s] for s in u.src], arg_to_data(u.arg)])
    return {"nodes": nodes, "roots": [index[r] for r in roots]}


def uops_from_data(data: dict[str, Any]) -> list[UOp]:
    built: list[UOp] = []
    try:
        for op, dt, src, arg in data["nodes"]:
            built.append(UOp(Ops[op], dtype_from_data(dt), tuple(built[i] for i in src), arg_from_data(arg)))
        return [built[i] for i in data["roots"]]
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise ValueError(f"malformed serialised UOp graph: {e}") from e
