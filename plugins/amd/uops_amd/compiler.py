"""HIP-style C -> HSA code object (an AMDGPU ELF) with Debian's clang-19 and ld.lld-19; needs no GPU and no ROCm.

Why clang-19: the default clang (14 on Debian 12) rejects current targets such as gfx942 and
gfx1100. With ``-nogpulib -nogpuinc`` no ROCm headers or device libraries are needed: the
renderer emits clang builtins only. clang's HIP driver compiles the device code and links it
with lld into the code object the HIP runtime loads (``hipModuleLoadData``).

The toolchain is ``UOPS_AMD_CLANG`` when set, else ``clang-19`` on PATH, else
``/usr/lib/llvm-19/bin/clang``; lld is the one next to that clang.

``code_object_kernels`` reads the kernels' metadata (``amdhsa.kernels`` in the AMDGPU note: the
kernarg layout, the descriptor symbol) so the runtime packs arguments as the code object says.
"""

from __future__ import annotations

import functools
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uops.plugin import CompileError, Compiler, CompilerUnavailableError
from uops_amd import CLANG_INSTALL_HINT as _INSTALL_HINT
from uops_amd import DEFAULT_ARCH, TARGETS, locate_clang

__all__ = [
    "DEFAULT_ARCH",
    "TARGETS",
    "HIPCompiler",
    "KernelArg",
    "KernelMeta",
    "clang_available",
    "code_object_kernels",
    "elf_machine_flags",
    "find_clang",
]

EM_AMDGPU = 224
_TIMEOUT_S = 300


def find_clang() -> Path:
    """clang-19 (or ``UOPS_AMD_CLANG``) with its lld beside it, else CompilerUnavailableError saying what to install."""
    clang, missing = locate_clang()
    if clang is None:
        raise CompilerUnavailableError(missing or _INSTALL_HINT)
    return Path(clang)


