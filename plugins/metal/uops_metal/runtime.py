"""The Metal runtime (macOS only): the Metal API through the Objective-C runtime, with ctypes.

Why ctypes and not pyobjc: ``pyobjc-framework-Metal`` has wheels for macOS only, so a dependency
on it would need an environment marker and would still pull a large package for a dozen calls;
``libobjc``'s ``objc_msgSend`` reaches every Metal method with no dependency at all.

Every Metal call goes through one small interface (``ObjC``: send a message, make and read
strings, create the device, wrap bytes as dispatch data), so the whole message sequence of this
module runs on Linux against a recording fake (tests/test_metal.py) and only ``CocoaObjC``, the
real implementation, needs a Mac. Buffers use the shared storage mode (zero-copy: the host writes
and reads the buffer's ``contents`` directly); every command buffer is waited for before the host
touches memory again. Launches are ``dispatchThreadgroups:threadsPerThreadgroup:`` with
``global_size`` counting threadgroups; ``wait=True`` returns the GPU's own time (GPUEndTime - GPUStartTime).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import Any, Protocol

from uops.plugin import Allocator, CompileError, DeviceError, Program, ProgramLoadError, Runtime, launch_dims
from uops_metal import NOT_MACOS
from uops_metal.renderer import MetalRenderer

__all__ = [
    "CocoaObjC",
    "MTLSize",
    "MetalAllocator",
    "MetalError",
    "MetalProgram",
    "MetalRuntime",
    "ObjC",
    "device_name",
    "probe_runtime",
]

STORAGE_MODE_SHARED = 0  # MTLResourceStorageModeShared << MTLResourceStorageModeShift
COMMAND_BUFFER_ERROR = 5  # MTLCommandBufferStatusError
_PLUGIN = __name__.partition(".")[0]
#: the grid and block limits a launch is checked against, the renderer's own
_LIMITS = MetalRenderer.global_max or (), MetalRenderer.local_max or ()


class MetalError(DeviceError):
    """A Metal call failed: which call and Metal's description of the error."""


class MTLSize(ctypes.Structure):
    _fields_ = [("width", ctypes.c_ulong), ("height", ctypes.c_ulong), ("depth", ctypes.c_ulong)]


class ObjC(Protocol):
    """What this runtime needs from the Objective-C runtime; ``CocoaObjC`` is the real one."""

    def send(self, obj: Any, sel: str, *args: Any, restype: Any = ctypes.c_void_p) -> Any:
        """``[obj sel:args...]``; ``args`` are ctypes values (their types make the call's signature)."""
        ...

    def send_error(self, obj: Any, sel: str, *args: Any) -> tuple[Any, str | None]:
        """A message whose last argument is ``NSError**``: (result, the error's description or None)."""
        ...

    def cls(self, name: str) -> Any: ...

    def nsstring(self, s: str) -> Any: ...

    def pystring(self, ns: Any) -> str: ...

    def create_device(self) -> Any:
        """``MTLCreateSystemDefaultDevice()``: the GPU, or None when there is none."""
        ...

    def dispatch_data(self, data: bytes) -> Any:
        """``dispatch_data_create`` over a copy of ``data`` (what ``newLibraryWithData:`` takes)."""
        ...

    def pool_push(self) -> Any: ...

    def pool_pop(self, pool: Any) -> None: ...


def _require_macos() -> None:
    if sys.platform != "darwin":
        raise MetalError(NOT_MACOS.format(sys.platform))


