"""CUDA C: a small subclass of the core CStyleRenderer.

Kernels are ``extern "C" __global__`` (unmangled names for cuModuleGetFunction) with
``__launch_bounds__`` set to the block size, so the compiler may use registers up to what
that block size allows. Launch indices: gidxN -> blockIdx.{x,y,z}, lidxN -> threadIdx.{x,y,z}.
half/bfloat16 come from cuda_fp16.h/cuda_bf16.h, included only when used. Math uses the CUDA
math library names (exp2f, sqrtf ...), which NVRTC provides without any include and the CPU
shim (gpu_shim.h) maps to libm, so the same source runs on both.
"""

from __future__ import annotations

import math

from uops.plugin import (
    CStyleRenderer,
    DType,
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
    workgroup_threads,
)
from uops_cuda import DEFAULT_ARCH

__all__ = ["CUDARenderer"]

_HALVES = (dtypes.float16, dtypes.bfloat16)


def _math(name32: str, name64: str):
    def f(x: str, dt: DType) -> str:
        return f"{name64}({x})" if dt.scalar() == dtypes.float64 else f"{name32}({x})"

    return f


def _nonfinite(ctx: RenderContext, x: UOp) -> str | None:
    """NVRTC has no __builtin_nanf/__builtin_inff: NaN and inf are built from their bits (gpu_shim.h has the
    same intrinsics); every other literal is the C one."""
    dt = x.dtype
    if not dtypes.is_float(dt) or math.isfinite(f := float(x.arg)):
        return None
    if dt == dtypes.float64:
        bits = 0x7FF8000000000000 if math.isnan(f) else (0xFFF0000000000000 if f < 0 else 0x7FF0000000000000)
        return f"__longlong_as_double({bits - (1 << 64) if bits >= 1 << 63 else bits}ll)"
    bits = 0x7FC00000 if math.isnan(f) else (0xFF800000 if f < 0 else 0x7F800000)
    s = f"__int_as_float({bits - (1 << 32) if bits >= 1 << 31 else bits})"
    return s if dt == dtypes.float32 else f"(({ctx.dtype(dt)}){s})"


_rules = [
    *alu_rules(
        {
            Ops.EXP2: _math("exp2f", "exp2"),
            Ops.LOG2: _math("log2f", "log2"),
            Ops.SIN: _math("sinf", "sin"),
            Ops.SQRT: _math("sqrtf", "sqrt"),
            Ops.TRUNC: _math("truncf", "trunc"),
            Ops.POW: lambda a, b, dt: f"pow({a}, {b})" if dt.scalar() == dtypes.float64 else f"powf({a}, {b})",
            Ops.MOD: lambda a, b, dt: (
                (f"fmod({a}, {b})" if dt.scalar() == dtypes.float64 else f"fmodf((float)({a}), (float)({b}))")
                if dtypes.is_float(dt)
                else None
            ),
        }
    ),
    (UPat(Ops.RECIPROCAL, name="x"), typed_reciprocal),
    (UPat(Ops.CONST, name="x"), _nonfinite),
    (UPat(Ops.CAST, name="x"), cast_via_float(_HALVES)),
    (UPat(Ops.BITCAST, name="x"), lambda ctx, x: f"uops_bitcast<{ctx.dtype(x.dtype)}>({ctx[x.src[0]]})"),
    (UPat(Ops.SHUFFLE, name="x"), lambda ctx, x: f"__shfl_xor_sync(0xffffffffu, {ctx[x.src[0]]}, {x.arg})"),
]


class CUDARenderer(CStyleRenderer):
    device = "CUDA"
    target = DEFAULT_ARCH
    global_max = (2**31 - 1, 65535, 65535)
    local_max = (1024, 1024, 64)
    local_threads_max = 256  # a block size that fills an SM on every architecture since sm_50
    shared_max = 48 * 1024  # static shared memory per block without opt-in
    vector_widths = (4, 2)  # 16-byte loads and stores at most
    shuffle_width = 32  # a warp: grouped reductions combine by __shfl_xor_sync
    kernel_prefix = 'extern "C" __global__ void'
    launch_index = {"gidx": "blockIdx.{axis}", "lidx": "threadIdx.{axis}"}
    buffer_suffix = " __restrict__"
    smem_prefix = "__shared__ "
    barrier = "__syncthreads();"
    vector_format = "make_{vtype}({parts})"
    lane_format = "{vec}.{axis}"
    type_map = {
        **CStyleRenderer.type_map,
        dtypes.bool: "bool",
        dtypes.float16: "half",
        dtypes.bfloat16: "__nv_bfloat16",
    }
    string_rewrite = PatternMatcher(_rules, result=str) + CStyleRenderer.string_rewrite

    def __init__(self, arch: str = DEFAULT_ARCH, device: str = "CUDA") -> None:
        super().__init__(arch, device)

    def render_vector_type(self, dt: DType) -> str:
        names = {"char": "char", "uchar": "uchar", "short": "short", "ushort": "ushort", "int": "int", "uint": "uint",
                 "float": "float", "double": "double", "long": "longlong"}  # fmt: skip
        base = names.get(dt.scalar().name)
        if base is None or dt.count not in (2, 3, 4):
            raise ValueError(f"CUDA has no vector type for {dt!r}")
        return f"{base}{dt.count}"

    # ----- launch -----
    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        threads = workgroup_threads(uops, "CUDARenderer: block size")
        used = {u.dtype.base.scalar() if isinstance(u.dtype, PtrDType) else u.dtype.scalar() for u in uops}
        prelude: list[str] = []
        if dtypes.float16 in used:
            prelude.append("#include <cuda_fp16.h>")
        if dtypes.bfloat16 in used:
            prelude.append("#include <cuda_bf16.h>")
        if any(u.op is Ops.BITCAST for u in uops):
            prelude.append(
                "template <class T, class F> __device__ __forceinline__ T uops_bitcast(F f) {\n"
                '  static_assert(sizeof(T) == sizeof(F), "bitcast between types of different sizes");\n'
                "  union { F f; T t; } u; u.f = f; return u.t;\n}"
            )
        head = "\n".join(prelude) + ("\n" if prelude else "")
        sig = f"{self.kernel_prefix} __launch_bounds__({threads}) {name}({', '.join(params)})"
        return f"{head}{sig} {{\n" + "\n".join(body) + "\n}\n"
