"""C source -> shared library with the system clang.

Kernels are built freestanding and without libc (``-ffreestanding -nostdlib``): the rendered
code uses ``__builtin_sqrtf`` and friends, which become instructions. A few builtins
(``exp2f``, ``log2f``, ``sinf`` ...) have no instruction and lower to libm calls, so the
library links ``-lm`` and nothing else. Compiling and linking are two steps: clang makes an
object, then ``ld`` links it directly (the driver only where there is no ``ld``), which saves a
second start of clang per kernel.
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

from uops.compiler import CompileError, Compiler, CompilerUnavailableError
from uops.runtime.elf import read_shared_object
from uops_cpu_clang import INSTALL_HINT as _INSTALL_HINT
from uops_cpu_clang import clang_path

__all__ = ["ClangCompiler", "clang_available", "clang_path"]

_TIMEOUT_S = 300


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
    """None when clang runs (``clang --version``); otherwise why not, with the command that fixes it.

    The backend's probe only looks clang up on PATH (cheap, for choosing a device); this runs it.
    """
    try:
        _probe(_resolve(clang_path()), "generic")
    except CompilerUnavailableError as e:
        return str(e)
    return None


# the object -> shared library step, as the clang driver spells it: no libc, no start files, libm for
# exp2f, log2f, sinf ... when no instruction exists
_LINK_FLAGS = ("-shared", "-nostdlib", "-lm")


def _linker() -> str | None:
    """The system linker to call directly on Linux, or None: then the clang driver links.

    Why: linking through the driver starts clang a second time (~40 ms of loading LLVM) only to run
    ``ld``; calling ``ld`` itself costs a few milliseconds.
    """
    if not sys.platform.startswith("linux"):
        return None
    return shutil.which("ld")


# flags that change what a kernel computes (not only how fast): signed integers wrap, as the IR defines
# (uops.ir.alu); without it clang may fold `x + INT_MIN` as if it could not overflow
SEMANTIC_FLAGS = ("-fwrapv",)


class ClangCompiler(Compiler):
    """Compiles one C translation unit to a freestanding shared library; returns its bytes.

    ``arch`` is clang's ``-march`` (``native`` by default: the fastest code, but the binary
    is only good for this kind of machine; pass e.g. ``x86-64-v2`` to ship it elsewhere).
    """

    def __init__(self, arch: str = "native", opt: str = "-O2", extra_flags: tuple[str, ...] = ()) -> None:
        self.arch = arch
        #: C source -> object file; ``extra_flags`` go here
        self.compile_flags = (
            "-fPIC",
            opt,
            f"-march={arch}",
            "-ffreestanding",
            "-fno-math-errno",
            "-ffp-contract=fast",  # a*b+c across statements becomes one FMA (register-tiled reductions)
            *SEMANTIC_FLAGS,
            "-fno-stack-protector",  # the guard needs libc's __stack_chk_fail
            "-Werror=implicit-function-declaration",  # an unknown call fails now, not at load
            *extra_flags,
        )
        self.flags = (*self.compile_flags, *_LINK_FLAGS)

    @property
    def clang(self) -> str:
        return _resolve(clang_path())

    def identity(self) -> str:
        """``clang --version`` line, target triple and cpu: part of the cache key."""
        version, triple, cpu = _probe(self.clang, self.arch)
        return f"{version} | target={triple} | {' '.join(SEMANTIC_FLAGS)} | cpu={cpu}"

    def process_identity(self) -> str:
        """The executable's real path and file stamp plus the arch: tells toolchains apart without running clang."""
        clang = self.clang
        try:
            st = os.stat(clang)
        except OSError as e:
            raise CompilerUnavailableError(f"cannot stat {clang!r}: {e}; {_INSTALL_HINT}") from e
        return f"clang {os.path.realpath(clang)} {st.st_size} {st.st_mtime_ns} {st.st_ino} | cpu={self.arch}"

    def check_binary(self, lib: bytes) -> None:
        """A CPU kernel is an ELF shared library for this machine."""
        read_shared_object(lib, "cached kernel library")

    def compile(self, src: str) -> bytes:
        """Compile ``src`` to an object and link it in a temp dir; raise ``CompileError`` with clang's stderr.

        The link calls ``ld`` directly where there is one (Linux) and falls back to the clang driver
        when that fails, so an unusual linker setup costs time, never a kernel.
        """
        clang = self.clang
        with tempfile.TemporaryDirectory(prefix="uops-clang-") as td:
            Path(td, "kernel.c").write_text(src)
            _run([clang, "-x", "c", "kernel.c", "-c", *self.compile_flags, "-o", "kernel.o"], td, src)
            ld = _linker()
            direct = [ld, "--eh-frame-hdr", "-shared", "kernel.o", "-lm", "-o", "kernel.so"] if ld else None
            if direct is None or _run(direct, td, src, check=False) is not None:
                _run([clang, "kernel.o", *_LINK_FLAGS, "-o", "kernel.so"], td, src)
            return Path(td, "kernel.so").read_bytes()


def _run(cmd: list[str], cwd: str, src: str, check: bool = True) -> str | None:
    """Run one toolchain step in ``cwd``. A failure raises ``CompileError`` naming the command and quoting its
    output, or with ``check=False`` returns that output (None: it worked)."""
    tool = Path(cmd[0]).name
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise CompileError(f"{tool} did not finish within {_TIMEOUT_S} s", src, compiler=tool) from e
    except OSError as e:
        if not check:
            return f"cannot run {cmd[0]!r}: {e}"
        raise CompilerUnavailableError(f"cannot run {cmd[0]!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode == 0:
        return None
    msg = r.stderr.strip() or r.stdout.strip() or f"{tool} exited with status {r.returncode}"
    if not check:
        return msg
    raise CompileError(msg, src, compiler=f"{tool} ({' '.join(cmd[1:])})")