class CocoaObjC:
    """The Objective-C runtime of macOS through ctypes (libobjc, Foundation, Metal, libdispatch)."""

    def __init__(self) -> None:
        _require_macos()
        self.objc = ctypes.CDLL("/usr/lib/libobjc.A.dylib")
        ctypes.CDLL("/System/Library/Frameworks/Foundation.framework/Foundation")  # NSString, NSError
        self.metal = ctypes.CDLL("/System/Library/Frameworks/Metal.framework/Metal")
        self.system = ctypes.CDLL("/usr/lib/libSystem.B.dylib")
        signatures: list[tuple[Any, Any, list[Any]]] = [
            (self.objc.objc_getClass, ctypes.c_void_p, [ctypes.c_char_p]),
            (self.objc.sel_registerName, ctypes.c_void_p, [ctypes.c_char_p]),
            (self.objc.objc_autoreleasePoolPush, ctypes.c_void_p, []),
            (self.objc.objc_autoreleasePoolPop, None, [ctypes.c_void_p]),
            (self.metal.MTLCreateSystemDefaultDevice, ctypes.c_void_p, []),
            (self.system.dispatch_data_create, ctypes.c_void_p,
             [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p]),
        ]  # fmt: skip
        for fn, res, args in signatures:
            fn.restype, fn.argtypes = res, args
        self._msg = int(ctypes.cast(self.objc.objc_msgSend, ctypes.c_void_p).value or 0)
        self._sels: dict[str, int] = {}
        self._fns: dict[tuple[Any, ...], Any] = {}  # objc_msgSend cast to each signature used

    def _sel(self, name: str) -> int:
        if name not in self._sels:
            self._sels[name] = self.objc.sel_registerName(name.encode())
        return self._sels[name]

    def send(self, obj: Any, sel: str, *args: Any, restype: Any = ctypes.c_void_p) -> Any:
        key = (restype, *(type(a) for a in args))
        fn = self._fns.get(key)
        if fn is None:
            fn = self._fns[key] = ctypes.CFUNCTYPE(restype, ctypes.c_void_p, ctypes.c_void_p, *key[1:])(self._msg)
        return fn(obj, self._sel(sel), *args)

    def send_error(self, obj: Any, sel: str, *args: Any) -> tuple[Any, str | None]:
        err = ctypes.c_void_p(0)
        res = self.send(obj, sel, *args, ctypes.cast(ctypes.byref(err), ctypes.c_void_p))
        if res:
            return res, None
        return None, self.pystring(self.send(err, "localizedDescription")) if err.value else "unknown error"

    def cls(self, name: str) -> Any:
        return self.objc.objc_getClass(name.encode())

    def nsstring(self, s: str) -> Any:
        return self.send(self.cls("NSString"), "stringWithUTF8String:", ctypes.c_char_p(s.encode()))

    def pystring(self, ns: Any) -> str:
        raw = self.send(ns, "UTF8String", restype=ctypes.c_char_p)
        return raw.decode(errors="replace") if raw else ""

    def create_device(self) -> Any:
        return self.metal.MTLCreateSystemDefaultDevice()

    def dispatch_data(self, data: bytes) -> Any:
        buf = ctypes.create_string_buffer(data, len(data))
        # DISPATCH_DATA_DESTRUCTOR_DEFAULT (NULL): libdispatch copies the bytes now
        return self.system.dispatch_data_create(buf, len(data), None, None)

    def pool_push(self) -> Any:
        return self.objc.objc_autoreleasePoolPush()

    def pool_pop(self, pool: Any) -> None:
        self.objc.objc_autoreleasePoolPop(pool)


def _ptr(x: Any) -> ctypes.c_void_p:
    return x if isinstance(x, ctypes.c_void_p) else ctypes.c_void_p(x)


def _open(objc: ObjC) -> tuple[Any, Any]:
    """The default Metal device and a command queue on it."""
    dev = objc.create_device()
    if not dev:
        raise MetalError("MTLCreateSystemDefaultDevice returned no device: this Mac has no usable Metal GPU")
    queue = objc.send(_ptr(dev), "newCommandQueue")
    if not queue:
        raise MetalError("newCommandQueue failed")
    return dev, queue


def probe_runtime(objc: ObjC | None = None) -> str | None:
    """None when a Metal GPU is usable; on Linux ``Metal needs macOS ...``."""
    if objc is None and sys.platform != "darwin":
        return NOT_MACOS.format(sys.platform)
    try:
        _open(objc if objc is not None else CocoaObjC())
    except (MetalError, OSError, AttributeError) as e:
        return f"no Metal GPU: {e}"
    return None


def device_name(objc: ObjC | None = None) -> str:
    """The GPU's name, e.g. ``Apple M2``."""
    objc = objc if objc is not None else CocoaObjC()
    dev, _ = _open(objc)
    return objc.pystring(objc.send(_ptr(dev), "name"))


