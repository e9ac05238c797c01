"""The AMD runtime: HIP (``libamdhip64``) through ctypes, loaded on first use only.

Why ctypes: the HIP runtime is a C library the ROCm install (or Debian's ``libamdhip64-5``)
provides; no Python binding is needed. Code objects are loaded from bytes
(``hipModuleLoadData``); a launch packs the kernarg buffer exactly as the code object's metadata
lays it out (``amdhsa.kernels``: offset and size of each argument) and hands it over with
``HIP_LAUNCH_PARAM_BUFFER_POINTER``. Memory is ``hipMalloc``; copies are synchronous
``hipMemcpy`` (HIP stages pageable host memory itself); ``wait=True`` launches are timed with HIP events.

``UOPS_HIP_LIB`` names the library explicitly; otherwise the loader path and /opt/rocm are searched.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import struct
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from uops.plugin import (
    Allocator,
    DeviceError,
    ElfError,
    OutOfMemoryError,
    Program,
    ProgramLoadError,
    Runtime,
    check_device_image,
    launch_dims,
)
from uops_amd.compiler import EM_AMDGPU, KernelMeta, code_object_kernels
from uops_amd.renderer import GLOBAL_MAX, LOCAL_MAX

__all__ = [
    "HIPAllocator",
    "HIPError",
    "HIPProgram",
    "HIPRuntime",
    "device_arch",
    "find_hip_library",
    "pack_kernargs",
    "probe_runtime",
]

_INSTALL_HINT = "install the HIP runtime (ROCm, or Debian/Ubuntu: apt-get install libamdhip64-5) or set UOPS_HIP_LIB"
_CANDIDATES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so")
_MEMCPY_HOST_TO_DEVICE, _MEMCPY_DEVICE_TO_HOST = 1, 2
_PARAM_BUFFER_POINTER, _PARAM_BUFFER_SIZE, _PARAM_END = 1, 2, 3
_PLUGIN = __name__.partition(".")[0]


class HIPError(DeviceError):
    """A HIP runtime call failed (or the library is missing): which call, HIP's error name and description."""


class HIPOutOfMemoryError(HIPError, OutOfMemoryError):
    """HIP had no device memory left (hipErrorOutOfMemory)."""


def find_hip_library() -> str:
    """The HIP runtime library to dlopen: ``UOPS_HIP_LIB``, else the first of the usual names that loads."""
    env = os.environ.get("UOPS_HIP_LIB")
    if env:
        if not Path(env).is_file():
            raise HIPError(f"UOPS_HIP_LIB={env!r} is not a file; {_INSTALL_HINT}")
        return env
    found = ctypes.util.find_library("amdhip64")
    for cand in (found, *_CANDIDATES) if found else _CANDIDATES:
        try:
            ctypes.CDLL(cand)
        except OSError:
            continue
        return cand
    raise HIPError(f"libamdhip64 (the HIP runtime) was not found; {_INSTALL_HINT}")


@functools.cache
def _hip() -> ctypes.CDLL:
    """The HIP library, loaded once, with the signatures of the calls this module makes."""
    lib_path = find_hip_library()
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        raise HIPError(f"cannot load {lib_path}: {e}; {_INSTALL_HINT}") from e
    for fn in ("hipGetErrorName", "hipGetErrorString"):
        getattr(lib, fn).restype = ctypes.c_char_p
        getattr(lib, fn).argtypes = [ctypes.c_int]
    lib.hipModuleLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    lib.hipMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.hipMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.hipFree.argtypes = [ctypes.c_void_p]
    lib.hipModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.hipModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    lib.hipModuleUnload.argtypes = [ctypes.c_void_p]
    lib.hipEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.hipEventSynchronize.argtypes = [ctypes.c_void_p]
    lib.hipEventDestroy.argtypes = [ctypes.c_void_p]
    lib.hipEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    return lib


def _check(rc: int, call: str) -> None:
    if rc != 0:
        lib = _hip()
        name = (lib.hipGetErrorName(rc) or b"?").decode(errors="replace")
        desc = (lib.hipGetErrorString(rc) or b"").decode(errors="replace")
        error = HIPOutOfMemoryError if name == "hipErrorOutOfMemory" else HIPError
        raise error(f"{call} failed: {name}: {desc}", device="AMD", call=call, code=rc)


