"""Run GPU-style rendered source (CUDA, HIP) on the CPU: the numerical proof of GPU renderers in CI.

Why: CI has no GPU, yet a GPU renderer's output must be checked by running it. This module
compiles the *rendered source itself* for the host with a C++ compiler (clang++ by default)
and ``include/gpu_shim.h``, and launches it over a grid: blocks run in parallel on OS
threads; inside a block every GPU thread is a fiber, so ``__syncthreads`` is a real barrier
among the block's threads and ``__shared__`` memory is one copy per block. What the shim does
not cover (warp shuffles, most atomics, dynamic shared memory ...) is listed at the top of
``gpu_shim.h``.

Pieces, each reusable by any GPU-style plugin (CUDA now, HIP/Metal-style later):
  ``EmulatedCompiler``  rendered source -> shared library bytes (one entry thunk per kernel)
  ``EmulatedRuntime``   host memory allocator + loader; programs launch through the shim runtime
  ``shim_runtime()``    the launcher library, built once per machine from the same header

Environment: ``UOPS_CXX`` picks the C++ compiler; ``UOPS_SHIM_THREADS`` the number of worker
threads (default: all cores); ``UOPS_SHIM_STACK`` the bytes of stack per GPU thread.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from uops.compiler import CompileError, Compiler, CompilerUnavailableError, cache_dir
from uops.runtime import HostAllocator, Program, Runtime

__all__ = [
    "EmulatedCompiler",
    "EmulatedProgram",
    "EmulatedRuntime",
    "LaunchError",
    "cxx_path",
    "kernel_names",
    "shim_header",
    "shim_runtime",
]

_TIMEOUT_S = 300
# `__global__ void [__launch_bounds__(...)] name(`, with optional extern "C" before it
_KERNEL_RE = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(")
_INSTALL_HINT = "install clang (Debian/Ubuntu: apt-get install clang) or set UOPS_CXX to a C++17 compiler"


class LaunchError(RuntimeError):
    """The shim could not launch a kernel (empty grid, no memory for fiber stacks ...)."""


def shim_header() -> Path:
    """The path of ``gpu_shim.h`` shipped inside the ``uops`` package."""
    return Path(__file__).resolve().parent / "include" / "gpu_shim.h"


def cxx_path() -> str:
    """The C++ compiler: ``UOPS_CXX``, else clang++, else g++ (whichever is on PATH)."""
    env = os.environ.get("UOPS_CXX")
    if env:
        found = shutil.which(env)
        if found is None:
            raise CompilerUnavailableError(f"UOPS_CXX={env!r} was not found; {_INSTALL_HINT}")
        return found
    for cand in ("clang++", "g++"):
        found = shutil.which(cand)
        if found is not None:
            return found
    raise CompilerUnavailableError(
        f"the GPU emulation needs a C++ compiler and found neither clang++ nor g++; {_INSTALL_HINT}"
    )


@functools.cache
def _cxx_version(cxx: str) -> str:
    try:
        r = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {cxx!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0 or not r.stdout.strip():
        raise CompilerUnavailableError(f"{cxx!r} --version failed (exit {r.returncode}): {r.stderr.strip()}")
    return r.stdout.splitlines()[0].strip()


def kernel_names(src: str) -> list[str]:
    """The names of the ``__global__`` functions in ``src``, in order."""
    return _KERNEL_RE.findall(src)


def _run_cxx(args: list[str], src: str, what: str) -> None:
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise CompileError(f"{what} did not finish within {_TIMEOUT_S} s", src, what) from e
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {args[0]!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0:
        raise CompileError(r.stderr or r.stdout or f"exit status {r.returncode}", src, what)


# ---------------------------------------------------------------------------------------
# the launcher library


_runtime_lock = threading.Lock()
_runtime_lib: ctypes.CDLL | None = None


def shim_runtime() -> ctypes.CDLL:
    """The shim's launcher (``uops_shim_launch``), built from gpu_shim.h once and cached on disk."""
    global _runtime_lib
    with _runtime_lock:
        if _runtime_lib is not None:
            return _runtime_lib
        cxx = cxx_path()
        header = shim_header().read_bytes()
        key = hashlib.sha256(header + _cxx_version(cxx).encode()).hexdigest()[:24]
        d = cache_dir()
        base = d / "gpu_shim" if d is not None else Path(tempfile.gettempdir()) / f"uops-gpu-shim-{os.getuid()}"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        if base.stat().st_uid != os.getuid():  # never load a library another user could have written
            base = Path(tempfile.mkdtemp(prefix="uops-gpu-shim-"))
        path = base / f"libuops_gpu_shim_{key}.so"
        if not path.exists():
            fd, tmp = tempfile.mkstemp(dir=base, prefix=".tmp-", suffix=".so")
            os.close(fd)
            try:
                _run_cxx(
                    [
                        cxx,
                        "-std=c++17",
                        "-O2",
                        "-fPIC",
                        "-shared",
                        "-pthread",
                        "-DUOPS_SHIM_RUNTIME",
                        "-x",
                        "c++",
                        str(shim_header()),
                        "-o",
                        tmp,
                    ],
                    header.decode(),
                    "building the gpu shim runtime",
                )
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        lib = ctypes.CDLL(str(path))
        fn = lib.uops_shim_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        _runtime_lib = lib
        return lib


# ---------------------------------------------------------------------------------------
# compiler


