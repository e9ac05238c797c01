"""CUDA C -> CUBIN (or PTX) with NVRTC, through NVIDIA's ``cuda-bindings``; needs no GPU.

Why NVRTC: it is a library, shipped on PyPI as ``nvidia-cuda-nvrtc``, so compiling needs no
CUDA toolkit install and works on GPU-less CI (``uops compile --device CUDA``). cuda-bindings
finds ``libnvrtc.so`` in that wheel (through ``cuda.pathfinder``), in a conda env, under
``CUDA_HOME``/``CUDA_PATH`` or on the system loader path.

Headers: ``cuda_fp16.h``/``cuda_bf16.h`` come from a CUDA toolkit or the
``nvidia-cuda-runtime`` wheel when one is found (``UOPS_CUDA_INCLUDE`` names a directory
explicitly); otherwise from the minimal fallback headers in ``uops_cuda/include``, which cover
what the renderer emits. The choice is part of the compiler identity, so the cache never mixes them.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from uops.plugin import CompileError, Compiler, CompilerUnavailableError
from uops_cuda import DEFAULT_ARCH, find_nvrtc_libraries
from uops_cuda import NVRTC_INSTALL_HINT as _INSTALL_HINT

__all__ = [
    "DEFAULT_ARCH",
    "NVRTCCompiler",
    "cuda_include_dir",
    "find_nvrtc_libraries",
    "nvrtc_available",
    "nvrtc_version",
    "parse_arch",
]

FALLBACK_INCLUDE = Path(__file__).resolve().parent / "include"
_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


def parse_arch(arch: str) -> tuple[str, int, str]:
    """``'sm_90'`` -> ``('sm', 90, '')``; ``'compute_90a'`` -> ``('compute', 90, 'a')``; else ValueError."""
    m = _ARCH_RE.match(arch)
    if m is None:
        raise ValueError(f"unknown CUDA architecture {arch!r}: expected sm_XY (CUBIN) or compute_XY (PTX), e.g. sm_90")
    return m.group(1), int(m.group(2)), m.group(3)


def _nvrtc() -> Any:
    """The ``cuda.bindings.nvrtc`` module, or CompilerUnavailableError saying how to install it."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CompilerUnavailableError(f"the CUDA compiler needs cuda-bindings ({e}); {_INSTALL_HINT}") from e
    return nvrtc


def _check(result: Any, what: str) -> None:
    nvrtc = _nvrtc()
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, name = nvrtc.nvrtcGetErrorString(result)
        raise RuntimeError(f"NVRTC {what} failed: {name.decode(errors='replace')} ({int(result)})")


def _preload_nvrtc() -> list[str]:
    """dlopen every libnvrtc found (RTLD_GLOBAL), so cuda-bindings' own dlopen by soname finds one loaded.

    Older cuda-bindings search only the system loader path; the nvidia-cuda-nvrtc wheel (or
    the one torch brings) puts the library in site-packages, where that search never looks.
    """
    loaded = []
    for path in find_nvrtc_libraries():
        try:
            ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue  # another version or architecture: the next candidate may fit
        loaded.append(str(path))
    return loaded


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor); CompilerUnavailableError when the library can't be loaded."""
    nvrtc = _nvrtc()
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as first:  # cuda-bindings raises RuntimeError/OSError subclasses when libnvrtc is missing
        loaded = _preload_nvrtc()
        try:
            err, major, minor = nvrtc.nvrtcVersion()
        except Exception as e:
            where = f" (also tried {', '.join(loaded)})" if loaded else ""
            raise CompilerUnavailableError(
                f"cannot load libnvrtc: {type(first).__name__}: {first}{where}; {_INSTALL_HINT}"
            ) from e
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompilerUnavailableError(f"nvrtcVersion failed ({err}); {_INSTALL_HINT}")
    return int(major), int(minor)


@functools.lru_cache(maxsize=1)
def supported_archs() -> tuple[int, ...]:
    """The SM versions this NVRTC can target, e.g. (75, 80, ..., 120)."""
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    _check(err, "nvrtcGetSupportedArchs")
    return tuple(int(a) for a in archs)


def nvrtc_available() -> str | None:
    """None when NVRTC loads through cuda-bindings; otherwise why not and how to fix it.

    The backend's probe only looks for the library (cheap, for choosing a device); this loads it.
    """
    try:
        nvrtc_version()
    except CompilerUnavailableError as e:
        return str(e)
    return None


