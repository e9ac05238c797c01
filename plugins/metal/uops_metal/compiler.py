"""MSL -> what the Metal runtime loads: a metallib (macOS with Xcode's tools), else the checked source.

Why two outputs: Apple's offline compiler (``xcrun -sdk macosx metal`` + ``metallib``) exists only
on macOS with the command-line tools; without it the runtime compiles the source itself
(``newLibraryWithSource:options:error:``). The renderer's target says which one a spec holds
(``metal3.1:metallib`` or ``metal3.1:msl``).

The check: MSL is C++ underneath, so ``clang++`` (16 or newer, for ``_Float16``; clang-19 on
Debian) with ``-fsyntax-only`` and this plugin's stand-in for ``<metal_stdlib>``
(``include/metal_stdlib.h``) rejects most kernels Metal would reject, with clang's message and
the numbered source, on Linux and in CI. What it cannot see is listed at the top of that header.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from uops.plugin import CompileError, Compiler, CompilerUnavailableError
from uops_metal import CHECKER_CANDIDATES, DEFAULT_TARGET, MIN_CLANG
from uops_metal import INSTALL_HINT as _INSTALL_HINT
from uops_metal.renderer import parse_version

__all__ = ["INCLUDE_DIR", "MetalCompiler", "checker", "compile_mode", "metal_std", "xcrun_metal"]

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
_TIMEOUT_S = 120


def _run(args: list[str], timeout: int = _TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


@functools.cache
def _clang_version(path: str) -> tuple[int, str] | None:
    """(major, first line of --version) for a clang, or None when it is not one."""
    try:
        r = _run([path, "--version"], timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"clang version (\d+)", r.stdout)
    return (int(m.group(1)), r.stdout.splitlines()[0].strip()) if r.returncode == 0 and m else None


@functools.cache
def checker() -> tuple[str, str]:
    """The clang++ that checks MSL and its version line: ``UOPS_METAL_CLANG``, else the first clang >= 16."""
    env = os.environ.get("UOPS_METAL_CLANG")
    names = (env,) if env else CHECKER_CANDIDATES
    for name in names:
        path = shutil.which(name)
        found = _clang_version(path) if path else None
        if path and found and found[0] >= MIN_CLANG:
            return path, found[1]
        if env:
            what = "was not found" if path is None else f"is not clang {MIN_CLANG} or newer"
            raise CompilerUnavailableError(f"UOPS_METAL_CLANG={env!r} {what}; {_INSTALL_HINT}")
    raise CompilerUnavailableError(
        f"checking Metal kernels on this machine needs clang++ {MIN_CLANG} or newer (none found); {_INSTALL_HINT}"
    )


@functools.cache
def xcrun_metal() -> bool:
    """True on macOS when Apple's offline Metal compiler is installed (``xcrun -sdk macosx -f metal``)."""
    if sys.platform != "darwin" or shutil.which("xcrun") is None:
        return False
    try:
        return _run(["xcrun", "-sdk", "macosx", "-f", "metal"], timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compile_mode() -> str:
    """``metallib`` where Apple's tools are installed, else ``msl`` (the runtime compiles the source)."""
    return "metallib" if xcrun_metal() else "msl"


def metal_std(version: tuple[int, int]) -> str:
    """The ``-std=`` name of a Metal language version for Apple's compiler."""
    major, minor = version
    return f"metal{major}.{minor}" if major >= 3 else f"macos-metal{major}.{minor}"


class MetalCompiler(Compiler):
    """MSL for one Metal version -> metallib bytes (``mode='metallib'``) or the checked source (``'msl'``)."""

    def __init__(self, target: str = DEFAULT_TARGET, mode: str | None = None) -> None:
        self.version = parse_version(target)
        self.mode = mode if mode is not None else compile_mode()
        if self.mode not in ("metallib", "msl"):
            raise ValueError(f"unknown Metal compile mode {self.mode!r}: expected 'metallib' or 'msl'")
        major, minor = self.version
        self.flags = ("-x", "c++", "-std=c++17", "-fsyntax-only", "-Werror=unknown-attributes",
                      "-fno-color-diagnostics", f"-D__METAL_VERSION__={major}{minor}0")  # fmt: skip
        self._identity: str | None = None

    def __repr__(self) -> str:
        return f"MetalCompiler(version={metal_std(self.version)!r}, mode={self.mode!r})"

    def identity(self) -> str:
        if self._identity is None:  # computed once: it is part of every cache key
            tool = "xcrun-metal" if self.mode == "metallib" else self._checker_id()
            digest = hashlib.sha256((INCLUDE_DIR / "metal_stdlib.h").read_bytes()).hexdigest()[:12]
            self._identity = f"metal:{metal_std(self.version)}:{self.mode}:{tool}:header-{digest}"
        return self._identity

    @staticmethod
    def _checker_id() -> str:
        try:
            return checker()[1]
        except CompilerUnavailableError:
            return "unchecked"

    def check(self, src: str) -> None:
        """Raise CompileError (clang's message, the numbered source) when the MSL is rejected."""
        clang, version = checker()
        with tempfile.TemporaryDirectory(prefix="uops-metal-") as tmp:
            path = Path(tmp) / "kernel.metal"
            path.write_text(src)
            try:
                r = _run([clang, *self.flags, "-I", str(INCLUDE_DIR), str(path)])
            except subprocess.TimeoutExpired as e:
                raise CompileError(f"the MSL check did not finish within {_TIMEOUT_S} s", src, "clang") from e
            except OSError as e:
                raise CompilerUnavailableError(f"cannot run {clang!r}: {e}; {_INSTALL_HINT}") from e
        if r.returncode != 0:
            message = (r.stderr or r.stdout or f"exit status {r.returncode}").replace(str(path), "kernel.metal")
            raise CompileError(message, src, f"MSL check ({version}, {metal_std(self.version)})")

    def compile(self, src: str) -> bytes:
        if self.mode == "metallib":
            return self._metallib(src)
        if sys.platform == "darwin":
            try:
                checker()
            except CompilerUnavailableError:
                return src.encode()  # no checker on this Mac: Metal's own compiler reports at load time
        self.check(src)
        return src.encode()

    def _metallib(self, src: str) -> bytes:
        with tempfile.TemporaryDirectory(prefix="uops-metal-") as tmp:
            root = Path(tmp)
            (root / "kernel.metal").write_text(src)
            steps = [
                ["xcrun", "-sdk", "macosx", "metal", f"-std={metal_std(self.version)}", "-fno-fast-math",
                 "-c", str(root / "kernel.metal"), "-o", str(root / "kernel.air")],
                ["xcrun", "-sdk", "macosx", "metallib", str(root / "kernel.air"), "-o", str(root / "kernel.metallib")],
            ]  # fmt: skip
            for args in steps:
                try:
                    r = _run(args)
                except (OSError, subprocess.TimeoutExpired) as e:
                    raise CompilerUnavailableError(f"cannot run {' '.join(args[:4])}: {e}") from e
                if r.returncode != 0:
                    raise CompileError(r.stderr or r.stdout or f"exit status {r.returncode}", src, " ".join(args[:4]))
            return (root / "kernel.metallib").read_bytes()
