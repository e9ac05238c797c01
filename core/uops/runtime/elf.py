"""Read an ELF shared object's header and dynamic symbols from its bytes, before anything is dlopened.

Why: ``dlopen`` runs a library's constructors, and ``dlsym`` on its handle also searches the
library's dependencies (a kernel named ``system`` would resolve libc's ``system()``). Runtimes
that load compiled bytes check them here first: the bytes must be an ELF shared object for this
machine (class, byte order and architecture of the running interpreter, not an executable), and
a symbol is resolved only if the library itself defines it.
"""

from __future__ import annotations

import _ctypes
import ctypes
import functools
import os
import re
import struct
import sys
import tempfile
import weakref
from dataclasses import dataclass
from typing import Any

from uops.errors import UopsError

__all__ = [
    "ElfError",
    "SharedLibrary",
    "SharedObject",
    "SymbolNotDefinedError",
    "check_device_image",
    "host_machine",
    "read_shared_object",
]

_MAGIC = b"\x7fELF"
_ET_DYN = 3
_PT_INTERP = 3
_SHT_DYNSYM = 11
_SHT_NOBITS = 8
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_STT_OBJECT, _STT_FUNC = 1, 2
_STB_GLOBAL, _STB_WEAK = 1, 2
_KINDS = {_STT_OBJECT: "object", _STT_FUNC: "function"}

_MACHINES = {3: "x86", 8: "mips", 20: "ppc", 21: "ppc64", 22: "s390", 40: "arm", 62: "x86_64", 183: "aarch64",
             190: "cuda", 243: "riscv", 258: "loongarch"}  # fmt: skip


class ElfError(UopsError, ValueError):
    """The bytes are not an ELF shared library this process can load."""


class SymbolNotDefinedError(UopsError, AttributeError):
    """The library does not itself define the symbol asked for (its dependencies do not count)."""


@dataclass(frozen=True)
class _Layout:
    """struct formats of one ELF class (32 or 64 bit); the byte order is prefixed when used."""

    header: str  # e_type .. e_shstrndx, from offset 16
    phdr: str
    shdr: str
    sym: str
    sym_fields: tuple[int, int, int]  # positions of st_name, st_info, st_shndx in ``sym``
    seg_fields: tuple[int, int]  # positions of p_offset, p_filesz in ``phdr``


_LAYOUTS = {
    1: _Layout(header="HHIIIIIHHHHHH", phdr="IIIIIIII", shdr="IIIIIIIIII", sym="IIIBBH", sym_fields=(0, 3, 5),
               seg_fields=(1, 4)),
    2: _Layout(header="HHIQQQIHHHHHH", phdr="IIQQQQQQ", shdr="IIQQQQIIQQ", sym="IBBHQQ", sym_fields=(0, 1, 3),
               seg_fields=(2, 5)),
}  # fmt: skip


@dataclass(frozen=True)
class SharedObject:
    """What the checks need from a shared object: its architecture and the symbols it defines."""

    machine: int
    defined: dict[str, str]  # name -> "function" | "object" (other kinds are not resolvable through here)

    def require(self, name: str, kind: str = "function", what: str = "library") -> None:
        """Raise SymbolNotDefinedError unless this library itself defines ``name`` as ``kind``."""
        have = self.defined.get(name)
        if have == kind:
            return
        if have is None:
            raise SymbolNotDefinedError(
                f"the {what} has no {kind} {name!r} of its own (symbols of its dependencies are never "
                "resolved through it); check the kernel name against the compiled source"
            )
        raise SymbolNotDefinedError(f"the {what} defines {name!r} as an {have}, not a {kind}")


def _machine_name(m: int) -> str:
    return f"{_MACHINES.get(m, 'unknown')} (e_machine {m})"