class MetalAllocator(Allocator):
    """Shared-storage MTLBuffers: handles are the buffers; copies go through their ``contents``."""

    def __init__(self, rt: MetalRuntime) -> None:
        self.rt = rt

    def alloc(self, nbytes: int) -> Any:
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative size ({nbytes} bytes)")
        buf = self.rt.objc.send(
            _ptr(self.rt.mtl_device), "newBufferWithLength:options:", ctypes.c_ulong(max(nbytes, 1)),
            ctypes.c_ulong(STORAGE_MODE_SHARED),
        )  # fmt: skip
        if not buf:
            raise MemoryError(f"Metal could not allocate a buffer of {nbytes} bytes")
        return buf

    def free(self, handle: Any, nbytes: int) -> None:
        self.rt.synchronize()  # a kernel in flight may still use it
        self.rt.objc.send(_ptr(handle), "release", restype=None)

    def _contents(self, handle: Any) -> int:
        return int(self.rt.objc.send(_ptr(handle), "contents"))

    def copyin(self, handle: Any, src: memoryview) -> None:
        self.rt.synchronize()
        data = memoryview(src).cast("B")
        ctypes.memmove(self._contents(handle), (ctypes.c_char * data.nbytes).from_buffer_copy(data), data.nbytes)

    def copyout(self, dest: memoryview, handle: Any) -> None:
        self.rt.synchronize()
        out = memoryview(dest).cast("B")
        if out.readonly:
            raise ValueError("copyout needs a writable destination; got a read-only buffer")
        ctypes.memmove((ctypes.c_char * out.nbytes).from_buffer(out), self._contents(handle), out.nbytes)


class MetalProgram(Program):
    """One kernel: library (from metallib bytes or MSL source), function, compute pipeline state.

    The three objects come from ``new...`` messages, so this program owns them: they are released
    when it is garbage (or at once when loading fails part-way). A command buffer in flight keeps
    its own references to the pipeline it was encoded with.
    """

    def __init__(self, rt: MetalRuntime, name: str, lib: bytes) -> None:
        self.rt, self.name = rt, name
        self._owned: list[Any] = []  # library, function, pipeline: released in reverse order
        objc, dev = rt.objc, _ptr(rt.mtl_device)
        pool = objc.pool_push()
        try:
            library = self._own(self._library(name, lib))
            fn = objc.send(_ptr(library), "newFunctionWithName:", _ptr(objc.nsstring(name)))
            if not fn:
                raise MetalError(f"kernel {name!r} is not in the library")
            self._own(fn)
            pso, err = objc.send_error(dev, "newComputePipelineStateWithFunction:error:", _ptr(fn))
            if pso is None:
                raise MetalError(f"newComputePipelineStateWithFunction failed for {name!r}: {err}")
            self._pso = self._own(pso)
            self.max_threads = int(objc.send(_ptr(pso), "maxTotalThreadsPerThreadgroup", restype=ctypes.c_ulong))
        except (MetalError, CompileError, UnicodeDecodeError) as e:
            self._release()
            raise ProgramLoadError(_PLUGIN, name, e) from e
        finally:
            objc.pool_pop(pool)

    def _own(self, obj: Any) -> Any:
        self._owned.append(obj)
        return obj

    def _library(self, name: str, lib: bytes) -> Any:
        """An MTLLibrary from metallib bytes, or compiled from MSL source (fast math off)."""
        objc, dev = self.rt.objc, _ptr(self.rt.mtl_device)
        if lib[:4] == b"MTLB":
            library, err = objc.send_error(dev, "newLibraryWithData:error:", _ptr(objc.dispatch_data(lib)))
            if library is None:
                raise MetalError(f"newLibraryWithData failed for {name!r}: {err}")
            return library
        src = lib.decode()
        opts = objc.send(_ptr(objc.send(_ptr(objc.cls("MTLCompileOptions")), "alloc")), "init")
        objc.send(_ptr(opts), "setFastMathEnabled:", ctypes.c_bool(False), restype=None)
        library, err = objc.send_error(dev, "newLibraryWithSource:options:error:", _ptr(objc.nsstring(src)),
                                       _ptr(opts))  # fmt: skip
        objc.send(_ptr(opts), "release", restype=None)
        if library is None:
            raise CompileError(err or "newLibraryWithSource failed", src, "Metal (newLibraryWithSource)")
        return library

    def _release(self) -> None:
        owned, self._owned = self._owned, []
        for obj in reversed(owned):
            self.rt.objc.send(_ptr(obj), "release", restype=None)

    def __del__(self) -> None:
        # at interpreter exit the Objective-C runtime may be torn down: the process releases everything then
        if getattr(self, "_owned", None) and not sys.is_finalizing():
            self._release()

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        why = "threads of the pipeline's maxTotalThreadsPerThreadgroup"
        g, b = launch_dims(self.name, global_size, local_size, "Metal", *_LIMITS, self.max_threads, why)
        objc = self.rt.objc
        pool = objc.pool_push()
        try:
            cb = objc.send(_ptr(self.rt.queue), "commandBuffer")
            enc = objc.send(_ptr(cb), "computeCommandEncoder")
            objc.send(_ptr(enc), "setComputePipelineState:", _ptr(self._pso), restype=None)
            for i, h in enumerate(bufs):
                objc.send(_ptr(enc), "setBuffer:offset:atIndex:", _ptr(h), ctypes.c_ulong(0), ctypes.c_ulong(i),
                          restype=None)  # fmt: skip
            for j, v in enumerate(vals):
                cell = ctypes.c_int32(int(v))
                objc.send(_ptr(enc), "setBytes:length:atIndex:", ctypes.cast(ctypes.byref(cell), ctypes.c_void_p),
                          ctypes.c_ulong(4), ctypes.c_ulong(len(bufs) + j), restype=None)  # fmt: skip
            objc.send(_ptr(enc), "dispatchThreadgroups:threadsPerThreadgroup:", MTLSize(*g), MTLSize(*b), restype=None)
            objc.send(_ptr(enc), "endEncoding", restype=None)
            objc.send(_ptr(cb), "commit", restype=None)
            cb = objc.send(_ptr(cb), "retain")  # outlives the autorelease pool until it was waited for
        finally:
            objc.pool_pop(pool)
        if not wait:
            self.rt.in_flight.append(cb)
            return None
        try:
            self.rt.synchronize()
            self.rt.finish(cb)
            start = objc.send(_ptr(cb), "GPUStartTime", restype=ctypes.c_double)
            end = objc.send(_ptr(cb), "GPUEndTime", restype=ctypes.c_double)
        finally:
            objc.send(_ptr(cb), "release", restype=None)
        return float(end) - float(start)


