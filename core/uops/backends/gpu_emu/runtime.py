"""``EmulatedRuntime``: host memory plus launches through the shim's launcher library.

The launcher (``uops_shim_launch``) is built from gpu_shim.h once per machine and cached on
disk. A program checks every launch against what a GPU would accept — positive grid and
block sizes within the dialect's limits, and no more threads per block than the kernel's
compiled launch bound — because the emulated kernel, unlike a GPU, would run such a launch
and write past the end of its shared arrays or buffers.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from uops.backends.gpu_emu.compiler import cxx_path, cxx_version, run_cxx, shim_header
from uops.backends.gpu_emu.dialect import Dialect
from uops.compiler import CompileError, CompilerUnavailableError, cache_dir
from uops.runtime import HostAllocator, Launch, LaunchError, LaunchProgram, ProgramLoadError, Runtime, launch_dims
from uops.runtime.elf import ElfError, SharedLibrary, SymbolNotDefinedError

__all__ = [
    "EmulatedProgram", "EmulatedRuntime", "LaunchError", "LaunchStats", "kernel_symbols", "probe_runtime",
    "shim_runtime",
]  # fmt: skip


_runtime_lock = threading.Lock()
_runtime_lib: ctypes.CDLL | None = None


def _launcher_path() -> Path:
    cxx = cxx_path()
    header = shim_header().read_bytes()
    key = hashlib.sha256(header + cxx_version(cxx).encode()).hexdigest()[:24]
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
            # no _FORTIFY_SOURCE: its checked longjmp refuses a jump from a fiber's stack to the scheduler's
            args = [cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-U_FORTIFY_SOURCE",
                    "-DUOPS_SHIM_RUNTIME", "-x", "c++", str(shim_header()), "-o", tmp]  # fmt: skip
            run_cxx(args, header.decode(), "building the gpu shim runtime")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return path


def shim_runtime() -> ctypes.CDLL:
    """The shim's launcher (``uops_shim_launch``), built from gpu_shim.h once and cached on disk."""
    global _runtime_lib
    with _runtime_lock:
        if _runtime_lib is None:
            lib = ctypes.CDLL(str(_launcher_path()))
            fn = lib.uops_shim_launch
            fn.restype = ctypes.c_int
            fn.argtypes = [
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.c_int,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_ulonglong),
                ctypes.c_char_p,
                ctypes.c_size_t,
            ]
            _runtime_lib = lib
        return _runtime_lib


def kernel_symbols(lib: SharedLibrary, name: str) -> tuple[Any, int, int]:
    """The entry thunk of kernel ``name`` in a library built by EmulatedCompiler, its barrier flag, its bound.

    Only symbols the library itself defines resolve (never one of its dependencies): any other
    raises ``SymbolNotDefinedError``.
    """
    entry = lib.function(f"uops_shim_entry_{name}")
    barriers = lib.object(f"uops_shim_barriers_{name}", ctypes.c_int).value
    bound = lib.object(f"uops_shim_bound_{name}", ctypes.c_uint).value
    return entry, int(barriers), int(bound)


class LaunchStats(NamedTuple):
    """What the last launch of an emulated kernel measured: ``local_reads``, the most reads of counted local
    arrays by one GPU thread (0 unless the kernel was built by ``EmulatedCompiler.counting()``), and ``rounds``,
    the most barrier phases of one block (one more than the barriers each of its threads passed)."""

    local_reads: int
    rounds: int


def _address(handle: Any) -> int:
    if isinstance(handle, np.ndarray):
        return int(handle.ctypes.data)
    if isinstance(handle, int):
        return handle
    if isinstance(handle, ctypes.Array | ctypes.c_void_p):
        return ctypes.addressof(handle) if isinstance(handle, ctypes.Array) else int(handle.value or 0)
    raise TypeError(f"cannot pass a {type(handle).__name__} to an emulated kernel; expected a host buffer handle")


class EmulatedProgram(LaunchProgram):
    """One kernel of a shim-compiled library. ``global_size`` counts blocks, ``local_size`` threads."""

    def __init__(self, name: str, lib: bytes, dialect: Dialect, plugin: str = __name__) -> None:
        self.name = name
        self.dialect = dialect
        self._rt = shim_runtime()
        try:
            self._lib = SharedLibrary(lib, what=f"emulated library for {name!r}", prefix=f"uops-emu-{name[:40]}-")
            entry, self._barriers, self.bound = kernel_symbols(self._lib, name)
        except SymbolNotDefinedError as e:
            why = f"no such kernel (was the library built by EmulatedCompiler?): {e}"
            raise ProgramLoadError(plugin, name, why) from e
        except (ElfError, OSError) as e:
            raise ProgramLoadError(plugin, name, e) from e
        self._entry_ptr = ctypes.cast(entry, ctypes.c_void_p)
        self.last_stats: LaunchStats | None = None  # set by each launch

    def check_launch(
        self, global_size: tuple[int, ...], local_size: tuple[int, ...]
    ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """The launch as (grid, block), or LaunchError naming the kernel and sizes a GPU would reject."""
        d = self.dialect
        why = "it was compiled for (its launch bound); a GPU refuses this launch"
        return launch_dims(self.name, global_size, local_size, d.name, d.max_grid, d.max_block, self.bound, why)

    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | None:
        global_size, local_size, vals, wait = kw["global_size"], kw["local_size"], kw["vals"], kw["wait"]
        grid, block = self.check_launch(global_size, local_size)
        cells: list[ctypes.c_void_p | ctypes.c_int32] = [ctypes.c_void_p(_address(b)) for b in bufs]
        cells += [ctypes.c_int32(int(v)) for v in vals]
        args = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
        err = ctypes.create_string_buffer(512)
        stats = (ctypes.c_ulonglong * 2)()
        t0 = time.perf_counter()
        rc = self._rt.uops_shim_launch(
            self._entry_ptr, args, (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
            self._barriers, 0, stats, err, len(err),
        )  # fmt: skip
        elapsed = time.perf_counter() - t0
        if rc != 0:
            raise LaunchError(f"launching {self.name!r} grid {grid} block {block}: {err.value.decode()}")
        self.last_stats = LaunchStats(int(stats[0]), int(stats[1]))
        return elapsed if wait else None


class EmulatedRuntime(Runtime):
    """Host memory plus shim launches: a GPU device's runtime, emulated on the CPU."""

    def __init__(self, device: str, dialect: Dialect, plugin: str = __name__) -> None:
        self.device = device
        self.dialect = dialect
        self.plugin = plugin  # named in load errors: the package that declares the dialect
        self.allocator = HostAllocator()

    def load(self, name: str, lib: bytes) -> EmulatedProgram:
        return EmulatedProgram(name, lib, self.dialect, self.plugin)


def probe_runtime() -> str | None:
    """The launcher is built from gpu_shim.h on first use: that build is the probe."""
    try:
        shim_runtime()
    except (CompileError, CompilerUnavailableError, OSError) as e:
        return f"cannot build the GPU shim launcher: {e}"
    return None
