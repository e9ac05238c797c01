"""The compile cache: an in-process memo and a per-user directory of compiled binaries.

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
import stat
import struct
import tempfile
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

__all__ = [
    "cache_dir",
    "cache_key",
    "clear_memory_cache",
    "entry_path",
    "memo_get",
    "memo_put",
    "read_entry",
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

_MAGIC = b"UOPSBIN1"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256(payload), len(payload)
_KEY_VERSION = 1  # bump when the key or entry format changes


def cache_key(src: str, identity: str, flags: tuple[str, ...]) -> str:
    """sha256 (hex) of source, compiler identity and flags: the name of the cache entry."""
    blob = json.dumps([_KEY_VERSION, src, identity, list(flags)], ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()


def entry_path(d: Path, key: str) -> Path:
    return d / f"{key}.bin"


def read_entry(path: Path) -> bytes | None:
    """The payload of a cache entry, or None if missing; a corrupt entry is deleted and None returned."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        warn_cache(f"uops compile cache: cannot read {path}: {e}; recompiling")
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
        warn_cache(f"uops compile cache: cannot delete the corrupt entry {path}: {e}")
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


def memo_get(key: str) -> bytes | None:
    with _memo_lock:
        lib = _memo.get(key)
        if lib is not None:
            _memo.move_to_end(key)
        return lib


def memo_put(key: str, lib: bytes) -> None:
    with _memo_lock:
        _memo[key] = lib
        _memo.move_to_end(key)
        while len(_memo) > _MEMO_MAX:
            _memo.popitem(last=False)
