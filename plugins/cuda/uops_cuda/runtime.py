"""The CUDA runtime: the driver API through ``cuda.bindings.driver`` (imported on first use only).

Why the driver API: it loads the CUBIN/PTX bytes the compiler produced (``cuModuleLoadData``)
with no CUDA toolkit on the machine, only the NVIDIA driver. The primary context is used, so
uops shares the GPU with torch/cupy in one process. Everything is issued on the legacy default
stream; copies go through a pinned host staging buffer (page-locked memory is what the DMA
engines read at full speed) in chunks, and ``wait=True`` launches are timed with CUDA events.
"""

from __future__ import annotations

import ctypes
import sys
import threading
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
from uops_cuda.renderer import CUDARenderer

__all__ = ["CUDAAllocator", "CUDAError", "CUDAProgram", "CUDARuntime", "device_arch"]

_STAGING_BYTES = 16 << 20  # per chunk of a host<->device copy
_PLUGIN = __name__.partition(".")[0]
#: the grid and block limits a launch is checked against, the renderer's own
_LIMITS = CUDARenderer.global_max or (), CUDARenderer.local_max or ()
_EM_CUDA = 190


class CUDAError(DeviceError):
    """A CUDA driver call failed: which call, the driver's error name (``code``) and its description."""


class CUDAOutOfMemoryError(CUDAError, OutOfMemoryError):
    """The CUDA driver had no device memory left (CUDA_ERROR_OUT_OF_MEMORY)."""


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _check(ret: Any, call: str) -> Any:
    """Unpack a cuda-bindings result tuple ``(CUresult, *values)``; raise CUDAError on failure."""
    drv = _driver()
    err, *rest = ret if isinstance(ret, tuple) else (ret,)
    if err != drv.CUresult.CUDA_SUCCESS:
        _, name = drv.cuGetErrorName(err)
        _, desc = drv.cuGetErrorString(err)
        n = name.decode() if isinstance(name, bytes) else str(err)
        d = desc.decode() if isinstance(desc, bytes) else ""
        error = CUDAOutOfMemoryError if n == "CUDA_ERROR_OUT_OF_MEMORY" else CUDAError
        raise error(f"{call} failed: {n}: {d}", device="CUDA", call=call, code=n)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


_init_lock = threading.Lock()
_init_state: tuple[Any, Any] | None = None  # (CUdevice, primary CUcontext)