@functools.cache
def _clang_version(clang: Path) -> str:
    try:
        r = subprocess.run([str(clang), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as e:
        raise CompilerUnavailableError(f"cannot run {clang}: {e}; {_INSTALL_HINT}") from e
    if r.returncode != 0 or not r.stdout.strip():
        raise CompilerUnavailableError(f"{clang} --version failed (exit {r.returncode}): {r.stderr.strip()}")
    return r.stdout.splitlines()[0].strip()


def clang_available() -> str | None:
    """None when clang-19 with lld is installed, else what is missing and how to install it."""
    try:
        _clang_version(find_clang())
    except CompilerUnavailableError as e:
        return str(e)
    return None


def _check_arch(arch: str) -> str:
    if not arch.startswith("gfx") or not arch[3:].isalnum() or len(arch) < 6:
        raise ValueError(f"unknown AMD GPU architecture {arch!r}: expected a gfx name such as {', '.join(TARGETS)}")
    return arch


class HIPCompiler(Compiler):
    """HIP-style source -> HSA code object bytes for one gfx target."""

    def __init__(self, arch: str = DEFAULT_ARCH) -> None:
        self.arch = _check_arch(arch)
        self.flags = ("-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc",
                      f"--offload-arch={arch}", "-O3", "-std=c++17", "-ffp-contract=off")  # fmt: skip
        self._identity: str | None = None

    def identity(self) -> str:
        if self._identity is None:
            self._identity = f"amd:{_clang_version(find_clang())}:{self.arch}"
        return self._identity

    def compile(self, src: str) -> bytes:
        clang = find_clang()
        what = f"{clang.name} {_clang_version(clang).split('version')[-1].strip().split()[0]} ({self.arch})"
        with tempfile.TemporaryDirectory(prefix="uops-amd-") as tmp:
            path, out = Path(tmp) / "kernel.hip", Path(tmp) / "kernel.hsaco"
            path.write_text(src)
            try:
                r = subprocess.run([str(clang), *self.flags, str(path), "-o", str(out)],
                                   capture_output=True, text=True, timeout=_TIMEOUT_S)  # fmt: skip
            except subprocess.TimeoutExpired as e:
                raise CompileError(f"clang did not finish within {_TIMEOUT_S} s", src, what) from e
            except OSError as e:
                raise CompilerUnavailableError(f"cannot run {clang}: {e}; {_INSTALL_HINT}") from e
            if r.returncode != 0 or not out.is_file():
                raise CompileError(r.stderr or r.stdout or f"exit status {r.returncode}", src, what)
            return out.read_bytes()


# ---------------------------------------------------------------------------------------
# reading the code object: ELF header, AMDGPU metadata note (msgpack)


def _sections(blob: bytes) -> list[tuple[int, ...]]:
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not an ELF64 little-endian file")
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    return [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]


def elf_machine_flags(blob: bytes) -> tuple[int, int]:
    """(e_machine, e_flags) of an ELF64 file: EM_AMDGPU (224) and the gfx/feature flags for a code object."""
    _sections(blob)
    (machine,) = struct.unpack_from("<H", blob, 0x12)
    (flags,) = struct.unpack_from("<I", blob, 0x30)
    return machine, flags


class _Unpacker:
    """The msgpack subset the AMDGPU metadata uses (maps, arrays, strings, ints, bools, floats, binary)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError("truncated msgpack in the AMDGPU metadata note")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def _int(self, fmt: str) -> Any:
        (v,) = struct.unpack(">" + fmt, self._take(struct.calcsize(fmt)))
        return v

    def value(self) -> Any:
        t = self._take(1)[0]
        if t <= 0x7F or t >= 0xE0:
            return t if t <= 0x7F else t - 0x100
        if 0x80 <= t <= 0x8F:
            return self._map(t & 0x0F)
        if 0x90 <= t <= 0x9F:
            return [self.value() for _ in range(t & 0x0F)]
        if 0xA0 <= t <= 0xBF:
            return self._take(t & 0x1F).decode()
        fixed: dict[int, Any] = {0xC0: None, 0xC2: False, 0xC3: True}
        if t in fixed:
            return fixed[t]
        ints = {0xCC: "B", 0xCD: "H", 0xCE: "I", 0xCF: "Q", 0xD0: "b", 0xD1: "h", 0xD2: "i", 0xD3: "q"}
        if t in ints:
            return self._int(ints[t])
        if t in (0xCA, 0xCB):
            return self._int("f" if t == 0xCA else "d")
        if t in (0xD9, 0xDA, 0xDB):
            return self._take(self._int("BHI"[t - 0xD9])).decode()
        if t in (0xC4, 0xC5, 0xC6):
            return self._take(self._int("BHI"[t - 0xC4]))
        if t in (0xDC, 0xDD):
            return [self.value() for _ in range(self._int("HI"[t - 0xDC]))]
        if t in (0xDE, 0xDF):
            return self._map(self._int("HI"[t - 0xDE]))
        raise ValueError(f"unsupported msgpack type 0x{t:02x} in the AMDGPU metadata note")

    def _map(self, n: int) -> dict[Any, Any]:
        return {self.value(): self.value() for _ in range(n)}


def _metadata(blob: bytes) -> dict[str, Any]:
    for sh in _sections(blob):
        if sh[1] != 7:  # SHT_NOTE
            continue
        off, end = sh[4], sh[4] + sh[5]
        while off + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", blob, off)
            name = blob[off + 12 : off + 12 + namesz].rstrip(b"\x00")
            desc = off + 12 + ((namesz + 3) & ~3)
            if name == b"AMDGPU" and ntype == 32:  # NT_AMDGPU_METADATA
                meta = _Unpacker(blob[desc : desc + descsz]).value()
                if not isinstance(meta, dict):
                    raise ValueError("the AMDGPU metadata note is not a map")
                return meta
            off = desc + ((descsz + 3) & ~3)
    raise ValueError("no AMDGPU metadata note (NT_AMDGPU_METADATA) in this code object")


@dataclass(frozen=True)
class KernelArg:
    """One kernarg slot: its byte offset and size and its kind (global_buffer, by_value, hidden_*)."""

    offset: int
    size: int
    kind: str


@dataclass(frozen=True)
class KernelMeta:
    """What the runtime needs from a kernel's metadata."""

    name: str
    symbol: str  # the kernel descriptor, <name>.kd
    args: tuple[KernelArg, ...]
    kernarg_size: int
    kernarg_align: int
    max_flat_workgroup_size: int
    wavefront_size: int

    @property
    def explicit_args(self) -> tuple[KernelArg, ...]:
        """The arguments the source declares (the hidden ones the runtime fills come after)."""
        return tuple(a for a in self.args if not a.kind.startswith("hidden_"))


def code_object_kernels(blob: bytes) -> dict[str, KernelMeta]:
    """Kernel name -> metadata, read from the code object's ``amdhsa.kernels`` note."""
    out = {}
    for k in _metadata(blob).get("amdhsa.kernels", []):
        args = tuple(KernelArg(int(a[".offset"]), int(a[".size"]), str(a[".value_kind"])) for a in k.get(".args", []))
        out[k[".name"]] = KernelMeta(
            name=k[".name"],
            symbol=k[".symbol"],
            args=args,
            kernarg_size=int(k[".kernarg_segment_size"]),
            kernarg_align=int(k[".kernarg_segment_align"]),
            max_flat_workgroup_size=int(k.get(".max_flat_workgroup_size", 1024)),
            wavefront_size=int(k.get(".wavefront_size", 64)),
        )
    return out
