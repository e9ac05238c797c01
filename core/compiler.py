"""Compiler base class and the on-disk compile cache.

A ``Compiler`` turns rendered source into the bytes a runtime loads. Compiling is slow
(tens of milliseconds per kernel with clang, more with GPU toolchains), so
``compile_cached`` keeps results in memory and on disk, keyed by the source, the compiler's
identity (name, version, target) and its flags.

The disk cache is a per-user directory (``$XDG_CACHE_HOME/uops`` or ``~/.cache/uops``;
``UOPS_CACHE_DIR`` moves it, ``UOPS_CACHE=0`` turns it off). Entries are written to a temp
file in the same directory and renamed into place, so a concurrent reader sees either no
entry or a whole one. Each entry starts with a header (magic, sha256 of the payload,
payload length); an entry that fails the check is deleted and recompiled, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import tempfile
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

__all__ = [
    "CompileError",
    "Compiler",
    "CompilerUnavailableError",
    "cache_dir",
    "cache_key",
    "clear_memory_cache",
    "read_entry",
    "write_entry",
]

# ---------------------------------------------------------------------------------------
# errors


_MAX_SOURCE_LINES = 120  # beyond this, CompileError shows only the lines around the errors
_CONTEXT = 4  # lines shown either side of a line the compiler's message names


class CompileError(RuntimeError):
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


class CompilerUnavailableError(RuntimeError):
    """The toolchain itself is missing or broken (not a problem with the source): says how to fix it."""


# ---------------------------------------------------------------------------------------
# cache directory


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "uops"


def _warn(msg: str) -> None:
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def cache_dir() -> Path | None:
    """The directory of the disk cache, created private (0700); None when disk caching is off.

    Off when ``UOPS_CACHE=0``, and also (with a warning saying why) when the directory can't
    be made safe: it is not a directory, it belongs to another user, or it can't be created.
    """
    if os.environ.get("UOPS_CACHE", "1").strip() == "0":
        return None
    env = os.environ.get("UOPS_CACHE_DIR")
    d = Path(env).expanduser() if env else _default_cache_dir()
    try:
        if not os.path.lexists(d):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(d)
    except OSError as e:
        _warn(f"uops compile cache disabled: cannot create {d}: {e}. Set UOPS_CACHE_DIR to a writable directory.")
        return None
    if not stat.S_ISDIR(st.st_mode):
        _warn(f"uops compile cache disabled: {d} is not a directory. Remove it or set UOPS_CACHE_DIR elsewhere.")
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        _warn(
            f"uops compile cache disabled: {d} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
            "loading binaries another user can write is unsafe. Set UOPS_CACHE_DIR to a directory of your own."
        )
        return None
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(d, 0o700)
        except OSError as e:
            _warn(f"uops compile cache disabled: {d} is open to other users and chmod 0700 failed: {e}")
            return None
    return d


# ---------------------------------------------------------------------------------------
# entries

_MAGIC = b"UOPSBIN1"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256(payload), len(payload)
_KEY_VERSION = 1  # bump when the key or entry format changes


def cache_key(src: str, identity: str, flags: tuple[str, ...]) -> str:
    """sha256 (hex) of source, compiler identity and flags: the name of the cache entry."""
    blob = json.dumps([_KEY_VERSION, src, identity, list(flags)], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def _entry_path(d: Path, key: str) -> Path:
    return d / f"{key}.bin"


def read_entry(path: Path) -> bytes | None:
    """The payload of a cache entry, or None if missing; a corrupt entry is deleted and None returned."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        _warn(f"uops compile cache: cannot read {path}: {e}; recompiling")
        return None
    ok = len(data) >= _HEADER.size
    if ok:
        magic, digest, length = _HEADER.unpack_from(data)
        payload = data[_HEADER.size :]
        ok = magic == _MAGIC and length == len(payload) and hashlib.sha256(payload).digest() == digest
    if ok:
        return payload
    try:
        path.unlink(missing_ok=True)  # another process may have removed or replaced it already
    except OSError as e:
        _warn(f"uops compile cache: cannot delete the corrupt entry {path}: {e}")
    return None


def write_entry(path: Path, payload: bytes) -> None:
    """Write an entry atomically: a temp file in the same directory, then ``os.replace``."""
    header = _HEADER.pack(_MAGIC, hashlib.sha256(payload).digest(), len(payload))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".bin")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---------------------------------------------------------------------------------------
# in-process memo

_MEMO_MAX = 4096
_memo: OrderedDict[str, bytes] = OrderedDict()
_memo_lock = threading.Lock()


def clear_memory_cache() -> None:
    """Forget the in-process memo (the disk cache is kept). Tests use it to reach the disk."""
    with _memo_lock:
        _memo.clear()


def _memo_get(key: str) -> bytes | None:
    with _memo_lock:
        lib = _memo.get(key)
        if lib is not None:
            _memo.move_to_end(key)
        return lib


def _memo_put(key: str, lib: bytes) -> None:
    with _memo_lock:
        _memo[key] = lib
        _memo.move_to_end(key)
        while len(_memo) > _MEMO_MAX:
            _memo.popitem(last=False)


# ---------------------------------------------------------------------------------------
# compiler base


class Compiler:
    """Source -> bytes for one target. Subclasses set ``flags`` and implement ``compile``.

    ``identity()`` names the compiler, its version and its target; together with ``flags``
    it separates cache entries of different toolchains, so a compiler upgrade never loads
    a binary built by the old one.
    """

    flags: tuple[str, ...] = ()

    def identity(self) -> str:
        """Name + version + target. Subclasses override (and cache any version lookup)."""
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def compile(self, src: str) -> bytes:
        """Compile ``src``; raise ``CompileError(message, source)`` when it is rejected."""
        raise NotImplementedError(f"{type(self).__qualname__} must implement compile(src) -> bytes")

    def cache_key(self, src: str) -> str:
        return cache_key(src, self.identity(), tuple(self.flags))

    def compile_cached(self, src: str) -> bytes:
        """``compile`` through the in-process memo and the disk cache."""
        key = self.cache_key(src)
        lib = _memo_get(key)
        if lib is not None:
            return lib
        d = cache_dir()
        path = _entry_path(d, key) if d is not None else None
        if path is not None:
            lib = read_entry(path)
        if lib is None:
            lib = self.compile(src)
            if not isinstance(lib, bytes | bytearray):
                raise TypeError(f"{type(self).__qualname__}.compile returned {type(lib).__name__}, expected bytes")
            lib = bytes(lib)
            if path is not None:
                try:
                    write_entry(path, lib)
                except OSError as e:
                    _warn(f"uops compile cache: cannot write {path}: {e}; continuing without caching this kernel")
        _memo_put(key, lib)
        return lib
