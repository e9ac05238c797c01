"""AMD_EMU: HIP-style source from AMDRenderer run on the CPU through the core's GPU emulation.

The AMD dialect is declared here; ``include/amd_emu.h`` maps the rest of the vocabulary onto
the shim. The compiler proves the source with the real AMD compiler first (clang-19 to an HSA
code object, when installed), so it is valid AMDGPU code as well as numerically checked on the host.
"""

from __future__ import annotations

from pathlib import Path

from uops.plugin import Dialect, EmulatedCompiler, EmulatedRuntime
from uops_amd.compiler import DEFAULT_ARCH
from uops_amd.renderer import GLOBAL_MAX, LOCAL_MAX

__all__ = ["AMD_DIALECT", "EmulatedAMDCompiler", "emulated_runtime"]

_AXES = "xyz"

AMD_DIALECT = Dialect(
    name="AMD",
    kernel_pattern=(
        r"__attribute__\(\(global\)\)\s+void\s+"
        r"(?:__attribute__\(\(amdgpu_flat_work_group_size\(\s*\d+\s*,\s*(?P<bound>\d+)\s*\)\)\)\s*)?"
        r"(?P<name>[A-Za-z_]\w*)\s*\("
    ),
    indices=tuple(
        (f"__builtin_amdgcn_{fn}_{ax}()", f"uops_shim_cur->{field}.{ax}")
        for fn, field in (("workitem_id", "thread_idx"), ("workgroup_id", "block_idx"))
        for ax in _AXES
    ),
    barrier="__builtin_amdgcn_s_barrier()",
    exchange_tokens=("__builtin_amdgcn_ds_swizzle",),
    header=Path(__file__).resolve().parent / "include" / "amd_emu.h",
    rewrites=(
        (r"__attribute__\(\(global\)\)", ""),
        (r"__attribute__\(\(amdgpu_flat_work_group_size\([^)]*\)\)\)", ""),
        (r"__attribute__\(\(shared\)\)", "UOPS_SHIM_SHARED"),
    ),
    max_threads=1024,
    max_block=LOCAL_MAX,
    max_grid=GLOBAL_MAX,
)


class EmulatedAMDCompiler(EmulatedCompiler):
    """HIP-style C -> host shared library; with ``amd_check`` clang-19 must build a code object from it first."""

    def __init__(self, arch: str = DEFAULT_ARCH, amd_check: bool = True) -> None:
        super().__init__("AMD_EMU", AMD_DIALECT)
        self.arch = arch
        self.amd = None
        if amd_check:
            from uops_amd.compiler import HIPCompiler

            self.amd = HIPCompiler(arch)

    def identity(self) -> str:
        base = super().identity()
        return base if self.amd is None else f"{base}+{self.amd.identity()}"

    def compile(self, src: str) -> bytes:
        if self.amd is not None:
            self.amd.compile(src)  # raises CompileError with clang's message when the source is not valid for AMDGPU
        return super().compile(src)


def emulated_runtime() -> EmulatedRuntime:
    """AMD_EMU's runtime: host memory, launches checked against AMD's limits."""
    return EmulatedRuntime("AMD_EMU", AMD_DIALECT, plugin=__name__.partition(".")[0])
