"""The CPU runtime: aligned host memory and shared libraries loaded with ctypes.

Loading never compiles: ``load`` takes the bytes ``ClangCompiler`` produced (possibly on
another machine, from a serialised ProgramSpec) and dlopens them.
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
import time
from typing import Any

import numpy as np

from uops.device import Buffer, HostAllocator, Program, Runtime

__all__ = ["ClangProgram", "ClangRuntime"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _address(buf: Any) -> int:
    if isinstance(buf, Buffer):
        buf = buf.handle
    if isinstance(buf, np.ndarray):
        return int(buf.ctypes.data)
    if isinstance(buf, int) and not isinstance(buf, bool):
        return buf
    raise TypeError(f"a CPU kernel argument must be a buffer handle (numpy array), a Buffer or an address, got {buf!r}")


class ClangProgram(Program):
    """One function of a loaded shared library; buffer pointers first, then int32 vals.

    CPU kernels loop over their whole index space, so ``global_size``/``local_size`` are
    accepted for the common launch signature and not used.
    """

    def __init__(self, name: str, lib: bytes) -> None:
        if not lib.startswith(b"\x7fELF"):
            raise ValueError(
                f"cannot load {name!r} on CPU: the bytes are not an ELF shared library "
                f"(starts with {lib[:8]!r}); was the program compiled for another device?"
            )
        self.name = name
        fd, path = tempfile.mkstemp(prefix=f"uops-{re.sub(r'[^A-Za-z0-9_]', '_', name)[:40]}-", suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(lib)
            try:
                self._dll = ctypes.CDLL(path)
            except OSError as e:
                raise OSError(
                    f"cannot load the kernel library for {name!r}: {e}. If the temp dir is mounted noexec, "
                    "point TMPDIR at one that allows executables"
                ) from e
        finally:
            os.unlink(path)  # the mapping stays valid after the file is gone
        try:
            self._fxn = getattr(self._dll, name)
        except AttributeError:
            raise AttributeError(
                f"the compiled library has no function {name!r}: the kernel source must define it "
                "(check the name passed to load against the rendered source)"
            ) from None
        self._fxn.restype = None

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        """Run the kernel on the calling thread; with ``wait`` return the elapsed seconds."""
        args: list[Any] = [ctypes.c_void_p(_address(b)) for b in bufs]
        for v in vals:
            iv = int(v)
            if not _INT32_MIN <= iv <= _INT32_MAX:
                raise ValueError(f"{self.name}: kernel variable value {v} does not fit in int32")
            args.append(ctypes.c_int32(iv))
        if wait:
            t0 = time.perf_counter()
            self._fxn(*args)
            return time.perf_counter() - t0
        self._fxn(*args)
        return None


class ClangRuntime(Runtime):
    """Device "OLDCPU": 64-byte aligned numpy-backed memory (zero-copy views) and ctypes launches."""

    def __init__(self, device: str = "OLDCPU") -> None:
        self.device = device
        self.allocator = HostAllocator(align=64)

    def load(self, name: str, lib: bytes) -> ClangProgram:
        """dlopen the compiled bytes and return the kernel ``name``; never compiles."""
        return ClangProgram(name, lib)

    def synchronize(self) -> None:
        """Kernels run synchronously on the calling thread: nothing to wait for."""
        return None