class MetalRuntime(Runtime):
    """The Metal device: default MTLDevice, one command queue, shared-storage allocator, pipeline loader."""

    def __init__(self, device: str = "METAL", objc: ObjC | None = None) -> None:
        self.device = device
        self.objc: ObjC = objc if objc is not None else CocoaObjC()
        self.mtl_device, self.queue = _open(self.objc)
        self.in_flight: list[Any] = []  # committed, retained command buffers not yet waited for
        self._lock = threading.Lock()
        self.allocator = MetalAllocator(self)

    def load(self, name: str, lib: bytes) -> MetalProgram:
        return MetalProgram(self, name, lib)

    def finish(self, cb: Any) -> None:
        """Wait for one command buffer; MetalError with Metal's description if it failed."""
        self.objc.send(_ptr(cb), "waitUntilCompleted", restype=None)
        if int(self.objc.send(_ptr(cb), "status", restype=ctypes.c_ulong)) == COMMAND_BUFFER_ERROR:
            err = self.objc.send(_ptr(cb), "error")
            why = self.objc.pystring(self.objc.send(_ptr(err), "localizedDescription")) if err else "no description"
            raise MetalError(f"a Metal command buffer failed: {why}")

    def synchronize(self) -> None:
        """Wait for every committed command buffer (and release them); the first failure is raised."""
        with self._lock:
            pending, self.in_flight = self.in_flight, []
        failure: MetalError | None = None
        for cb in pending:
            try:
                self.finish(cb)
            except MetalError as e:
                failure = failure or e
            finally:
                self.objc.send(_ptr(cb), "release", restype=None)
        if failure is not None:
            raise failure
