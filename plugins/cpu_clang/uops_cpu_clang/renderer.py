"""C for the host CPU: a small subclass of the core CStyleRenderer.

Every output axis is a loop; a THREAD axis becomes the ``core_id`` parameter, one call per
chunk. Kernels use only compiler builtins, so they need no libc headers; float exp2 is an inline
polynomial (libm's is a scalar call that stops loops from vectorizing). bfloat16 has no C
type on clang 14 for x86; kernels that use it get a clear error from the lowering instead of
wrong results.
"""

from __future__ import annotations

from uops.plugin import (
    CStyleRenderer,
    DType,
    Ops,
    PatternMatcher,
    PtrDType,
    RenderContext,
    UOp,
    UPat,
    dtypes,
    positive_int_from_env,
    usable_cores,
)
from uops_cpu_clang import HOST_ARCH


def host_vector_bytes() -> int:
    """The widest vector register of this CPU in bytes: 64 where it has AVX-512 (kernels are built -march=native,
    where clang keeps 256-bit vectors unless a kernel asks for more), else 32."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read(1 << 20).split("\n\n", 1)[0]
    except OSError:
        return 32
    flags = next((ln.split(":", 1)[1].split() for ln in first.splitlines() if ln.startswith("flags")), [])
    return 64 if "avx512f" in flags else 32


def cpu_threads() -> int:
    """Worker threads for THREADed kernels: ``UOPS_THREADS``, else the cores this process may use."""
    return positive_int_from_env("UOPS_THREADS", usable_cores())


# exp2 on float32 without libm: 2^x = 2^k * 2^f with k = rint(x), |f| <= 1/2, and 2^f from its Taylor series
# to degree 7 (truncation below 1e-8 relative, under 1 ulp measured); 2^k is applied as two normal powers
# so denormal results stay within one step of the exact value. Selects, not branches: loops vectorize.
_EXP2F_NAME = "uops_exp2f"
_EXP2F = """static inline float uops_exp2f(float x) {
  float c = x < -150.0f ? -150.0f : x > 128.0f ? 128.0f : x;
  float k = __builtin_rintf(c);
  float f = c - k;
  float p = 1.5252733804059838e-05f;
  p = p * f + 1.5403530393381606e-04f;
  p = p * f + 1.3333558146428441e-03f;
  p = p * f + 9.6181291076284770e-03f;
  p = p * f + 5.5504108664821576e-02f;
  p = p * f + 2.4022650695910071e-01f;
  p = p * f + 6.9314718055994531e-01f;
  p = p * f + 1.0f;
  int ki = (int)k, k1 = ki >> 1;
  union { int i; float f; } s1 = {.i = (k1 + 127) << 23}, s2 = {.i = (ki - k1 + 127) << 23};
  float r = p * s1.f * s2.f;
  return x != x ? x : r;
}
"""


def _exp2(ctx: RenderContext, x: UOp) -> str | None:
    dt = x.dtype
    return (
        f"{_EXP2F_NAME}({ctx[x.src[0]]})" if dt.count == 1 and dt.scalar() in (dtypes.float32, dtypes.float16) else None
    )


def _bitcast(ctx: RenderContext, x: UOp) -> str:
    # C has no bit_cast; a compound-literal union is well defined in C99 and folds to a move
    return f"((union {{ {ctx.dtype(x.src[0].dtype)} a; {ctx.dtype(x.dtype)} b; }}){{.a = {ctx[x.src[0]]}}}).b"


def _core_id(x: UOp) -> str:
    if x.arg != "gidx0":
        raise ValueError(f"ClangRenderer: the only launch index of a CPU kernel is gidx0 (its core), got {x.arg!r}")
    return "core_id"


class ClangRenderer(CStyleRenderer):
    device = "CPU"
    target = HOST_ARCH
    global_max = None
    local_max = None
    unsupported_dtypes = frozenset({dtypes.bfloat16})
    vector_widths: tuple[int, ...] = (8, 4)
    vector_max_bytes = 32  # one AVX register
    aligned_locals = True  # a PACK buffer is read with vector loads
    unaligned_vectors = True  # x86 vector moves take any address at the aligned speed
    vector_alu = True  # ext_vector_type values add and multiply lane by lane
    string_rewrite = (
        PatternMatcher(
            [
                (UPat(Ops.EXP2, name="x"), _exp2),  # declines for float64 and vectors: the builtin
                (UPat(Ops.BITCAST, name="x"), _bitcast),
                (UPat(Ops.SPECIAL, name="x"), _core_id),
            ],
            result=str,
        )
        + CStyleRenderer.string_rewrite
    )

    def __init__(self, target: str | None = None, device: str | None = None, vector_bytes: int = 32) -> None:
        """``vector_bytes``: the widest vector the kernels use (64 on an AVX-512 host, see ``host_vector_bytes``)."""
        super().__init__(target, device)
        if vector_bytes >= 64:
            self.vector_widths, self.vector_max_bytes = (16, 8, 4), 64

    @property
    def threads(self) -> int:
        """Cores a THREAD axis is split across (read by the heuristics)."""
        return cpu_threads()

    def render_vector_type(self, dt: DType) -> str:
        return f"{dt.scalar().name}{dt.count}"  # declared by vector_typedefs as clang ext_vector_type

    def render_vector_pointer(self, dt: DType) -> str:
        return f"{self.render_vector_type(dt)}u*"  # element-aligned: see unaligned_vectors

    def vector_typedefs(self, uops: list[UOp]) -> list[str]:
        types = (u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype for u in uops)
        vectors = {d for d in types if d.count > 1}
        unaligned = [
            f"typedef {self.render_dtype(d.scalar())} {self.render_vector_type(d)}u "
            f"__attribute__((ext_vector_type({d.count}), aligned({d.scalar().itemsize})));"
            for d in sorted(vectors, key=lambda d: (d.scalar().name, d.count))
        ]
        return super().vector_typedefs(uops) + unaligned

    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        # a THREADed kernel takes its chunk number last; the runtime calls it once per chunk
        if any(u.op is Ops.SPECIAL for u in uops):
            params = [*params, "int core_id"]
        head = "".join(f"{t}\n" for t in self.vector_typedefs(uops))
        # clang splits vectors wider than 256 bits into halves unless the function asks for the wider registers
        wide = self.vector_max_bytes >= 64 and any(
            (u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype).nbytes >= 64 for u in uops
        )
        attr = "__attribute__((min_vector_width(512))) " if wide else ""
        src = f"{attr}void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
        return (_EXP2F if _EXP2F_NAME + "(" in src else "") + head + src