@functools.cache
def host_machine() -> tuple[int, int, str, int]:
    """(ELF class, byte-order code, struct byte order, e_machine) of the running interpreter."""
    ei_class = 2 if sys.maxsize > 2**32 else 1
    ei_data, order = (1, "<") if sys.byteorder == "little" else (2, ">")
    try:
        with open("/proc/self/exe", "rb") as f:
            head = f.read(20)
    except OSError:
        head = b""
    if len(head) < 20 or not head.startswith(_MAGIC):
        raise ElfError("this platform does not run ELF executables, so no ELF shared object can be checked for it")
    (machine,) = struct.unpack_from(order + "H", head, 18)
    return ei_class, ei_data, order, machine


def read_shared_object(data: bytes, what: str = "library") -> SharedObject:
    """Check ``data`` is an ELF shared object for this machine and list the symbols it defines.

    Raises ElfError naming the first problem: not ELF, another class/byte order/architecture, an
    executable, or a header or symbol table that points outside the bytes.
    """
    if not data.startswith(_MAGIC):
        raise ElfError(
            f"the {what} is not an ELF shared library (starts with {bytes(data[:8])!r}); "
            "was the program compiled for another device?"
        )
    if len(data) < 64:
        raise ElfError(f"the {what} is too short ({len(data)} bytes) to be an ELF shared library")
    ei_class, ei_data, order, machine = host_machine()
    if data[4] != ei_class:
        raise ElfError(f"the {what} is a {32 if data[4] == 1 else 64}-bit ELF; this process is {32 * ei_class}-bit")
    if data[5] != ei_data:
        raise ElfError(f"the {what} has the wrong byte order for this machine")
    lay = _LAYOUTS[ei_class]
    try:
        return _parse(data, order, lay, machine, what)
    except struct.error as e:
        raise ElfError(f"the {what} is a malformed ELF file: {e}") from None


