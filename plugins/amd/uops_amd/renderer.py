"""HIP-style C for AMD GPUs: a small subclass of the core CStyleRenderer.

The source needs no ROCm headers or device libraries (it is compiled with ``-nogpuinc
-nogpulib``): kernels are ``extern "C" __attribute__((global))`` with
``amdgpu_flat_work_group_size(1, N)`` as the launch bound, launch indices come from the amdgcn
builtins (``__builtin_amdgcn_workgroup_id_x()`` ...), local memory is
``__attribute__((shared))`` (LDS), barriers are ``s_barrier`` between workgroup fences, 16-bit
floats are clang's ``_Float16`` and ``__bf16``, vectors are ``ext_vector_type``, and math goes
through clang builtins that lower to AMDGPU instructions. float64 transcendentals have no
instruction and would need ocml, so they are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uops.plugin import (
    CStyleRenderer,
    DType,
    Ops,
    PatternMatcher,
    RenderContext,
    UOp,
    UPat,
    alu_rules,
    cast_via_float,
    dtypes,
    typed_reciprocal,
    workgroup_threads,
)
from uops_amd import DEFAULT_ARCH

__all__ = ["GLOBAL_MAX", "LOCAL_MAX", "AMDRenderer", "wave_size"]

_HALVES = (dtypes.float16, dtypes.bfloat16)
_VECTOR_NAMES = {"char": "char", "uchar": "uchar", "short": "short", "ushort": "ushort", "int": "int", "uint": "uint",
                 "long": "long", "ulong": "ulong", "float": "float", "double": "double", "half": "half"}  # fmt: skip
GLOBAL_MAX = (2**31 - 1, 65535, 65535)  # workgroups per grid dimension
LOCAL_MAX = (1024, 1024, 1024)  # threads per workgroup dimension (1024 in all)
BARRIER = (
    '__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
    '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");'
)


def wave_size(arch: str) -> int:
    """Threads per wavefront: 64 on GCN/CDNA (gfx9xx and older), 32 on RDNA (gfx10 and newer)."""
    if not arch.startswith("gfx") or not arch[3:5].isdigit():
        raise ValueError(f"unknown AMD GPU architecture {arch!r}: expected a gfx name such as gfx942 or gfx1100")
    return 32 if len(arch) >= 7 and arch[3:5] in {"10", "11", "12"} else 64


def _f32_only(op: str, name32: str, name64: str | None = None) -> Callable[..., str]:
    def f(*args: Any) -> str:
        *xs, dt = args
        if dt.scalar() == dtypes.float64:
            if name64 is None:
                raise ValueError(
                    f"AMDRenderer: float64 {op} has no AMDGPU instruction and the ROCm device libraries are not "
                    "linked (-nogpulib); compute it in float32"
                )
            return f"{name64}({', '.join(xs)})"
        return f"{name32}({', '.join(xs)})"

    return f


def _swizzle_xor(ctx: RenderContext, x: UOp) -> str:
    """SHUFFLE as ``ds_swizzle`` in its bit mode (and-mask 31, xor-mask ``arg``): lane ^ mask within each 32 lanes,
    on wave32 and wave64 alike, and no lane index to compute; 32-bit values go through int."""
    t, pattern = ctx.dtype(x.dtype), 0x1F | (int(x.arg) << 10)
    return f"__builtin_bit_cast({t}, __builtin_amdgcn_ds_swizzle(__builtin_bit_cast(int, {ctx[x.src[0]]}), {pattern}))"


class AMDRenderer(CStyleRenderer):
    device = "AMD"
    target = DEFAULT_ARCH
    global_max = GLOBAL_MAX
    local_max = LOCAL_MAX
    local_threads_max = 256
    shared_max = 64 * 1024  # LDS per workgroup
    vector_widths = (4, 2)  # 16-byte loads and stores at most
    shuffle_width = 32  # ds_swizzle's lanes (a wave32, half a wave64): grouped reductions combine by swizzles
    kernel_prefix = 'extern "C" __attribute__((global)) void'
    launch_index = {"gidx": "__builtin_amdgcn_workgroup_id_{axis}()", "lidx": "__builtin_amdgcn_workitem_id_{axis}()"}
    buffer_suffix = " __restrict__"
    smem_prefix = "__attribute__((shared)) "
    barrier = BARRIER
    type_map = {**CStyleRenderer.type_map, dtypes.bool: "bool", dtypes.float16: "_Float16", dtypes.bfloat16: "__bf16"}
    string_rewrite = (
        PatternMatcher(
            [
                *alu_rules(
                    {
                        Ops.EXP2: _f32_only("EXP2", "__builtin_exp2f"),
                        Ops.LOG2: _f32_only("LOG2", "__builtin_log2f"),
                        Ops.SIN: _f32_only("SIN", "__builtin_sinf"),
                        Ops.POW: _f32_only("POW", "__builtin_powf"),
                        Ops.SQRT: _f32_only("SQRT", "__builtin_sqrtf", "__builtin_sqrt"),
                        Ops.TRUNC: _f32_only("TRUNC", "__builtin_truncf", "__builtin_trunc"),
                    }
                ),
                (UPat(Ops.SHUFFLE, name="x"), _swizzle_xor),
                (UPat(Ops.RECIPROCAL, name="x"), typed_reciprocal),  # so 16-bit floats stay 16-bit
                # 16-bit floats convert through float, as the GPU shim's 16-bit float classes need
                (UPat(Ops.CAST, name="x"), cast_via_float(_HALVES)),
            ],
            result=str,
        )
        + CStyleRenderer.string_rewrite
    )

    def __init__(self, arch: str = DEFAULT_ARCH, device: str = "AMD") -> None:
        super().__init__(arch, device)
        self.wave_size = wave_size(arch)

    def render_vector_type(self, dt: DType) -> str:
        base = _VECTOR_NAMES.get(dt.scalar().name)
        if base is None or dt.count not in (2, 3, 4, 8, 16):
            raise ValueError(f"AMDRenderer has no vector type for {dt!r}")
        return f"{base}{dt.count}"

    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        threads = workgroup_threads(uops, "AMDRenderer: workgroup size")
        prelude = self.vector_typedefs(uops)
        head = "\n".join(prelude) + ("\n" if prelude else "")
        sig = f"{self.kernel_prefix} __attribute__((amdgpu_flat_work_group_size(1, {threads}))) {name}"
        return f"{head}{sig}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
