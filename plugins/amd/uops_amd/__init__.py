"""uops backends "AMD" and "AMD_EMU": HIP-style C rendered once, run on an AMD GPU or on the CPU.

AMD       AMDRenderer -> HIPCompiler (clang-19 + lld: an HSA code object) -> HIP runtime
          (libamdhip64 through ctypes). Compiling needs no GPU and no ROCm, so
          `uops compile --device AMD --arch gfx1100` works in CI.
AMD_EMU   the same AMDRenderer source, compiled for the host with the core's gpu_shim.h and the
          AMD dialect (uops_amd.emulated), launched by uops.backends.gpu_emu: the numerical proof
          of the AMD renderer on machines without a GPU. When clang-19 is installed each kernel
          is also compiled to a real code object first (UOPS_AMD_EMU_CHECK=0 skips that).

Only this module is imported when the core loads the plugin; the toolchain and HIP are looked
up by the factories and probes below, the first time an AMD device is used.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from uops.plugins import Backend, hookimpl

if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.runtime import Runtime
    from uops_amd.renderer import AMDRenderer

__version__ = "0.1.0"


def _targets() -> tuple[str, ...]:
    from uops_amd.compiler import TARGETS

    return TARGETS


@functools.lru_cache(maxsize=1)
def _probe_runtime() -> str | None:
    from uops_amd.runtime import probe_runtime

    return probe_runtime()


def _probe_compile() -> str | None:
    from uops_amd.compiler import clang_available

    return clang_available()


def _arch(arch: str | None) -> str:
    """The requested arch, else the GPU's own when one is present, else gfx942."""
    from uops_amd.compiler import DEFAULT_ARCH

    if arch is not None:
        return arch
    if _probe_runtime() is None:
        from uops_amd.runtime import device_arch

        return device_arch()
    return DEFAULT_ARCH


def _renderer(arch: str | None) -> AMDRenderer:
    from uops_amd.renderer import AMDRenderer

    return AMDRenderer(_arch(arch))


def _compiler(arch: str | None) -> Compiler:
    from uops_amd.compiler import HIPCompiler

    return HIPCompiler(_arch(arch))


def _runtime() -> Runtime:
    from uops_amd.runtime import HIPRuntime

    return HIPRuntime("AMD")


# ----- AMD_EMU -----


def _emu_renderer(arch: str | None) -> AMDRenderer:
    from uops_amd.compiler import DEFAULT_ARCH
    from uops_amd.renderer import AMDRenderer

    r = AMDRenderer(arch or DEFAULT_ARCH)
    r.device = "AMD_EMU"
    return r


def _emu_compiler(arch: str | None) -> Compiler:
    from uops_amd.compiler import DEFAULT_ARCH, clang_available
    from uops_amd.emulated import EmulatedAMDCompiler

    check = os.environ.get("UOPS_AMD_EMU_CHECK", "1").strip() != "0" and clang_available() is None
    return EmulatedAMDCompiler(arch or DEFAULT_ARCH, amd_check=check)


def _emu_runtime() -> Runtime:
    from uops_amd.emulated import emulated_runtime

    return emulated_runtime()


def _emu_probe_compile() -> str | None:
    from uops.backends.gpu_emu import probe_compile

    return probe_compile()


def _emu_probe_runtime() -> str | None:
    from uops.backends.gpu_emu import probe_runtime

    return probe_runtime()


@hookimpl
def uops_backends() -> list[Backend]:
    """AMD (priority 90: preferred when its GPU is present) and AMD_EMU (15)."""
    targets = _targets()
    return [
        Backend(
            device="AMD",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=_probe_compile,
            probe_runtime=_probe_runtime,
            targets=targets,
            priority=90,
        ),
        Backend(
            device="AMD_EMU",
            renderer=_emu_renderer,
            compiler=_emu_compiler,
            runtime=_emu_runtime,
            probe_compile=_emu_probe_compile,
            probe_runtime=_emu_probe_runtime,
            targets=targets,
            priority=15,
        ),
    ]
