"""The CPU runtime: aligned host memory and shared libraries loaded with ctypes.

Loading never compiles: ``load`` takes the bytes ``ClangCompiler`` produced (possibly on
another machine, from a serialised ProgramSpec), checks they are a shared library for this
machine that defines the kernel itself, and dlopens them; the library is closed again when its
program is garbage.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from uops.plugin import (
    Buffer,
    ElfError,
    HostAllocator,
    Program,
    ProgramLoadError,
    Runtime,
    SharedLibrary,
    SymbolNotDefinedError,
)
from uops_cpu_clang.renderer import cpu_threads

__all__ = ["ClangProgram", "ClangRuntime", "cpu_threads"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_PLUGIN = __name__.partition(".")[0]


def _address(buf: Any) -> int:
    if isinstance(buf, Buffer):
        buf = buf.handle
    if isinstance(buf, np.ndarray):
        return int(buf.ctypes.data)
    if isinstance(buf, int) and not isinstance(buf, bool):
        return buf
    raise TypeError(f"a CPU kernel argument must be a buffer handle (numpy array), a Buffer or an address, got {buf!r}")


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _workers() -> ThreadPoolExecutor:
    global _pool, _pool_size
    n = cpu_threads()
    if _pool is None or _pool_size != n:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool, _pool_size = ThreadPoolExecutor(max_workers=n, thread_name_prefix="uops-cpu"), n
    return _pool


class ClangProgram(Program):
    """One function of a loaded shared library; buffer pointers first, then int32 vals.

    A kernel with a THREAD axis has ``global_size[0]`` chunks and takes the chunk number as a
    last int argument; the chunks run on ``cpu_threads()`` workers (ctypes releases the GIL
    during each call), the calling thread among them, each taking the next chunk when it is free.
    Other kernels run on the caller.
    """

    def __init__(self, name: str, lib: bytes) -> None:
        self.name = name
        try:
            self._lib = SharedLibrary(lib, what=f"kernel library for {name!r}", prefix=f"uops-{name[:40]}-")
            self._fxn = self._lib.function(name)
        except (ElfError, SymbolNotDefinedError, OSError) as e:
            raise ProgramLoadError(_PLUGIN, name, e) from e
        self._fxn.restype = None

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        """Run the kernel (a THREADed one's chunks on the workers); with ``wait`` return the elapsed seconds."""
        args: list[Any] = [ctypes.c_void_p(_address(b)) for b in bufs]
        for v in vals:
            iv = int(v)
            if not _INT32_MIN <= iv <= _INT32_MAX:
                raise ValueError(f"{self.name}: kernel variable value {v} does not fit in int32")
            args.append(ctypes.c_int32(iv))
        chunks = math.prod(global_size)
        t0 = time.perf_counter()
        if chunks <= 1:
            self._fxn(*args)
        else:
            self._run_chunks(args, chunks)
        return time.perf_counter() - t0 if wait else None

    def _run_chunks(self, args: list[Any], chunks: int) -> None:
        workers = min(cpu_threads(), chunks)
        if workers == 1:
            for c in range(chunks):
                self._fxn(*args, ctypes.c_int32(c))
            return

        # each worker claims the next chunk when it is free (count's __next__ is atomic under the
        # GIL): a worker whose core is busy elsewhere then delays only the chunk it holds
        claim = itertools.count().__next__

        def share() -> None:
            while (c := claim()) < chunks:
                self._fxn(*args, ctypes.c_int32(c))

        futs = [_workers().submit(share) for _ in range(1, workers)]
        share()
        for f in futs:
            f.result()


class ClangRuntime(Runtime):
    """Device "CPU": 64-byte aligned numpy-backed memory (zero-copy views) and ctypes launches."""

    def __init__(self, device: str = "CPU") -> None:
        self.device = device
        self.allocator = HostAllocator(align=64)

    def load(self, name: str, lib: bytes) -> ClangProgram:
        """dlopen the checked bytes and return the kernel ``name`` the library defines; never compiles."""
        return ClangProgram(name, lib)

    def synchronize(self) -> None:
        """Kernels run synchronously on the calling thread: nothing to wait for."""
        return None
