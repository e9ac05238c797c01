"""The Compiler contract and its errors.

A ``Compiler`` turns rendered source into the bytes a runtime loads. Compiling is slow
(tens of milliseconds per kernel with clang, more with GPU toolchains), so
``compile_cached`` keeps results in memory and on disk (``uops.compiler.cache``), keyed by
the source, the compiler's identity (name, version, target) and its flags.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod

from uops.compiler.cache import (
    cache_dir,
    cache_key,
    clear_memory_cache,
    entry_path,
    memo_get,
    memo_put,
    read_entry,
    warn_cache,
    write_entry,
)
from uops.errors import UopsError

__all__ = [
    "CompileError",
    "Compiler",
    "CompilerUnavailableError",
    "cache_dir",
    "cache_key",
    "clear_memory_cache",
    "compile_workers",
    "positive_int_from_env",
    "usable_cores",
    "read_entry",
    "write_entry",
]

# ---------------------------------------------------------------------------------------
# errors


_MAX_SOURCE_LINES = 120  # beyond this, CompileError shows only the lines around the errors
_CONTEXT = 4  # lines shown either side of a line the compiler's message names


class CompileError(UopsError, RuntimeError):
    """A compiler rejected a source: carries the compiler's message and the source itself.

    ``str()`` shows both, the source with line numbers so the compiler's ``file:line:col``
    references can be followed. Huge sources are cut down to the lines the message names.
    """

    def __init__(self, message: str, source: str, compiler: str | None = None) -> None:
        self.message = message
        self.source = source
        self.compiler = compiler
        super().__init__(message)

    def __reduce__(self) -> tuple[type[CompileError], tuple[str, str, str | None]]:
        # keep source and compiler when the error crosses a process boundary (multiprocessing)
        return (type(self), (self.message, self.source, self.compiler))

    def numbered_source(self) -> str:
        """The source with 1-based line numbers; long sources keep only the relevant lines."""
        lines = self.source.splitlines()
        width = len(str(len(lines)))
        if len(lines) <= _MAX_SOURCE_LINES:
            keep = set(range(len(lines)))
        else:
            named = {int(m) - 1 for m in re.findall(r":(\d+):\d+:", self.message)}
            named = {n for n in named if 0 <= n < len(lines)}
            keep = set(range(min(10, len(lines))))  # the signature is at the top
            for n in named:
                keep.update(range(max(0, n - _CONTEXT), min(len(lines), n + _CONTEXT + 1)))
            if not named:  # nothing to aim at: show the head and the tail
                keep.update(range(min(60, len(lines))))
                keep.update(range(max(0, len(lines) - 20), len(lines)))
        out: list[str] = []
        prev = -1
        for i in sorted(keep):
            if i != prev + 1:
                out.append(f"{'':>{width}} | ... ({i - prev - 1} lines not shown)")
            out.append(f"{i + 1:>{width}} | {lines[i]}")
            prev = i
        if prev != len(lines) - 1:
            out.append(f"{'':>{width}} | ... ({len(lines) - prev - 1} lines not shown)")
        return "\n".join(out)

    def __str__(self) -> str:
        who = self.compiler or "the compiler"
        msg = self.message.rstrip() or "(no message)"
        n = len(self.source.splitlines())
        return f"{who} failed:\n{msg}\n--- source ({n} lines) ---\n{self.numbered_source()}"


class CompilerUnavailableError(UopsError, RuntimeError):
    """The toolchain itself is missing or broken (not a problem with the source): says how to fix it."""


# ---------------------------------------------------------------------------------------
# compiler base


class Compiler(ABC):
    """Source -> bytes for one target. Subclasses set ``flags`` and must implement ``compile``.

    ``identity()`` names the compiler, its version and its target; together with ``flags``
    it separates cache entries of different toolchains, so a compiler upgrade never loads
    a binary built by the old one.
    """

    flags: tuple[str, ...] = ()

    def identity(self) -> str:
        """Name + version + target. Subclasses override (and cache any version lookup)."""
        return f"{type(self).__module__}.{type(self).__qualname__}"

    @abstractmethod
    def compile(self, src: str) -> bytes:
        """Compile ``src``; raise ``CompileError(message, source)`` when it is rejected.

        Raise ``CompilerUnavailableError`` when the toolchain itself is missing or broken.
        """

    def check_binary(self, lib: bytes) -> None:
        """Raise ValueError when ``lib`` cannot be a binary this compiler produced; a cached entry is then replaced.

        The default accepts any bytes; compilers of native code check the format.
        """
        return None

    def process_identity(self) -> str:
        """What tells this compiler's results apart inside one process: the in-memory memo's key.

        Why: ``identity()`` may have to run the toolchain (``clang --version``), which a cold
        process with the disk cache off would pay for nothing. A subclass whose identity is costly
        returns something cheap that still changes when the toolchain does (its path and file
        stamp); the default is ``identity()``.
        """
        return self.identity()

    def cache_key(self, src: str) -> str:
        """The disk cache's key: source, ``identity()`` and flags."""
        return cache_key(src, self.identity(), tuple(self.flags))

    def compile_cached(self, src: str) -> bytes:
        """``compile`` through the in-process memo and the disk cache."""
        memo_key = cache_key(src, self.process_identity(), tuple(self.flags))
        lib = memo_get(memo_key)
        if lib is not None:
            return lib
        d = cache_dir()
        path = entry_path(d, self.cache_key(src)) if d is not None else None
        if path is not None:
            lib = read_entry(path, check=self.check_binary)
        if lib is None:
            lib = self.compile(src)
            if not isinstance(lib, bytes | bytearray):
                raise TypeError(f"{type(self).__qualname__}.compile returned {type(lib).__name__}, expected bytes")
            lib = bytes(lib)
            if path is not None:
                try:
                    write_entry(path, lib)
                except OSError as e:
                    warn_cache(f"uops compile cache: cannot write {path}: {e}; continuing without caching this kernel")
        memo_put(memo_key, lib)
        return lib


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def positive_int_from_env(var: str, default: int) -> int:
    """``var`` as a positive integer, else ``default``; a bad value is an error naming the variable."""
    env = os.environ.get(var, "").strip()
    if not env:
        return default
    try:
        n = int(env)
    except ValueError:
        raise ValueError(f"{var} must be a positive integer, got {env!r}") from None
    if n < 1:
        raise ValueError(f"{var} must be a positive integer, got {n}")
    return n


def compile_workers(jobs: int) -> int:
    """How many of ``jobs`` compiles to run at once: ``UOPS_COMPILE_THREADS``, else one per usable core.

    Compilers run as subprocesses (clang) or release the GIL (nvrtc), so threads overlap them.
    """
    return max(1, min(positive_int_from_env("UOPS_COMPILE_THREADS", usable_cores()), jobs))