def _parse(data: bytes, order: str, lay: _Layout, machine: int, what: str) -> SharedObject:
    (e_type, e_machine, _v, _entry, phoff, shoff, _flags, _eh, phentsize, phnum, shentsize, shnum, _shstr) = (
        struct.unpack_from(order + lay.header, data, 16)
    )
    if e_machine != machine:
        raise ElfError(
            f"the {what} is built for {_machine_name(e_machine)}, this machine is {_machine_name(machine)}; "
            "was it compiled for another device?"
        )
    if e_type != _ET_DYN:
        raise ElfError(f"the {what} is an ELF file of type {e_type}, not a shared object (type {_ET_DYN})")
    phdr = struct.Struct(order + lay.phdr)
    if phnum and phentsize != phdr.size:
        raise ElfError(f"the {what} has program headers of {phentsize} bytes, expected {phdr.size}")
    for i in range(phnum):
        if phdr.unpack_from(data, phoff + i * phdr.size)[0] == _PT_INTERP:
            raise ElfError(f"the {what} is an executable (it names a program interpreter), not a shared library")
    shdr = struct.Struct(order + lay.shdr)
    if shnum and shentsize != shdr.size:
        raise ElfError(f"the {what} has section headers of {shentsize} bytes, expected {shdr.size}")
    sections = [shdr.unpack_from(data, shoff + i * shdr.size) for i in range(shnum)]
    sym = struct.Struct(order + lay.sym)
    defined: dict[str, str] = {}
    for s in sections:
        if s[1] != _SHT_DYNSYM:
            continue
        off, size, link = s[4], s[5], s[6]
        if off + size > len(data) or link >= len(sections):
            raise ElfError(f"the {what}'s dynamic symbol table lies outside the file")
        str_off, str_size = sections[link][4], sections[link][5]
        if str_off + str_size > len(data):
            raise ElfError(f"the {what}'s dynamic string table lies outside the file")
        strtab = data[str_off : str_off + str_size]
        for k in range(size // sym.size):
            fields = sym.unpack_from(data, off + k * sym.size)
            st_name, info, shndx = (fields[i] for i in lay.sym_fields)
            if shndx == _SHN_UNDEF or shndx >= _SHN_LORESERVE:  # undefined, absolute or otherwise special
                continue
            kind = _KINDS.get(info & 0xF)
            if kind is None or info >> 4 not in (_STB_GLOBAL, _STB_WEAK):
                continue
            end = strtab.find(b"\x00", st_name)
            if st_name >= len(strtab) or end < 0:
                raise ElfError(f"the {what} has a symbol name outside its string table")
            defined[strtab[st_name:end].decode("utf-8", "replace")] = kind
    return SharedObject(machine=machine, defined=defined)


def check_device_image(data: bytes, machine: int, what: str = "image") -> None:
    """Check an ELF device image (a CUBIN, an AMDGPU code object) lies wholly inside ``data``.

    Why: ``cuModuleLoadData`` and ``hipModuleLoadData`` take a pointer and no length, so a cut
    or corrupt image would be read past its end. The image must be for ``machine`` (its
    ``e_machine``), and its header tables, segments and sections must be inside the bytes;
    ElfError names the first that is not.
    """
    if not data.startswith(_MAGIC):
        raise ElfError(f"the {what} is not an ELF file (starts with {bytes(data[:8])!r})")
    if len(data) < 64 or data[4] not in _LAYOUTS or data[5] not in (1, 2):
        raise ElfError(f"the {what} is too short or has an unknown ELF class or byte order")
    lay, order = _LAYOUTS[data[4]], "<" if data[5] == 1 else ">"
    (_t, e_machine, _v, _e, phoff, shoff, _f, _eh, phentsize, phnum, shentsize, shnum, _s) = struct.unpack_from(
        order + lay.header, data, 16
    )
    if e_machine != machine:
        raise ElfError(f"the {what} is built for {_machine_name(e_machine)}, not {_machine_name(machine)}")
    for kind, off, entsize, num, fmt in (("program", phoff, phentsize, phnum, lay.phdr),
                                         ("section", shoff, shentsize, shnum, lay.shdr)):  # fmt: skip
        table = struct.Struct(order + fmt)
        if num and (entsize != table.size or off + num * table.size > len(data)):
            raise ElfError(f"the {what}'s {kind} header table lies outside its {len(data)} bytes (cut short?)")
        for i in range(num):
            row = table.unpack_from(data, off + i * table.size)
            if kind == "program":
                start, size = (row[k] for k in lay.seg_fields)
            elif row[1] == _SHT_NOBITS:  # occupies no bytes of the file
                continue
            else:
                start, size = row[4], row[5]
            if start + size > len(data):
                raise ElfError(
                    f"{kind} {i} of the {what} ends at byte {start + size}, past its {len(data)} bytes (cut short?)"
                )


# ---------------------------------------------------------------------------------------
# loading


def _dlclose(handle: int) -> None:
    _ctypes.dlclose(handle)


class SharedLibrary:
    """Checked bytes, dlopened: only symbols the library defines resolve; dlclose when nothing uses it.

    The bytes are checked with ``read_shared_object`` before ``dlopen`` (which runs the
    library's constructors). The library is unloaded when its ctypes handle is garbage; every
    function resolved here keeps that handle alive, so no live pointer outlives the mapping.
    """

    def __init__(self, data: bytes, what: str = "library", prefix: str = "uops-") -> None:
        self.what = what
        self.info = read_shared_object(data, what)
        tag = re.sub(r"[^A-Za-z0-9_-]", "_", prefix)[:48]
        fd, path = tempfile.mkstemp(prefix=tag, suffix=".so")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            try:
                self._dll = ctypes.CDLL(path)
            except OSError as e:
                raise OSError(
                    f"cannot load the {what}: {e}. If the temp dir is mounted noexec, "
                    "point TMPDIR at one that allows executables"
                ) from e
        finally:
            os.unlink(path)  # the mapping stays valid after the file is gone
        fin = weakref.finalize(self._dll, _dlclose, self._dll._handle)
        fin.atexit = False  # at exit the process unmaps everything anyway

    def function(self, name: str) -> Any:
        """The ctypes function ``name`` (it keeps the library loaded while referenced)."""
        self.info.require(name, "function", self.what)
        return self._dll[name]

    def object(self, name: str, ctype: Any) -> Any:
        """The data symbol ``name`` read as ``ctype`` (``ctype.in_dll``)."""
        self.info.require(name, "object", self.what)
        return ctype.in_dll(self._dll, name)
