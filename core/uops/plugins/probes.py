"""Helpers for cheap backend probes: answers from the file system, without importing shutil or vendor bindings.

Why: probes run to choose `Device.DEFAULT`, on every start of a program that does not name its
device. ``shutil`` alone pulls in bz2, lzma and zlib (~5 ms); a vendor's Python bindings and
numpy cost ~130 ms. See docs/plugin-guide.md for how a probe is written.
"""

from __future__ import annotations

import os

__all__ = ["any_path_exists", "emulation_probe", "host_cxx", "which"]


def which(command: str) -> str | None:
    """The executable ``command`` names (a path, or a name looked up on PATH), or None; like ``shutil.which``."""
    if os.path.dirname(command):
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(d or ".", command)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def host_cxx() -> tuple[str | None, str]:
    """The host C++ compiler of the GPU emulation, or None and why: ``UOPS_CXX``, else clang++, else g++ on PATH."""
    env = os.environ.get("UOPS_CXX")
    if env:
        found = which(env)
        return found, "" if found else f"UOPS_CXX={env!r} was not found; point it at a C++17 compiler"
    found = which("clang++") or which("g++")
    if found:
        return found, ""
    return None, "the GPU emulation needs a C++ compiler and found neither clang++ nor g++; apt-get install clang"


def emulation_probe() -> str | None:
    """The probe of an ``_EMU`` device: the host C++ compiler is looked up, not run; the emulation's
    launcher is built by the same compiler on first use."""
    found, why = host_cxx()
    return None if found else why


def any_path_exists(*paths: str) -> bool:
    """Whether any of ``paths`` exists (a device node such as /dev/nvidiactl, a driver directory)."""
    return any(os.path.exists(p) for p in paths)
