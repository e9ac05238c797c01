"""uops backends "CUDA" and "CUDA_EMU": CUDA C rendered once, run on an NVIDIA GPU or on the CPU.

CUDA      CUDARenderer -> NVRTCCompiler (CUBIN) -> CUDA driver API (cuda-bindings). Compiling
          needs no GPU (NVRTC is a pip wheel), so `uops compile --device CUDA` works in CI.
CUDA_EMU  the same CUDARenderer source, compiled for the host by clang++ with the core's
          gpu_shim.h and launched by uops.backends.gpu_emu: the numerical proof of the CUDA renderer on
          machines without a GPU. When NVRTC is installed, each kernel is also compiled by
          NVRTC first (UOPS_CUDA_EMU_NVRTC=0 skips that), so the source is proven to be CUDA too.

Only this module is imported when the core loads the plugin; cuda-bindings is imported by the
factories and probes below, the first time a CUDA device is used.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from uops.plugins import Backend, hookimpl

if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.runtime import Runtime
    from uops_cuda.renderer import CUDARenderer

__version__ = "0.1.0"

DEFAULT_ARCH = "sm_90"  # Hopper: the target when there is no GPU to ask
TARGETS = (DEFAULT_ARCH, "sm_75", "sm_80", "sm_86", "sm_89", "sm_100", "sm_120", "compute_90")


@functools.lru_cache(maxsize=1)
def _probe_runtime() -> str | None:
    from uops_cuda.runtime import probe_runtime

    return probe_runtime()


def _probe_compile() -> str | None:
    try:
        from uops_cuda.compiler import nvrtc_available
    except ImportError as e:
        return f"cannot import the NVRTC compiler ({e}); pip install cuda-bindings nvidia-cuda-nvrtc"
    return nvrtc_available()


def _arch(arch: str | None) -> str:
    """The requested arch, else the GPU's own when one is present, else sm_90."""
    if arch is not None:
        return arch
    if _probe_runtime() is None:
        from uops_cuda.runtime import device_arch

        return device_arch()
    return DEFAULT_ARCH


def _renderer(arch: str | None) -> CUDARenderer:
    from uops_cuda.renderer import CUDARenderer

    return CUDARenderer(_arch(arch))


def _compiler(arch: str | None) -> Compiler:
    from uops_cuda.compiler import NVRTCCompiler

    return NVRTCCompiler(_arch(arch))


def _runtime() -> Runtime:
    from uops_cuda.runtime import CUDARuntime

    return CUDARuntime("CUDA")


# ----- CUDA_EMU -----


def _emu_renderer(arch: str | None) -> CUDARenderer:
    from uops_cuda.renderer import CUDARenderer

    r = CUDARenderer(arch or DEFAULT_ARCH)
    r.device = "CUDA_EMU"
    return r


def _emu_compiler(arch: str | None) -> Compiler:
    from uops_cuda.compiler import nvrtc_available
    from uops_cuda.emulated import EmulatedCUDACompiler

    check = os.environ.get("UOPS_CUDA_EMU_NVRTC", "1").strip() != "0" and nvrtc_available() is None
    return EmulatedCUDACompiler(arch or DEFAULT_ARCH, nvrtc_check=check)


def _emu_runtime() -> Runtime:
    from uops_cuda.emulated import emulated_runtime

    return emulated_runtime()


def _emu_probe_compile() -> str | None:
    from uops.backends.gpu_emu import cxx_path
    from uops.compiler import CompilerUnavailableError

    try:
        cxx_path()
    except CompilerUnavailableError as e:
        return str(e)
    return None


def _emu_probe_runtime() -> str | None:
    """The launcher is built from gpu_shim.h on first use: that build is the probe."""
    from uops.backends.gpu_emu import shim_runtime
    from uops.compiler import CompileError, CompilerUnavailableError

    try:
        shim_runtime()
    except (CompileError, CompilerUnavailableError, OSError) as e:
        return f"cannot build the GPU shim launcher: {e}"
    return None


@hookimpl
def uops_backends() -> list[Backend]:
    """CUDA (priority 100, the preferred device when a GPU is present) and CUDA_EMU (20)."""
    return [
        Backend(
            device="CUDA",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=_probe_compile,
            probe_runtime=_probe_runtime,
            targets=TARGETS,
            priority=100,
        ),
        Backend(
            device="CUDA_EMU",
            renderer=_emu_renderer,
            compiler=_emu_compiler,
            runtime=_emu_runtime,
            probe_compile=_emu_probe_compile,
            probe_runtime=_emu_probe_runtime,
            targets=(DEFAULT_ARCH,),
            priority=20,
        ),
    ]
