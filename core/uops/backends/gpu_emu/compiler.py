"""``EmulatedCompiler``: GPU-style source -> a host shared library, one entry thunk per kernel.

The source is compiled for the CPU by a C++ compiler with the dialect's prelude (gpu_shim.h,
the dialect's macros and header) force-included, so line numbers in errors are the source's
own. Each kernel gets a thunk (``uops_shim_entry_<name>``) the launcher calls per GPU thread,
and two constants the runtime reads: whether the source needs fibers (it contains the
dialect's barrier) and the kernel's launch bound.
"""

from __future__ import annotations

import copy
import functools
import re
import subprocess
import tempfile
from pathlib import Path

from uops.backends.gpu_emu.dialect import Dialect
from uops.compiler import CompileError, Compiler, CompilerUnavailableError
from uops.plugins.probes import host_cxx
from uops.runtime.elf import read_shared_object

__all__ = ["EmulatedCompiler", "cxx_path", "cxx_version", "probe_compile", "run_cxx", "shim_header"]

_TIMEOUT_S = 300
# a local array's declaration in C-style rendered source (``__shared__ float smem0[256];``)
_COUNTED_LOCAL = re.compile(r"\b(smem\d+)\[(\d+)\];")
_INSTALL_HINT = "install clang (Debian/Ubuntu: apt-get install clang) or set UOPS_CXX to a C++17 compiler"


def shim_header() -> Path:
    """The path of ``gpu_shim.h`` shipped inside the ``uops`` package."""
    return Path(__file__).resolve().parent / "include" / "gpu_shim.h"


def cxx_path() -> str:
    """The C++ compiler: ``UOPS_CXX``, else clang++, else g++ (the rule of ``uops.plugins.probes.host_cxx``)."""
    found, why = host_cxx()
    if found is None:
        raise CompilerUnavailableError(why)
    return found


@functools.cache
def cxx_version(cxx: str) -> str:
    """The first line of ``cxx --version``: part of every cache key built with it."""
    try:
        r = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {cxx!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0 or not r.stdout.strip():
        raise CompilerUnavailableError(f"{cxx!r} --version failed (exit {r.returncode}): {r.stderr.strip()}")
    return r.stdout.splitlines()[0].strip()


def run_cxx(args: list[str], src: str, what: str) -> None:
    """Run a compiler command; CompileError with its message (and ``src``) when it fails."""
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise CompileError(f"{what} did not finish within {_TIMEOUT_S} s", src, what) from e
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {args[0]!r}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0:
        raise CompileError(r.stderr or r.stdout or f"exit status {r.returncode}", src, what)


class EmulatedCompiler(Compiler):
    """Source in ``dialect`` -> host shared library bytes for ``EmulatedRuntime``.

    The dialect's ``stub_headers`` (GPU toolkit headers the source may include, whose content
    the prelude already provides) resolve to empty files. ``cxx`` names the host compiler when the
    dialect's header needs a particular one (default: ``cxx_path()``).
    """

    def __init__(self, device: str, dialect: Dialect, opt: str = "-O2", cxx: str | None = None) -> None:
        self.device = device
        self.dialect = dialect
        self.cxx = cxx
        # -fwrapv: signed integers wrap, as the IR defines (uops.ir.alu); it is part of the identity
        self.flags = ("-std=c++17", opt, "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno", "-fwrapv")
        self._identity: str | None = None
        self.count_local_reads = False

    def identity(self) -> str:
        if self._identity is None:  # computed once: it is part of every cache key
            digest = self.dialect.digest(shim_header())
            cxx = cxx_version(self.cxx or cxx_path())
            counted = ":counted" if self.count_local_reads else ""
            self._identity = f"emulate:{self.device}:{cxx}:{self.dialect.name}-{digest}:wrapv{counted}"
        return self._identity

    def counting(self) -> EmulatedCompiler:
        """A copy whose kernels count each GPU thread's reads of their local arrays (the ``smemN`` the C-style
        renderers declare), reported by the launch in ``EmulatedProgram.last_stats``: how the kit sees the steps
        of a grouped reduction's combine on a dialect, without timing anything."""
        twin = copy.copy(self)
        twin.count_local_reads, twin._identity = True, None
        return twin

    def _write_includes(self, root: Path) -> tuple[Path, Path]:
        stubs = root / "stubs"
        stubs.mkdir()
        for h in self.dialect.stub_headers:
            p = stubs / h
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f"/* {h}: provided by the {self.dialect.name} prelude of the gpu shim */\n")
        prelude = root / "prelude.h"
        prelude.write_text(self.dialect.prelude(shim_header()))
        return prelude, stubs

    def check_binary(self, lib: bytes) -> None:
        """An emulated kernel is an ELF shared library for this machine."""
        read_shared_object(lib, "cached emulated library")

    def compile(self, src: str) -> bytes:
        decls = self.dialect.kernels(src)
        if not decls:
            raise CompileError(f"no {self.dialect.name} kernel found in the source; nothing to launch", src, "gpu shim")
        try:
            body = self.dialect.rewrite(src)
        except ValueError as e:
            raise CompileError(str(e), src, "gpu shim") from e
        if self.count_local_reads:  # on the declaration's line: the line numbers stay the source's
            body = _COUNTED_LOCAL.sub(r"\1_storage[\2]; auto \1 = uops_shim_counted(\1_storage);", body)
        barriers = int(self.dialect.needs_fibers(src))
        tail = "\n".join(
            f"UOPS_SHIM_ENTRY({k.name})\n"
            f'extern "C" const int uops_shim_barriers_{k.name} = {barriers};\n'
            f'extern "C" const unsigned uops_shim_bound_{k.name} = {k.bound}u;'
            for k in decls
        )
        cxx = self.cxx or cxx_path()
        with tempfile.TemporaryDirectory(prefix="uops-emu-") as tmp:
            root = Path(tmp)
            prelude, stubs = self._write_includes(root)
            cu = root / "kernel.cpp"
            cu.write_text(body + "\n" + tail + "\n")
            out = root / "kernel.so"
            args = [cxx, *self.flags, "-include", str(prelude), "-I", str(stubs),
                    "-x", "c++", str(cu), "-o", str(out), "-lm"]  # fmt: skip
            run_cxx(args, src, f"{Path(cxx).name} (gpu shim, {self.device})")
            return out.read_bytes()


def probe_compile() -> str | None:
    """None when a host C++ compiler is there, else what is missing and how to install it."""
    try:
        cxx_version(cxx_path())
    except CompilerUnavailableError as e:
        return str(e)
    return None