_init_lock = threading.Lock()
_initialised = False


def _init(ordinal: int = 0) -> None:
    """Count devices and select ``ordinal``; once per process (HIP selects per thread, see _current)."""
    global _initialised
    with _init_lock:
        if not _initialised:
            n = ctypes.c_int(0)
            _check(_hip().hipGetDeviceCount(ctypes.byref(n)), "hipGetDeviceCount")
            if n.value < 1:
                raise HIPError("hipGetDeviceCount found no AMD GPU")
            _initialised = True
    _check(_hip().hipSetDevice(ordinal), f"hipSetDevice({ordinal})")


_bound = threading.local()


def _current() -> None:
    if not getattr(_bound, "ok", False):
        _init()
        _bound.ok = True


def probe_runtime() -> str | None:
    """None when an AMD GPU is usable through HIP; else ``no AMD GPU/HIP runtime: <reason>``."""
    try:
        _init()
    except HIPError as e:
        return f"no AMD GPU/HIP runtime: {e}"
    return None


def device_arch() -> str:
    """The GPU's own gfx name (``gcnArchName`` without feature flags), e.g. ``gfx942``."""
    _current()
    props = ctypes.create_string_buffer(8192)  # hipDeviceProp_t's size differs between HIP versions: room for all
    _check(_hip().hipGetDeviceProperties(props, 0), "hipGetDeviceProperties")
    raw = props.raw
    at = raw.find(b"gfx")
    if at < 0:
        raise HIPError("hipGetDeviceProperties returned no gcnArchName")
    return raw[at : raw.index(b"\x00", at)].decode().split(":", 1)[0]


class HIPAllocator(Allocator):
    """Device memory from hipMalloc; handles are device addresses (int)."""

    def alloc(self, nbytes: int) -> int:
        _current()
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative size ({nbytes} bytes)")
        ptr = ctypes.c_void_p()
        _check(_hip().hipMalloc(ctypes.byref(ptr), max(nbytes, 1)), f"hipMalloc({nbytes})")
        return int(ptr.value or 0)

    def free(self, handle: Any, nbytes: int) -> None:
        _current()
        _check(_hip().hipFree(int(handle)), "hipFree")

    def copyin(self, handle: Any, src: memoryview) -> None:
        _current()
        data = np.frombuffer(src, dtype=np.uint8)
        if data.nbytes:
            rc = _hip().hipMemcpy(int(handle), int(data.ctypes.data), data.nbytes, _MEMCPY_HOST_TO_DEVICE)
            _check(rc, f"hipMemcpy(host->device, {data.nbytes} bytes)")

    def copyout(self, dest: memoryview, handle: Any) -> None:
        _current()
        out = np.frombuffer(dest, dtype=np.uint8)
        if not out.flags.writeable:
            raise ValueError("copyout needs a writable destination; got a read-only buffer")
        if out.nbytes:
            rc = _hip().hipMemcpy(int(out.ctypes.data), int(handle), out.nbytes, _MEMCPY_DEVICE_TO_HOST)
            _check(rc, f"hipMemcpy(device->host, {out.nbytes} bytes)")


def pack_kernargs(meta: KernelMeta, bufs: tuple[Any, ...], vals: tuple[int, ...]) -> bytes:
    """The kernarg segment for one launch, laid out as the code object's metadata says.

    Buffers fill the ``global_buffer`` slots in order, then ``vals`` (int32 variables) the
    ``by_value`` slots; hidden arguments (none with ``-nogpulib`` kernels) are left zero.
    """
    explicit = meta.explicit_args
    want_bufs = sum(a.kind == "global_buffer" for a in explicit)
    if len(bufs) != want_bufs or len(vals) != len(explicit) - want_bufs:
        raise ValueError(
            f"kernel {meta.name!r} takes {want_bufs} buffers and {len(explicit) - want_bufs} int variables, "
            f"got {len(bufs)} buffers and {len(vals)} variables"
        )
    seg = bytearray(max(meta.kernarg_size, 1))
    it_bufs, it_vals = iter(bufs), iter(vals)
    for a in explicit:
        if a.kind == "global_buffer":
            struct.pack_into("<Q", seg, a.offset, int(next(it_bufs)))
        elif a.kind == "by_value" and a.size == 4:
            struct.pack_into("<i", seg, a.offset, int(next(it_vals)))
        else:
            raise ValueError(f"kernel {meta.name!r}: cannot pass a kernarg of kind {a.kind} and size {a.size}")
    return bytes(seg)


