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
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from uops.plugin import (
    CompileError,
    Compiler,
    CompilerUnavailableError,
    cache_dir,
    entry_path,
    read_entry,
    read_shared_object,
    warn_cache,
    write_entry,
)
from uops_cpu_clang import INSTALL_HINT as _INSTALL_HINT
from uops_cpu_clang import clang_path

__all__ = ["ClangCompiler", "clang_available", "clang_path"]

_TIMEOUT_S = 300


def _resolve(clang: str) -> str:
    found = shutil.which(clang)
    if found is None:
        raise CompilerUnavailableError(f"the CPU backend needs clang, but {clang!r} was not found; {_INSTALL_HINT}")
    return found


def _probe(clang: str, arch: str) -> tuple[str, str, str]:
    """(first line of ``clang --version``, target triple, cpu) for an executable: runs it."""
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


# the /proc/cpuinfo fields that say which cpu and features -march=native means (not its clock or core number)
_CPU_FIELDS = frozenset(
    {"vendor_id", "cpu family", "model", "model name", "stepping", "flags", "Features", "isa"}
    | {"CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision"}
)


def _host_cpu() -> str | None:
    """This machine's cpu and features from /proc/cpuinfo (first processor), or None where there is none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            first = f.read(1 << 20).split("\n\n", 1)[0]
    except OSError:
        return None
    keep = sorted(ln.strip() for ln in first.splitlines() if ln.split(":", 1)[0].strip() in _CPU_FIELDS)
    return hashlib.sha256("\n".join(keep).encode()).hexdigest() if keep else None


def _parse_identity(payload: bytes) -> tuple[str, str, str]:
    """A toolchain entry's payload: a JSON list of three strings, else ValueError."""
    try:
        got = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON: {e}") from None
    if not (isinstance(got, list) and len(got) == 3 and all(isinstance(x, str) for x in got)):
        raise ValueError("not a list of three strings")
    return got[0], got[1], got[2]


def _file_stamp(clang: str) -> list[object] | None:
    """The executable's real path, size, mtime and inode (None when it cannot be read): changes with a new clang."""
    real = os.path.realpath(clang)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_size, st.st_mtime_ns, st.st_ino]


@functools.cache
def _probe_once(clang: str, arch: str, stamp: str) -> tuple[str, str, str]:
    """``_probe`` once per process for each state of the executable (``stamp``)."""
    return _probe(clang, arch)


def _identity(clang: str, arch: str) -> tuple[str, str, str]:
    """``_probe``'s answer, kept in the disk cache (``toolchains/``) under the executable's real path and file
    stamp (and for -march=native this machine's cpu), so a process with a warm cache starts no clang to name it.

    A new or rebuilt clang has another stamp and is probed again; without the disk cache, or without a way
    to name this machine's cpu, the probe runs as before.
    """
    file = _file_stamp(clang)
    if file is None:
        return _probe(clang, arch)
    d = cache_dir()
    cpu = _host_cpu() if arch == "native" else ""
    if d is None or cpu is None:
        return _probe_once(clang, arch, json.dumps(file))
    stamp = json.dumps([*file, arch, cpu, os.uname().machine])
    path = entry_path(d / "toolchains", hashlib.sha256(stamp.encode()).hexdigest())
    payload = read_entry(path, check=_parse_identity)
    if payload is not None:
        return _parse_identity(payload)
    ident = _probe_once(clang, arch, json.dumps(file))
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        write_entry(path, json.dumps(list(ident)).encode())
    except OSError as e:
        warn_cache(f"uops compile cache: cannot write {path}: {e}; clang will be probed again next time")
    return ident


def clang_available() -> str | None:
    """None when clang runs (``clang --version``); otherwise why not, with the command that fixes it.

    The backend's probe only looks clang up on PATH (cheap, for choosing a device); this runs it.
    """
    try:
        clang = _resolve(clang_path())
        _probe_once(clang, "generic", json.dumps(_file_stamp(clang)))
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
        version, triple, cpu = _identity(self.clang, self.arch)
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
