"""Run GPU-style rendered source (CUDA, HIP, MSL) on the CPU: the numerical proof of GPU renderers in CI.

Why: CI has no GPU, yet a GPU renderer's output must be checked by running it. This package
compiles the *rendered source itself* for the host with a C++ compiler (clang++ by default),
``include/gpu_shim.h`` and the plugin's ``Dialect``, and launches it over a grid: blocks run in
parallel on OS threads; inside a block every GPU thread is a fiber, so the dialect's barrier is
a real barrier among the block's threads and block-shared memory is one copy per block. What the
shim does not cover (warp shuffles, most atomics, dynamic shared memory ...) is listed at the
top of ``gpu_shim.h``.

Pieces, shared by every GPU plugin's ``emulated.py``:
  ``Dialect``           the language's spelling: kernel declaration, indices, barrier, header (dialect.py)
  ``EmulatedCompiler``  rendered source -> shared library bytes, one entry thunk per kernel (compiler.py)
  ``EmulatedRuntime``   host memory + loader; launches checked as a GPU would (runtime.py)
  ``shim_runtime()``    the launcher library, built once per machine from the same header

Environment: ``UOPS_CXX`` picks the C++ compiler; ``UOPS_SHIM_THREADS`` the number of worker
threads (default: all cores); ``UOPS_SHIM_STACK`` the bytes of stack per GPU thread.
"""

from __future__ import annotations

from uops.backends.gpu_emu.compiler import EmulatedCompiler, cxx_path, probe_compile, shim_header
from uops.backends.gpu_emu.dialect import Dialect, KernelDecl
from uops.backends.gpu_emu.runtime import (
    EmulatedProgram,
    EmulatedRuntime,
    LaunchError,
    LaunchStats,
    probe_runtime,
    shim_runtime,
)

__all__ = [
    "Dialect",
    "EmulatedCompiler",
    "EmulatedProgram",
    "EmulatedRuntime",
    "KernelDecl",
    "LaunchError",
    "LaunchStats",
    "cxx_path",
    "probe_compile",
    "probe_runtime",
    "shim_header",
    "shim_runtime",
]
