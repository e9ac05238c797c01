"""METAL_EMU: MSL from MetalRenderer run on the CPU through the core's GPU emulation.

The Metal dialect is declared here; ``include/metal_stdlib.h`` (the same stand-in for
<metal_stdlib> that the Linux check uses) maps MSL's vocabulary onto the shim when the shim is
included first: ``threadgroup`` becomes block-shared storage, ``threadgroup_barrier`` the shim's
barrier. Two line-preserving rewrites adapt the signature to the shim's entry thunk, which
passes the buffers and variables only: the launch-index parameters are dropped (their names
become macros over the shim's context) and ``constant int& n`` is passed by value. The compiler
runs the MSL check first, so every emulated kernel is also proven to be MSL as far as the check sees.
"""

from __future__ import annotations

from uops.plugin import Dialect, EmulatedCompiler, EmulatedRuntime
from uops_metal import DEFAULT_TARGET
from uops_metal.compiler import INCLUDE_DIR, MetalCompiler, checker
from uops_metal.renderer import INDEX_PARAMS, MetalRenderer

__all__ = ["METAL_DIALECT", "EmulatedMetalCompiler", "emulated_runtime"]

_SHIM_FIELD = {"gidx": "block_idx", "lidx": "thread_idx"}
_INDEX_DECL = "|".join(rf"uint3\s+{var}\s*\[\[\s*{attr}\s*\]\]" for var, attr in INDEX_PARAMS.values())

METAL_DIALECT = Dialect(
    name="MSL",
    kernel_pattern=r"\bkernel\s+void\s+(?P<name>[A-Za-z_]\w*)\s*\(",
    indices=tuple((var, f"uops_shim_cur->{_SHIM_FIELD[kind]}") for kind, (var, _) in INDEX_PARAMS.items()),
    barrier="threadgroup_barrier(flags)",
    exchange_tokens=("simd_shuffle_xor",),
    header=INCLUDE_DIR / "metal_stdlib.h",
    stub_headers=("metal_stdlib",),
    # the entry thunk passes buffers and variables only: drop the index parameters, pass variables by value
    rewrites=((rf"(?:,\s*)?(?:{_INDEX_DECL})", ""), (r"\bconstant\s+(\w+)\s*&\s*", r"\1 ")),
    max_threads=1024,
    max_block=MetalRenderer.local_max or (),
    max_grid=MetalRenderer.global_max or (),
)


class EmulatedMetalCompiler(EmulatedCompiler):
    """MSL -> host shared library, built by the clang that checks MSL (the header needs clang 16+)."""

    def __init__(self, target: str = DEFAULT_TARGET) -> None:
        self.check = MetalCompiler(target, mode="msl")
        super().__init__("METAL_EMU", METAL_DIALECT, cxx=checker()[0])
        self.flags = (*self.flags, *(f for f in self.check.flags if f.startswith("-D")))

    def identity(self) -> str:
        return f"{super().identity()}+{self.check.identity()}"

    def compile(self, src: str) -> bytes:
        self.check.check(src)  # CompileError with clang's message when the source is not MSL
        return super().compile(src)


def emulated_runtime() -> EmulatedRuntime:
    """METAL_EMU's runtime: host memory, launches checked against Metal's limits."""
    return EmulatedRuntime("METAL_EMU", METAL_DIALECT, plugin=__name__.partition(".")[0])
