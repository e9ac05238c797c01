"""The compile cache: an in-process memo and a per-user directory of compiled binaries.

The disk cache is a per-user directory (``$XDG_CACHE_HOME/uops`` or ``~/.cache/uops``;
``UOPS_CACHE_DIR`` moves it, ``UOPS_CACHE=0`` turns it off). Entries are written to a temp
file in the same directory and renamed into place, so a concurrent reader sees either no
entry or a whole one. Each entry starts with a header (magic, the key it belongs to, sha256
and length of the payload). Only regular files are read (no links, FIFOs or devices), up to a
size limit; an entry that fails any check, or whose payload the compiler says it cannot have
produced, is deleted (with a warning saying why) and recompiled, never loaded.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import struct
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = [
    "LRU",
    "MAX_ENTRY_BYTES",
    "cache_dir",
    "cache_key",
    "clear_memory_cache",
    "entry_path",
    "memo_get",
    "memo_put",
    "read_entry",
    "read_regular_file",
    "warn_cache",
    "write_entry",
]

# ---------------------------------------------------------------------------------------
# cache directory


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "uops"


def warn_cache(msg: str) -> None:
    """A cache problem is never fatal: say what it is and go on without that entry."""
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
        warn_cache(f"uops compile cache disabled: cannot create {d}: {e}. Set UOPS_CACHE_DIR to a writable directory.")
        return None
    if not stat.S_ISDIR(st.st_mode):
        warn_cache(f"uops compile cache disabled: {d} is not a directory. Remove it or set UOPS_CACHE_DIR elsewhere.")
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        warn_cache(
            f"uops compile cache disabled: {d} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
            "loading binaries another user can write is unsafe. Set UOPS_CACHE_DIR to a directory of your own."
        )
        return None
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(d, 0o700)
        except OSError as e:
            warn_cache(f"uops compile cache disabled: {d} is open to other users and chmod 0700 failed: {e}")
            return None
    return d


# ---------------------------------------------------------------------------------------
# entries

_MAGIC = b"UOPSBIN2"
_HEADER = struct.Struct("<8s32s32sQ")  # magic, sha256(key), sha256(payload), len(payload)
_KEY_VERSION = 2  # bump when the key or entry format changes (old entries are then never read)
MAX_ENTRY_BYTES = 256 << 20  # no compiled kernel comes near this; a larger entry is not one of ours


def cache_key(src: str, identity: str, flags: tuple[str, ...]) -> str:
    """sha256 (hex) of source, compiler identity and flags: the name of the cache entry."""
    blob = json.dumps([_KEY_VERSION, src, identity, list(flags)], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def entry_path(d: Path, key: str) -> Path:
    return d / f"{key}.bin"


def _key_digest(path: Path) -> bytes:
    """What binds an entry to its key: the key is the entry's file name."""
    return hashlib.sha256(path.stem.encode()).digest()


def read_regular_file(path: str | os.PathLike[str], limit: int, follow_symlinks: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Raises FileNotFoundError when it is missing and ValueError naming the problem when it is a
    symbolic link (unless ``follow_symlinks``), a FIFO, a device or a directory, or too large:
    a FIFO must not block the reader, nor /dev/zero fill memory.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if not follow_symlinks and e.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise ValueError(f"{path} is a symbolic link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file (mode {stat.filemode(st.st_mode)})")
        if st.st_size > limit:
            raise ValueError(f"{path} is {st.st_size} bytes, more than the limit of {limit}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise ValueError(f"{path} is more than the limit of {limit} bytes")
    return data


def _drop(path: Path, why: str) -> None:
    warn_cache(f"uops compile cache: {path} {why}; deleted it and recompiling")
    try:
        path.unlink(missing_ok=True)  # another process may have removed or replaced it already
    except OSError as e:
        warn_cache(f"uops compile cache: cannot delete the bad entry {path}: {e}")


def read_entry(path: Path, check: Callable[[bytes], object] | None = None) -> bytes | None:
    """The payload of the cache entry at ``path``, or None when there is none to use.

    An entry is used only if it is a regular file within the size limit, its header names the
    key it is filed under (its file name), its checksum holds, and ``check(payload)`` (the
    compiler's own test that the bytes are a binary it produces) raises no ValueError. Any
    other entry is deleted, with a warning saying why, so the caller recompiles and replaces it.
    """
    try:
        data = read_regular_file(path, _HEADER.size + MAX_ENTRY_BYTES)
    except FileNotFoundError:
        return None
    except ValueError as e:
        _drop(path, f"is not a usable entry ({e})")
        return None
    except OSError as e:
        warn_cache(f"uops compile cache: cannot read {path}: {e}; recompiling")
        return None
    if len(data) < _HEADER.size or not data.startswith(_MAGIC):
        _drop(path, "is not a uops cache entry of this version (bad header)")
        return None
    _, key, digest, length = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if key != _key_digest(path):
        _drop(path, "holds the entry of another key (renamed or copied in)")
        return None
    if length != len(payload) or hashlib.sha256(payload).digest() != digest:
        _drop(path, "fails its checksum (truncated or corrupted)")
        return None
    if check is not None:
        try:
            check(payload)
        except ValueError as e:
            _drop(path, f"passed its checksum but holds no loadable binary ({e})")
            return None
    return payload


def write_entry(path: Path, payload: bytes) -> None:
    """Write an entry atomically: a temp file in the same directory, then ``os.replace``."""
    header = _HEADER.pack(_MAGIC, _key_digest(path), hashlib.sha256(payload).digest(), len(payload))
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

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A thread-safe mapping of at most ``maxsize`` entries; the least recently used falls out.

    What falls out is only dropped: a loaded program unloads itself when nothing refers to it.
    """

    def __init__(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"an LRU cache needs a size of at least 1, got {maxsize!r}")
        self.maxsize = maxsize
        self._d: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d


_MEMO_MAX = 4096
_memo: LRU[str, bytes] = LRU(_MEMO_MAX)


def clear_memory_cache() -> None:
    """Forget the in-process memo (the disk cache is kept). Tests use it to reach the disk."""
    _memo.clear()


def memo_get(key: str) -> bytes | None:
    return _memo.get(key)


def memo_put(key: str, lib: bytes) -> None:
    _memo.put(key, lib)
