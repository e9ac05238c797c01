"""uops backends "METAL" and "METAL_EMU": Metal Shading Language rendered once, run on an Apple GPU or on the CPU.

METAL      MetalRenderer -> MetalCompiler -> the Metal API through the Objective-C runtime (ctypes).
           Compiling needs no Mac: on Linux the BINARY stage is the MSL source checked by clang++
           (16+) against this plugin's stand-in for <metal_stdlib>; on macOS with Xcode's tools it
           is a metallib. So `uops compile --device METAL` works in CI; running needs macOS.
METAL_EMU  the same MSL, compiled for the host by clang++ with that header and the core's GPU shim
           and launched by uops.backends.gpu_emu: the numerical proof of the Metal renderer.

Only this module is imported when the core loads the plugin; the rest is imported by the
factories and probes below, the first time a METAL device is used.
"""

from __future__ import annotations

import functools
import os
import sys

from uops.plugin import Backend, emulation_probe, hookimpl, which

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every start ~5 ms
if TYPE_CHECKING:
    from uops.plugin import Compiler, Runtime
    from uops_metal.renderer import MetalRenderer

__version__ = "0.1.0"

#: Metal language versions, the default first (3.1: macOS 14, the first with bfloat)
TARGETS = ("metal3.1", "metal2.4", "metal3.0", "metal3.2")
DEFAULT_TARGET = TARGETS[0]

#: the MSL check needs clang 16 or newer (clang-14 rejects _Float16 on x86)
MIN_CLANG = 16
CHECKER_CANDIDATES = ("clang++-19", "clang++-20", "clang++-21", "clang++-18", "clang++-17", "clang++-16", "clang++")
INSTALL_HINT = "install clang 16 or newer (Debian/Ubuntu: apt-get install clang-19) or set UOPS_METAL_CLANG"
NOT_MACOS = "Metal needs macOS (this is {}); the METAL compile target still works: uops compile --device METAL"


def _versioned_checker_on_path() -> bool:
    """A clang++-N (N >= 16) on PATH answers the probe without running it; plain clang++ needs its version asked."""
    return any(which(name) for name in CHECKER_CANDIDATES[:-1])


@functools.lru_cache(maxsize=1)
def _probe_runtime() -> str | None:
    """Off macOS the answer needs no import; on macOS the runtime asks Metal for a device."""
    if sys.platform != "darwin":
        return NOT_MACOS.format(sys.platform)
    from uops_metal.runtime import probe_runtime

    return probe_runtime()


def _probe_compile() -> str | None:
    """macOS compiles MSL at load time at worst; elsewhere the MSL check needs a recent clang++."""
    return None if sys.platform == "darwin" else _probe_check()


def _probe_check() -> str | None:
    """METAL_EMU needs the clang that checks MSL: it also builds the kernels for the host."""
    if not os.environ.get("UOPS_METAL_CLANG") and _versioned_checker_on_path():
        return None
    from uops.plugin import CompilerUnavailableError
    from uops_metal.compiler import checker

    try:
        checker()
    except CompilerUnavailableError as e:
        return str(e)
    return None


def _renderer(arch: str | None) -> MetalRenderer:
    from uops_metal.compiler import compile_mode
    from uops_metal.renderer import MetalRenderer

    return MetalRenderer(f"{arch or DEFAULT_TARGET}:{compile_mode()}")


def _compiler(arch: str | None) -> Compiler:
    from uops_metal.compiler import MetalCompiler

    return MetalCompiler(arch or DEFAULT_TARGET)


def _runtime() -> Runtime:
    from uops_metal.runtime import MetalRuntime

    return MetalRuntime("METAL")


# ----- METAL_EMU -----


def _emu_renderer(arch: str | None) -> MetalRenderer:
    from uops_metal.renderer import MetalRenderer

    return MetalRenderer(f"{arch or DEFAULT_TARGET}:host", device="METAL_EMU")


def _emu_compiler(arch: str | None) -> Compiler:
    from uops_metal.emulated import EmulatedMetalCompiler

    return EmulatedMetalCompiler(arch or DEFAULT_TARGET)


def _emu_runtime() -> Runtime:
    from uops_metal.emulated import emulated_runtime

    return emulated_runtime()


@hookimpl
def uops_backends() -> list[Backend]:
    """METAL (priority 80, after CUDA and AMD) and METAL_EMU (20)."""
    return [
        Backend(
            device="METAL",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=_probe_compile,
            probe_runtime=_probe_runtime,
            targets=TARGETS,
            priority=80,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
        Backend(
            device="METAL_EMU",
            renderer=_emu_renderer,
            compiler=_emu_compiler,
            runtime=_emu_runtime,
            probe_compile=_probe_check,
            probe_runtime=emulation_probe,
            targets=TARGETS,
            priority=20,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        ),
    ]
