"""CUDA_EMU: CUDA C from CUDARenderer run on the CPU through the core's GPU emulation.

The CUDA dialect is declared here; ``include/cuda_emu.h`` maps CUDA's vocabulary onto the
shim. The compiler proves the source with NVRTC first (when installed), so it is valid CUDA
for the target as well as numerically checked on the host.
"""

from __future__ import annotations

from pathlib import Path

from uops.plugin import Dialect, EmulatedCompiler, EmulatedRuntime
from uops_cuda import DEFAULT_ARCH
from uops_cuda.renderer import CUDARenderer

__all__ = ["CUDA_DIALECT", "EmulatedCUDACompiler", "emulated_runtime"]

CUDA_DIALECT = Dialect(
    name="CUDA",
    kernel_pattern=r"__global__\s+void\s+(?:__launch_bounds__\s*\(\s*(?P<bound>\d+)[^)]*\)\s*)?(?P<name>[A-Za-z_]\w*)\s*\(",
    indices=(
        ("threadIdx", "uops_shim_cur->thread_idx"),
        ("blockIdx", "uops_shim_cur->block_idx"),
        ("blockDim", "uops_shim_cur->block_dim"),
        ("gridDim", "uops_shim_cur->grid_dim"),
    ),
    barrier="__syncthreads()",
    exchange_tokens=("__shfl_xor_sync",),
    header=Path(__file__).resolve().parent / "include" / "cuda_emu.h",
    stub_headers=("cuda_fp16.h", "cuda_bf16.h"),
    max_threads=1024,
    max_block=CUDARenderer.local_max or (),
    max_grid=CUDARenderer.global_max or (),
)


class EmulatedCUDACompiler(EmulatedCompiler):
    """CUDA C -> host shared library; with ``nvrtc_check`` NVRTC must accept the source first."""

    def __init__(self, arch: str = DEFAULT_ARCH, nvrtc_check: bool = True) -> None:
        super().__init__("CUDA_EMU", CUDA_DIALECT)
        self.arch = arch
        self.nvrtc = None
        if nvrtc_check:
            from uops_cuda.compiler import NVRTCCompiler

            self.nvrtc = NVRTCCompiler(arch)

    def identity(self) -> str:
        base = super().identity()
        return base if self.nvrtc is None else f"{base}+{self.nvrtc.identity()}"

    def compile(self, src: str) -> bytes:
        if self.nvrtc is not None:
            self.nvrtc.compile(src)  # raises CompileError with NVRTC's log when the source is not valid CUDA
        return super().compile(src)


def emulated_runtime() -> EmulatedRuntime:
    """CUDA_EMU's runtime: host memory, launches checked against CUDA's limits."""
    return EmulatedRuntime("CUDA_EMU", CUDA_DIALECT, plugin=__name__.partition(".")[0])
