"""CUDA_EMU's compiler: the CUDA source proven by NVRTC, then built for the host with the GPU shim.

Why both: NVRTC shows the rendered source is valid CUDA for the target; the shim build
(uops.backends.gpu_emu + gpu_shim.h) runs that same source on the CPU, so its results can be checked
against numpy on machines without a GPU.
"""

from __future__ import annotations

from uops.backends.gpu_emu import EmulatedCompiler

__all__ = ["EmulatedCUDACompiler"]

CUDA_STUB_HEADERS = ("cuda_fp16.h", "cuda_bf16.h")


class EmulatedCUDACompiler(EmulatedCompiler):
    """CUDA C -> host shared library; with ``nvrtc_check`` NVRTC must accept the source first."""

    def __init__(self, arch: str = "sm_90", nvrtc_check: bool = True) -> None:
        super().__init__("CUDA_EMU", stub_headers=CUDA_STUB_HEADERS, barrier_tokens=("__syncthreads",))
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