class HIPProgram(Program):
    """One kernel of a loaded code object. ``global_size`` is the grid in workgroups, ``local_size`` the workgroup."""

    def __init__(self, name: str, lib: bytes) -> None:
        self.name = name
        try:
            check_device_image(lib, EM_AMDGPU, f"code object of {name!r}")  # HIP reads it with no length
        except ElfError as e:
            raise ProgramLoadError(_PLUGIN, name, e) from e
        try:
            kernels = code_object_kernels(lib)
        except (ValueError, KeyError, IndexError, TypeError, struct.error) as e:
            raise ProgramLoadError(_PLUGIN, name, f"not a readable AMDGPU code object: {e}") from e
        if name not in kernels:
            raise ProgramLoadError(_PLUGIN, name, f"the code object has no such kernel (it has {sorted(kernels)})")
        self.meta = kernels[name]
        try:
            _current()
            hip = _hip()
            self._image = ctypes.create_string_buffer(lib, len(lib))
            self._module = ctypes.c_void_p()
            _check(hip.hipModuleLoadData(ctypes.byref(self._module), self._image), f"hipModuleLoadData({name})")
            self._fn = ctypes.c_void_p()
            _check(hip.hipModuleGetFunction(ctypes.byref(self._fn), self._module, name.encode()),
                   f"hipModuleGetFunction({name!r})")  # fmt: skip
        except HIPError as e:
            raise ProgramLoadError(_PLUGIN, name, e) from e

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        bound, why = self.meta.max_flat_workgroup_size, "of the code object's max_flat_workgroup_size"
        g, b = launch_dims(self.name, global_size, local_size, "AMD", GLOBAL_MAX, LOCAL_MAX, bound, why)
        _current()
        hip = _hip()
        seg = ctypes.create_string_buffer(pack_kernargs(self.meta, bufs, vals))
        size = ctypes.c_size_t(len(seg.raw))
        extra = (ctypes.c_void_p * 5)(_PARAM_BUFFER_POINTER, ctypes.addressof(seg), _PARAM_BUFFER_SIZE,
                                      ctypes.addressof(size), _PARAM_END)  # fmt: skip
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        if wait:
            _check(hip.hipEventCreate(ctypes.byref(start)), "hipEventCreate")
            _check(hip.hipEventCreate(ctypes.byref(end)), "hipEventCreate")
            _check(hip.hipEventRecord(start, None), "hipEventRecord")
        _check(hip.hipModuleLaunchKernel(self._fn, *g, *b, 0, None, None, extra),
               f"hipModuleLaunchKernel({self.name}, grid={g}, block={b})")  # fmt: skip
        if not wait:
            return None
        try:
            ms = ctypes.c_float()
            _check(hip.hipEventRecord(end, None), "hipEventRecord")
            _check(hip.hipEventSynchronize(end), "hipEventSynchronize")
            _check(hip.hipEventElapsedTime(ctypes.byref(ms), start, end), "hipEventElapsedTime")
        finally:
            hip.hipEventDestroy(start)
            hip.hipEventDestroy(end)
        return float(ms.value) / 1e3

    def __del__(self) -> None:
        mod = getattr(self, "_module", None)
        if mod is not None and mod.value and not sys.is_finalizing():
            _hip().hipModuleUnload(mod)


class HIPRuntime(Runtime):
    """The AMD device through HIP: device selection, allocator, code object loader."""

    def __init__(self, device: str = "AMD") -> None:
        _init()
        self.device = device
        self.allocator = HIPAllocator()

    def load(self, name: str, lib: bytes) -> HIPProgram:
        return HIPProgram(name, lib)

    def synchronize(self) -> None:
        _current()
        _check(_hip().hipDeviceSynchronize(), "hipDeviceSynchronize")
