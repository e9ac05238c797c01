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
from typing import TYPE_CHECKING

from uops.plugins import Backend, hookimpl

if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.runtime import Runtime
    from uops_metal.renderer import MetalRenderer

__version__ = "0.1.0"

#: Metal language versions, the default first (3.1: macOS 14, the first with bfloat)
TARGETS = ("metal3.1", "metal2.4", "metal3.0", "metal3.2")
DEFAULT_TARGET = TARGETS[0]


@functools.lru_cache(maxsize=1)
def _probe_runtime() -> str | None:
    from uops_metal.runtime import probe_runtime

    return probe_runtime()


def _probe_compile() -> str | None:
    from uops_metal.compiler import probe_compile

    return probe_compile()


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
        ),
    ]
