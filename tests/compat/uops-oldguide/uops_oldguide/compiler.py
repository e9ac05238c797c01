"""C source -> shared library with the system clang.

Kernels are built freestanding and without libc (``-ffreestanding -nostdlib``): the rendered
code uses ``__builtin_sqrtf`` and friends, which become instructions. A few builtins
(``exp2f``, ``log2f``, ``sinf`` ...) have no instruction and lower to libm calls, so the
library links ``-lm`` and nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from uops.compiler import CompileError, Compiler, CompilerUnavailableError

__all__ = ["ClangCompiler", "clang_available", "clang_path"]

_INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install clang) or set UOPS_CLANG to the clang executable"
_TIMEOUT_S = 300


def clang_path() -> str:
    """The clang command: ``UOPS_CLANG`` if set, else ``clang`` on PATH."""
    return os.environ.get("UOPS_CLANG") or "clang"


def _resolve(clang: str) -> str:
    found = shutil.which(clang)
    if found is None:
        raise CompilerUnavailableError(f"the CPU backend needs clang, but {clang!r} was not found; {_INSTALL_HINT}")
    return found


@functools.cache
def _probe(clang: str, arch: str) -> tuple[str, str, str]:
    """(first line of ``clang --version``, target triple, cpu) for an executable; cached per process."""
    try:
        r = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {clang!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0 or not r.stdout.strip():
        raise CompilerUnavailableError(
            f"{clang!r} --version failed (exit {r.returncode}): {r.stderr.strip()}; {_INSTALL_HINT}"
        )
    lines = r.stdout.splitlines()
    m = re.search(r"^Target:\s*(\S+)", r.stdout, re.M)
    triple = m.group(1) if m else "unknown-triple"
    cpu = arch
    if arch == "native":
        # -march=native means "this machine": name the cpu and its features so that a cache
        # shared between machines never hands one machine's binary to another
        d = subprocess.run(
            [clang, "-march=native", "-###", "-x", "c", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=60,
        )
        name = re.search(r'"-target-cpu" "([^"]+)"', d.stderr)
        feats = " ".join(sorted(re.findall(r'"-target-feature" "([^"]+)"', d.stderr)))
        cpu = f"native:{name.group(1) if name else 'unknown'}:{hashlib.sha256(feats.encode()).hexdigest()[:16]}"
    return lines[0].strip(), triple, cpu


def clang_available() -> str | None:
    """None when clang works; otherwise why not, with the command that fixes it."""
    try:
        _probe(_resolve(clang_path()), "generic")
    except CompilerUnavailableError as e:
        return str(e)
    return None


class ClangCompiler(Compiler):
    """Compiles one C translation unit to a freestanding shared library; returns its bytes.

    ``arch`` is clang's ``-march`` (``native`` by default: the fastest code, but the binary
    is only good for this kind of machine; pass e.g. ``x86-64-v2`` to ship it elsewhere).
    """

    def __init__(self, arch: str = "native", opt: str = "-O2", extra_flags: tuple[str, ...] = ()) -> None:
        self.arch = arch
        self.flags = (
            "-shared",
            "-fPIC",
            opt,
            f"-march={arch}",
            "-ffreestanding",
            "-fno-math-errno",
            "-fno-stack-protector",  # the guard needs libc's __stack_chk_fail
            "-Werror=implicit-function-declaration",  # an unknown call fails now, not at load
            "-nostdlib",
            *extra_flags,
            "-lm",  # exp2f, log2f, sinf ... when no instruction exists
        )

    @property
    def clang(self) -> str:
        return _resolve(clang_path())

    def identity(self) -> str:
        """``clang --version`` line, target triple and cpu: part of the cache key."""
        version, triple, cpu = _probe(self.clang, self.arch)
        return f"{version} | target={triple} | cpu={cpu}"

    def compile(self, src: str) -> bytes:
        """Compile ``src`` in a temp dir; raise ``CompileError`` with clang's stderr on failure."""
        clang = self.clang
        with tempfile.TemporaryDirectory(prefix="uops-clang-") as td:
            Path(td, "kernel.c").write_text(src)
            cmd = [clang, "-x", "c", "kernel.c", *self.flags, "-o", "kernel.so"]
            try:
                r = subprocess.run(cmd, cwd=td, capture_output=True, text=True, timeout=_TIMEOUT_S)
            except subprocess.TimeoutExpired as e:
                raise CompileError(f"clang did not finish within {_TIMEOUT_S} s", src, compiler="clang") from e
            except OSError as e:
                raise CompilerUnavailableError(f"cannot run {clang!r}: {e}; {_INSTALL_HINT}") from e
            if r.returncode != 0:
                msg = r.stderr.strip() or r.stdout.strip() or f"clang exited with status {r.returncode}"
                raise CompileError(msg, src, compiler=f"clang ({' '.join(cmd[1:])})")
            return Path(td, "kernel.so").read_bytes()