class EmulatedCompiler(Compiler):
    """GPU-style source -> a host shared library holding one entry thunk per ``__global__`` kernel.

    The source is compiled unchanged, with gpu_shim.h force-included (so line numbers in
    errors are the source's own). ``stub_headers`` are GPU toolkit headers the source may
    include (``cuda_fp16.h`` ...) whose content the shim already provides: they resolve to
    empty files. ``barrier_tokens`` mark a kernel that needs fibers.
    """

    def __init__(
        self,
        device: str,
        stub_headers: tuple[str, ...] = (),
        barrier_tokens: tuple[str, ...] = ("__syncthreads",),
        opt: str = "-O2",
    ) -> None:
        self.device = device
        self.stub_headers = stub_headers
        self.barrier_tokens = barrier_tokens
        self.flags = ("-std=c++17", opt, "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno")
        self._identity: str | None = None

    def identity(self) -> str:
        if self._identity is None:  # computed once: it is part of every cache key
            digest = hashlib.sha256(shim_header().read_bytes()).hexdigest()[:16]
            stubs = ",".join(self.stub_headers)
            self._identity = f"emulate:{self.device}:{_cxx_version(cxx_path())}:shim-{digest}:stubs={stubs}"
        return self._identity

    def _stub_dir(self, root: Path) -> Path:
        d = root / "stubs"
        for h in self.stub_headers:
            p = d / h
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"/* {h}: provided by gpu_shim.h */\n")
        return d

    def compile(self, src: str) -> bytes:
        names = kernel_names(src)
        if not names:
            raise CompileError("no __global__ kernel found in the source; nothing to launch", src, "gpu shim")
        barriers = int(any(tok in src for tok in self.barrier_tokens))
        tail = "\n".join(
            f'UOPS_SHIM_ENTRY({n})\nextern "C" const int uops_shim_barriers_{n} = {barriers};' for n in names
        )
        cxx = cxx_path()
        with tempfile.TemporaryDirectory(prefix="uops-emu-") as tmp:
            root = Path(tmp)
            cu = root / "kernel.cpp"
            cu.write_text(src + "\n" + tail + "\n")
            out = root / "kernel.so"
            args = [cxx, *self.flags, "-include", str(shim_header()), "-I", str(self._stub_dir(root)),
                    "-x", "c++", str(cu), "-o", str(out), "-lm"]  # fmt: skip
            _run_cxx(args, src, f"{Path(cxx).name} (gpu shim, {self.device})")
            return out.read_bytes()


# ---------------------------------------------------------------------------------------
# runtime


def _address(handle: Any) -> int:
    if isinstance(handle, np.ndarray):
        return int(handle.ctypes.data)
    if isinstance(handle, int):
        return handle
    if isinstance(handle, ctypes.Array | ctypes.c_void_p):
        return ctypes.addressof(handle) if isinstance(handle, ctypes.Array) else int(handle.value or 0)
    raise TypeError(f"cannot pass a {type(handle).__name__} to an emulated kernel; expected a host buffer handle")


def _dims(what: str, size: tuple[int, ...]) -> tuple[int, int, int]:
    s = tuple(int(x) for x in size)
    if not 1 <= len(s) <= 3 or any(x < 1 for x in s):
        raise LaunchError(f"{what} must be 1 to 3 positive ints, got {size}")
    return (s + (1, 1))[:3]  # type: ignore[return-value]


class EmulatedProgram(Program):
    """One kernel of a shim-compiled library. ``global_size`` counts blocks, ``local_size`` threads."""

    def __init__(self, name: str, lib: bytes) -> None:
        self.name = name
        self._rt = shim_runtime()
        # dlopen needs a file; it may be deleted once mapped
        fd, path = tempfile.mkstemp(prefix=f"uops-emu-{name}-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(lib)
            self._lib = ctypes.CDLL(path)
        except OSError as e:
            raise LaunchError(f"cannot load the emulated library for {name!r}: {e}") from e
        finally:
            os.unlink(path)
        try:
            self._entry = getattr(self._lib, f"uops_shim_entry_{name}")
            barriers = ctypes.c_int.in_dll(self._lib, f"uops_shim_barriers_{name}").value
        except (AttributeError, ValueError) as e:
            raise LaunchError(f"kernel {name!r} is not in this library (was it built by EmulatedCompiler?)") from e
        self._barriers = int(barriers)
        self._entry_ptr = ctypes.cast(self._entry, ctypes.c_void_p)

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        grid, block = _dims("global_size", global_size), _dims("local_size", local_size)
        cells: list[ctypes.c_void_p | ctypes.c_int32] = [ctypes.c_void_p(_address(b)) for b in bufs]
        cells += [ctypes.c_int32(int(v)) for v in vals]
        args = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
        err = ctypes.create_string_buffer(512)
        t0 = time.perf_counter()
        rc = self._rt.uops_shim_launch(
            self._entry_ptr, args, (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
            self._barriers, 0, err, len(err),
        )  # fmt: skip
        elapsed = time.perf_counter() - t0
        if rc != 0:
            raise LaunchError(f"launching {self.name!r} grid {grid} block {block}: {err.value.decode()}")
        return elapsed if wait else None


class EmulatedRuntime(Runtime):
    """Host memory plus shim launches: a GPU device's runtime, emulated on the CPU."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.allocator = HostAllocator()

    def load(self, name: str, lib: bytes) -> EmulatedProgram:
        return EmulatedProgram(name, lib)