def _init(ordinal: int = 0) -> tuple[Any, Any]:
    """cuInit, device ``ordinal``, its primary context; once per process."""
    global _init_state
    with _init_lock:
        if _init_state is None:
            drv = _driver()
            _check(drv.cuInit(0), "cuInit")
            count = _check(drv.cuDeviceGetCount(), "cuDeviceGetCount")
            if count < 1:
                raise CUDAError("cuDeviceGetCount found no CUDA device")
            dev = _check(drv.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
            ctx = _check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
            _init_state = (dev, ctx)
        _check(_driver().cuCtxSetCurrent(_init_state[1]), "cuCtxSetCurrent")
        return _init_state


_bound = threading.local()


def _current() -> None:
    """Make the primary context current on the calling thread (contexts are per thread), once per thread."""
    if not getattr(_bound, "ok", False):
        _init()
        _bound.ok = True


def device_arch() -> str:
    """The GPU's own architecture, e.g. ``sm_90`` (needs the driver)."""
    drv = _driver()
    dev, _ = _init()
    attr = drv.CUdevice_attribute
    major = _check(
        drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute"
    )
    minor = _check(
        drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute"
    )
    return f"sm_{major}{minor}"


def device_name() -> str:
    drv = _driver()
    dev, _ = _init()
    raw = _check(drv.cuDeviceGetName(256, dev), "cuDeviceGetName")
    return raw.split(b"\x00", 1)[0].decode(errors="replace")


class CUDAAllocator(Allocator):
    """Device memory from cuMemAlloc; handles are device addresses (int). Copies stage through pinned memory."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._staging = 0  # pinned host pointer
        self._staging_size = 0

    def alloc(self, nbytes: int) -> int:
        _current()
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative size ({nbytes} bytes)")
        ptr = _check(_driver().cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes})")
        return int(ptr)

    def free(self, handle: Any, nbytes: int) -> None:
        _current()
        _check(_driver().cuMemFree(int(handle)), "cuMemFree")

    def _stage(self, nbytes: int) -> int:
        if self._staging_size < nbytes:
            drv = _driver()
            if self._staging:
                _check(drv.cuMemFreeHost(self._staging), "cuMemFreeHost")
                self._staging, self._staging_size = 0, 0
            self._staging = int(_check(drv.cuMemHostAlloc(nbytes, 0), f"cuMemHostAlloc({nbytes})"))
            self._staging_size = nbytes
        return self._staging

    def copyin(self, handle: Any, src: memoryview) -> None:
        _current()
        drv = _driver()
        data = np.frombuffer(src, dtype=np.uint8)
        n, base = data.nbytes, int(data.ctypes.data)
        with self._lock:
            stage = self._stage(min(n, _STAGING_BYTES)) if n else 0
            for off in range(0, n, _STAGING_BYTES):
                k = min(_STAGING_BYTES, n - off)
                ctypes.memmove(stage, base + off, k)
                _check(drv.cuMemcpyHtoDAsync(int(handle) + off, stage, k, 0), "cuMemcpyHtoDAsync")
                _check(drv.cuStreamSynchronize(0), "cuStreamSynchronize")

    def copyout(self, dest: memoryview, handle: Any) -> None:
        _current()
        drv = _driver()
        out = np.frombuffer(dest, dtype=np.uint8)
        if not out.flags.writeable:
            raise ValueError("copyout needs a writable destination; got a read-only buffer")
        n, base = out.nbytes, int(out.ctypes.data)
        with self._lock:
            stage = self._stage(min(n, _STAGING_BYTES)) if n else 0
            for off in range(0, n, _STAGING_BYTES):
                k = min(_STAGING_BYTES, n - off)
                _check(drv.cuMemcpyDtoHAsync(stage, int(handle) + off, k, 0), "cuMemcpyDtoHAsync")
                _check(drv.cuStreamSynchronize(0), "cuStreamSynchronize")
                ctypes.memmove(base + off, stage, k)


class CUDAProgram(Program):
    """One kernel of a loaded module. ``global_size`` is the grid in blocks, ``local_size`` the block."""

    def __init__(self, name: str, lib: bytes) -> None:
        self.name = name
        try:
            if lib[:4] == b"\x7fELF":  # a CUBIN; anything else is PTX text, read up to the NUL added below
                check_device_image(lib, _EM_CUDA, f"CUBIN of {name!r}")
            _current()
            drv = _driver()
            image = ctypes.create_string_buffer(lib, len(lib))  # a PTX image must end in NUL; CUBIN ignores the length
            self._module = _check(drv.cuModuleLoadData(ctypes.addressof(image)), f"cuModuleLoadData({name})")
            self._fn = _check(drv.cuModuleGetFunction(self._module, name.encode()), f"cuModuleGetFunction({name!r})")
        except (ElfError, ImportError, RuntimeError) as e:  # CUDAError, and a missing driver, are RuntimeErrors
            raise ProgramLoadError(_PLUGIN, name, e) from e

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        g, b = launch_dims(self.name, global_size, local_size, "CUDA", *_LIMITS, max_threads=1024)
        _current()
        drv = _driver()
        cells: list[ctypes.c_uint64 | ctypes.c_int32] = [ctypes.c_uint64(int(h)) for h in bufs]
        cells += [ctypes.c_int32(int(v)) for v in vals]
        params = (ctypes.c_void_p * max(1, len(cells)))(*[ctypes.addressof(c) for c in cells])
        start = end = None
        if wait:
            start = _check(drv.cuEventCreate(0), "cuEventCreate")
            end = _check(drv.cuEventCreate(0), "cuEventCreate")
            _check(drv.cuEventRecord(start, 0), "cuEventRecord")
        _check(
            drv.cuLaunchKernel(self._fn, *g, *b, 0, 0, ctypes.addressof(params), 0),
            f"cuLaunchKernel({self.name}, grid={g}, block={b})",
        )
        if not wait:
            return None
        try:
            _check(drv.cuEventRecord(end, 0), "cuEventRecord")
            _check(drv.cuEventSynchronize(end), "cuEventSynchronize")
            ms = _check(drv.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        finally:
            drv.cuEventDestroy(start)
            drv.cuEventDestroy(end)
        return float(ms) / 1e3

    def __del__(self) -> None:
        # at interpreter exit the driver may already be torn down: the process releases the module then
        mod = getattr(self, "_module", None)
        if mod is not None and _init_state is not None and not sys.is_finalizing():
            _driver().cuModuleUnload(mod)


class CUDARuntime(Runtime):
    """The CUDA device: driver context, device allocator, module loader."""

    def __init__(self, device: str = "CUDA") -> None:
        _init()
        self.device = device
        self.allocator = CUDAAllocator()

    def load(self, name: str, lib: bytes) -> CUDAProgram:
        return CUDAProgram(name, lib)

    def synchronize(self) -> None:
        _current()
        _check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")