@functools.lru_cache(maxsize=1)
def cuda_include_dir() -> Path | None:
    """A directory holding the toolkit's ``cuda_fp16.h``, or None (the fallback headers are used).

    ``UOPS_CUDA_INCLUDE`` wins (``none`` forces the fallback); then cuda.pathfinder's search
    (the nvidia-cuda-runtime wheel, conda, CUDA_HOME/CUDA_PATH, a system toolkit).
    """
    env = os.environ.get("UOPS_CUDA_INCLUDE")
    if env is not None:
        if env.strip().lower() in ("", "none", "0"):
            return None
        p = Path(env)
        if not (p / "cuda_fp16.h").is_file():
            raise CompilerUnavailableError(
                f"UOPS_CUDA_INCLUDE={env!r} has no cuda_fp16.h; point it at a CUDA include dir"
            )
        return p
    try:
        from cuda import pathfinder
    except ImportError:
        pathfinder = None
    if pathfinder is not None and hasattr(pathfinder, "find_nvidia_header_directory"):
        try:
            found = pathfinder.find_nvidia_header_directory("cudart")
        except Exception:  # a search that fails for any reason means "not found": the fallback covers it
            found = None
        if found and (Path(found) / "cuda_fp16.h").is_file():
            return Path(found)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "include" / "cuda_fp16.h").is_file():
            return Path(root) / "include"
    return None


class NVRTCCompiler(Compiler):
    """Compiles one CUDA C translation unit to CUBIN for ``arch`` (``sm_XY``), or PTX.

    PTX comes out when ``arch`` is ``compute_XY`` or ``ptx=True``. Works without a GPU.
    """

    def __init__(self, arch: str = DEFAULT_ARCH, ptx: bool = False, extra_flags: tuple[str, ...] = ()) -> None:
        kind, num, suffix = parse_arch(arch)
        self.ptx = ptx or kind == "compute"
        self.arch = f"{'compute' if self.ptx else 'sm'}_{num}{suffix}"
        self.sm = num
        include = cuda_include_dir()
        self.include_dir = include if include is not None else FALLBACK_INCLUDE
        self._identity: str | None = None
        self.flags = (
            f"--gpu-architecture={self.arch}",
            "--std=c++17",
            "-I" + str(self.include_dir),
            *extra_flags,
        )

    def identity(self) -> str:
        if self._identity is None:  # computed once: it is part of every cache key
            major, minor = nvrtc_version()
            hdr = self.include_dir / "cuda_fp16.h"
            digest = hashlib.sha256(hdr.read_bytes()).hexdigest()[:12] if hdr.is_file() else "none"
            self._identity = f"nvrtc-{major}.{minor}:{self.arch}:{'ptx' if self.ptx else 'cubin'}:fp16-{digest}"
        return self._identity

    def __repr__(self) -> str:
        return f"NVRTCCompiler(arch={self.arch!r}, ptx={self.ptx})"

    def compile(self, src: str) -> bytes:
        nvrtc = _nvrtc()
        major, minor = nvrtc_version()
        if self.sm not in supported_archs():
            known = ", ".join(f"sm_{a}" for a in supported_archs())
            raise CompilerUnavailableError(
                f"NVRTC {major}.{minor} cannot target {self.arch}; it supports {known}. "
                "Pick one of those, or install an NVRTC that supports this GPU."
            )
        err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"kernel.cu", 0, [], [])
        _check(err, "nvrtcCreateProgram")
        try:
            opts = [f.encode() for f in self.flags]
            (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            log = self._log(prog)
            if result == nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION:
                raise CompileError(
                    log or "compilation failed (NVRTC gave no log)", src, f"NVRTC {major}.{minor} ({self.arch})"
                )
            _check(result, "nvrtcCompileProgram")
            if self.ptx:
                err, size = nvrtc.nvrtcGetPTXSize(prog)
                _check(err, "nvrtcGetPTXSize")
                buf = bytearray(size)  # NVRTC writes into it: never an (immutable, possibly shared) bytes
                (err,) = nvrtc.nvrtcGetPTX(prog, buf)
                _check(err, "nvrtcGetPTX")
            else:
                err, size = nvrtc.nvrtcGetCUBINSize(prog)
                _check(err, "nvrtcGetCUBINSize")
                buf = bytearray(size)  # NVRTC writes into it: never an (immutable, possibly shared) bytes
                (err,) = nvrtc.nvrtcGetCUBIN(prog, buf)
                _check(err, "nvrtcGetCUBIN")
            if not buf.strip(b"\x00 "):
                raise CompileError(
                    f"NVRTC returned an empty {'PTX' if self.ptx else 'CUBIN'}; log:\n{log}", src, "NVRTC"
                )
            return bytes(buf.rstrip(b"\x00") + b"\x00") if self.ptx else bytes(buf)  # PTX is loaded as a C string
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    @staticmethod
    def _log(prog: Any) -> str:
        nvrtc = _nvrtc()
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check(err, "nvrtcGetProgramLogSize")
        buf = bytearray(size)  # NVRTC writes into it: never an (immutable, possibly shared) bytes
        (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
        _check(err, "nvrtcGetProgramLog")
        return buf.rstrip(b"\x00").decode(errors="replace").strip()
