"""Metal Shading Language: a small subclass of the core CStyleRenderer.

A kernel is ``kernel void name(...)`` with every parameter bound to a buffer slot in order:
``device T* dataN [[buffer(i)]]`` for buffers (``const device`` when only read) and
``constant int& name [[buffer(i)]]`` for variables (set with ``setBytes``). Launch indices come
in as ``uint3 gid [[threadgroup_position_in_grid]]`` and ``uint3 lid [[thread_position_in_threadgroup]]``
(only those a kernel uses): gidxN -> gid.{x,y,z}, lidxN -> lid.{x,y,z}. Local memory is
``threadgroup``, the barrier ``threadgroup_barrier(mem_flags::mem_threadgroup)``. Metal has no
double: float64 is refused; bfloat exists from Metal 3.1 on. Math is MSL's (``exp2``,
``sqrt`` ... overloaded for float and half, from ``<metal_stdlib>``).
"""

from __future__ import annotations

import math

from uops.plugin import (
    CStyleRenderer,
    DType,
    DTypeNotSupportedError,
    Ops,
    PatternMatcher,
    PtrDType,
    RenderContext,
    UOp,
    UPat,
    alu_rules,
    cast_via_float,
    dtypes,
    typed_reciprocal,
)
from uops_metal import DEFAULT_TARGET, TARGETS

__all__ = ["INDEX_PARAMS", "MetalRenderer", "parse_version"]

# the launch-index parameters, by the SPECIAL prefix that reads them: (name, attribute)
INDEX_PARAMS = {"gidx": ("gid", "threadgroup_position_in_grid"), "lidx": ("lid", "thread_position_in_threadgroup")}


def parse_version(target: str) -> tuple[int, int]:
    """``'metal3.1'`` (or ``'metal3.1:msl'``) -> ``(3, 1)``; ValueError naming the known versions otherwise."""
    name = target.split(":", 1)[0]
    if name in TARGETS:
        major, minor = name.removeprefix("metal").split(".")
        return int(major), int(minor)
    raise ValueError(f"unknown Metal target {target!r}: expected one of {', '.join(TARGETS)}")


def _const(ctx: RenderContext, x: UOp) -> str | None:
    """MSL's NaN and infinity macros, and its 64-bit integer suffixes; other literals are C's."""
    value, dt = x.arg, x.dtype
    if dtypes.is_float(dt) and not math.isfinite(float(value)):
        f = float(value)
        s = "NAN" if math.isnan(f) else ("-INFINITY" if f < 0 else "INFINITY")
        return s if dt == dtypes.float32 else f"(({ctx.dtype(dt)}){s})"
    if dt == dtypes.int64:
        v = int(value)
        return "(-9223372036854775807l-1)" if v == dtypes.min(dtypes.int64) else f"{v}l"
    if dt == dtypes.uint64:
        return f"{int(value)}ul"
    return None


_rules = [
    *alu_rules(
        {
            Ops.EXP2: lambda x, dt: f"exp2({x})",
            Ops.LOG2: lambda x, dt: f"log2({x})",
            Ops.SIN: lambda x, dt: f"sin({x})",
            Ops.SQRT: lambda x, dt: f"sqrt({x})",
            Ops.TRUNC: lambda x, dt: f"trunc({x})",
            Ops.POW: lambda a, b, dt: f"pow({a}, {b})",
        }
    ),
    (UPat(Ops.RECIPROCAL, name="x"), typed_reciprocal),  # so half stays half
    (UPat(Ops.CONST, name="x"), _const),
    # MSL converts vectors element by element with the constructor syntax; bfloat converts to and from float only
    (UPat(Ops.CAST, name="x"), lambda ctx, x: f"{ctx.dtype(x.dtype)}({ctx[x.src[0]]})" if x.dtype.count > 1 else None),
    (UPat(Ops.CAST, name="x"), cast_via_float((dtypes.bfloat16,))),
    (UPat(Ops.BITCAST, name="x"), lambda ctx, x: f"as_type<{ctx.dtype(x.dtype)}>({ctx[x.src[0]]})"),
    (UPat(Ops.DEFINE_VAR, name="x"), lambda ctx, x: f"constant {ctx.ren.var_type}& {x.arg[0]}"),
    (UPat(Ops.SHUFFLE, name="x"), lambda ctx, x: f"simd_shuffle_xor({ctx[x.src[0]]}, {x.arg})"),
]


class MetalRenderer(CStyleRenderer):
    device = "METAL"
    target = DEFAULT_TARGET
    global_max = (2**31 - 1, 65535, 65535)
    local_max = (1024, 1024, 1024)
    local_threads_max = 256  # every Apple GPU runs 256 threads per threadgroup at any register use
    shared_max = 32 * 1024  # threadgroup memory on every Apple GPU family
    vector_widths = (4, 2)  # 16-byte loads and stores at most
    shuffle_width = 32  # a SIMD-group on every Apple GPU: grouped reductions combine by simd_shuffle_xor
    kernel_prefix = "kernel void"
    launch_index = {kind: f"{param}.{{axis}}" for kind, (param, _) in INDEX_PARAMS.items()}
    buffer_prefix = "device "
    buffer_suffix = ""
    const_buffer_prefix = "const "
    smem_prefix = "threadgroup "
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    vector_format = "{type}({parts})"
    lane_format = "{vec}.{axis}"
    type_map = {
        dtypes.bool: "bool",
        dtypes.int8: "char",
        dtypes.uint8: "uchar",
        dtypes.int16: "short",
        dtypes.uint16: "ushort",
        dtypes.int32: "int",
        dtypes.uint32: "uint",
        dtypes.int64: "long",
        dtypes.uint64: "ulong",
        dtypes.float16: "half",
        dtypes.bfloat16: "bfloat",
        dtypes.float32: "float",
        dtypes.void: "void",
    }
    string_rewrite = PatternMatcher(_rules, result=str) + CStyleRenderer.string_rewrite

    def __init__(self, target: str = DEFAULT_TARGET, device: str = "METAL") -> None:
        """``target`` is a Metal version, optionally with what the compiler makes (``metal3.1:msl``)."""
        self.version = parse_version(target)
        self.target = target
        self.device = device
        self.unsupported_dtypes = frozenset({dtypes.float64} | ({dtypes.bfloat16} if self.version < (3, 1) else set()))

    # ----- types -----
    def render_dtype(self, dt: DType) -> str:
        base = dt.base if isinstance(dt, PtrDType) else dt
        if base.scalar() in self.unsupported_dtypes:
            why = "Metal has no double" if base.scalar() == dtypes.float64 else "bfloat needs Metal 3.1 or newer"
            raise DTypeNotSupportedError(
                f"the {self.device} renderer ({self.target}) cannot render {base.scalar().name}: {why}; "
                "cast to float32 (or float16) first"
            )
        return super().render_dtype(dt)

    def render_vector_type(self, dt: DType) -> str:
        if dt.count not in (2, 3, 4) or dt.scalar() not in self.type_map or dt.scalar() == dtypes.void:
            raise ValueError(f"Metal has no vector type for {dt!r} (vectors of 2, 3 or 4 scalars)")
        return f"{self.type_map[dt.scalar()]}{dt.count}"

    def render_vector_pointer(self, dt: DType) -> str:
        return f"device {self.render_dtype(dt)}*"  # vector accesses are to buffers only

    # ----- launch -----
    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        bound = [f"{p} [[buffer({i})]]" for i, p in enumerate(params)]
        used = {u.arg[:4] for u in uops if u.op is Ops.SPECIAL}
        bound += [f"uint3 {var} [[{attr}]]" for kind, (var, attr) in INDEX_PARAMS.items() if kind in used]
        head = "#include <metal_stdlib>\nusing namespace metal;\n"
        return f"{head}{self.kernel_prefix} {name}({', '.join(bound)}) {{\n" + "\n".join(body) + "\n}\n"
