"""Runtime contracts (``Allocator``, ``Program``, ``Runtime``) and ``Buffer``.

A backend's runtime is the only part that touches hardware: it allocates memory, copies
bytes in and out, and loads compiled bytes as launchable programs (never compiling).
``Buffer`` is the core's handle on device memory: typed, sized in elements, allocated
lazily, and guarded against use after free.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

import numpy as np

from uops.dtypes import DType, PtrDType, to_numpy
from uops.errors import UopsError

__all__ = [
    "Allocator",
    "Buffer",
    "BufferFreedError",
    "BufferViewError",
    "DeviceError",
    "Event",
    "HostAllocator",
    "Launch",
    "LaunchError",
    "LaunchProgram",
    "OutOfMemoryError",
    "Program",
    "ProgramLoadError",
    "Runtime",
    "VIEW_ALIGN",
    "copy_between",
    "launch_dims",
]


class ProgramLoadError(UopsError, RuntimeError):
    """A runtime could not turn compiled bytes into a launchable program: which plugin, which kernel, why.

    Every runtime's ``load`` raises this one type, whatever failed underneath (an ELF check,
    dlopen, ``cuModuleLoadData``, ``hipModuleLoadData``, Metal's library or pipeline calls), so
    callers handle one error; the specific one stays attached as ``__cause__``.
    """

    def __init__(self, plugin: str, kernel: str, cause: BaseException | str) -> None:
        self.plugin = plugin
        self.kernel = kernel
        self.cause = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        super().__init__(f"{plugin} could not load kernel {kernel!r}: {self.cause}")

    def __reduce__(self) -> tuple[type[ProgramLoadError], tuple[str, str, str]]:
        # keep the fields when the error crosses a process boundary (BEAM's worker processes)
        return (type(self), (self.plugin, self.kernel, self.cause))


class DeviceError(UopsError, RuntimeError):
    """A driver call failed: which device, which call, the driver's own code, and its words.

    Every runtime raises this (or a subclass) for driver failures, so callers handle one type for every
    backend; ``device``, ``call`` and ``code`` are kept as attributes (None where not known).
    """

    def __init__(
        self, message: str, *, device: str | None = None, call: str | None = None, code: int | str | None = None
    ) -> None:
        self.message, self.device, self.call, self.code = message, device, call, code
        where = [f"device {device}" if device else "", f"call {call}" if call else "",
                 f"driver code {code}" if code is not None else ""]  # fmt: skip
        detail = ", ".join(w for w in where if w)
        super().__init__(f"{message} ({detail})" if detail else message)

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the fields when the error crosses a process boundary (BEAM's worker processes)
        return (_rebuild_device_error, (type(self), self.message, self.device, self.call, self.code))


def _rebuild_device_error(
    cls: type[DeviceError], message: str, device: str | None, call: str | None, code: int | str | None
) -> DeviceError:
    return cls(message, device=device, call=call, code=code)


class LaunchError(DeviceError):
    """A launch refused before it reaches the device (sizes the device would reject), or one the device refused."""


class OutOfMemoryError(DeviceError, MemoryError):
    """The device has no memory left for an allocation (free buffers, or use smaller ones)."""


def launch_dims(
    kernel: str,
    global_size: tuple[int, ...],
    local_size: tuple[int, ...],
    device: str,
    max_grid: tuple[int, ...] = (),
    max_block: tuple[int, ...] = (),
    max_threads: int | None = None,
    threads_limit: str = "threads per block the device allows",
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """A launch's (grid, block) as three positive ints each, or ``LaunchError`` saying which size is wrong.

    Every GPU-style runtime checks here, before the driver sees the launch: a driver's own
    refusal names neither the kernel nor the size, and a silently padded or truncated size
    would run the wrong number of threads.
    """
    grid = _dims(kernel, "global_size", global_size, device, max_grid)
    block = _dims(kernel, "local_size", local_size, device, max_block)
    threads = block[0] * block[1] * block[2]
    if max_threads is not None and threads > max_threads:
        raise LaunchError(
            f"kernel {kernel!r}: local_size {block} is {threads} threads per block, more than the {max_threads} "
            f"{threads_limit}"
        )
    return grid, block


def _dims(kernel: str, what: str, size: tuple[int, ...], device: str, limit: tuple[int, ...]) -> tuple[int, int, int]:
    try:
        dims = tuple(int(x) for x in size)
    except (TypeError, ValueError):
        raise LaunchError(f"kernel {kernel!r}: {what} must be 1 to 3 positive ints, got {size!r}") from None
    if not 1 <= len(dims) <= 3 or any(x < 1 for x in dims):
        raise LaunchError(f"kernel {kernel!r}: {what} must be 1 to 3 positive ints, got {size}")
    full = (dims + (1, 1))[:3]
    if any(x > m for x, m in zip(full, limit)):
        raise LaunchError(f"kernel {kernel!r}: {what} {full} exceeds the {device} limit {limit}")
    return full  # type: ignore[return-value]


@runtime_checkable
class Event(Protocol):
    """A completion handle a launch or a copy may return on an asynchronous device (CUDA/HIP events, OpenCL
    ``cl_event``): ``wait()`` blocks until that work is done. The core waits on it before it reads the
    results, frees the buffers or reuses host memory the copy reads; ``Runtime.synchronize`` stays the
    fallback for launches and copies that return None."""

    def wait(self) -> None: ...


class Allocator(ABC):
    """Device memory: opaque handles, host<->device copies, an optional zero-copy host view.

    ``copyin`` and ``copyout`` may return an `Event` instead of blocking: the core keeps ``src`` alive and
    waits on a ``copyin`` event before the buffer is read or freed, and waits on a ``copyout`` event before
    it reads ``dest``."""

    @abstractmethod
    def alloc(self, nbytes: int) -> Any:
        """Allocate ``nbytes`` and return an opaque handle."""

    @abstractmethod
    def free(self, handle: Any, nbytes: int) -> None:
        """Release a handle returned by ``alloc(nbytes)``."""

    @abstractmethod
    def copyin(self, handle: Any, src: memoryview) -> Event | None:
        """Host -> device: copy all of ``src`` (bytes) into the buffer (an `Event` if it completes later)."""

    @abstractmethod
    def copyout(self, dest: memoryview, handle: Any) -> Event | None:
        """Device -> host: fill all of ``dest`` (bytes) from the buffer (an `Event` if it completes later)."""

    def as_memoryview(self, handle: Any, nbytes: int) -> memoryview | None:
        """A zero-copy writable host view of the buffer, or None when memory isn't host-visible."""
        return None

    def view(self, handle: Any, offset: int, nbytes: int) -> Any | None:
        """A handle on ``nbytes`` of the buffer starting ``offset`` bytes in (a sub-buffer sharing its memory),
        or None when the runtime has no sub-buffers. The core never frees a view and keeps its buffer alive
        while the view lives; it asks only for offsets that are multiples of 64 bytes."""
        return None


class Program(ABC):
    """A loaded kernel; calling it launches it."""

    @abstractmethod
    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | Event | None:
        """Launch with buffer handles then int32 ``vals``; with ``wait`` return elapsed seconds (the launch is
        done). Without ``wait`` a launch may return an `Event`; the core waits on it before reading any buffer
        the launch was given."""


class Launch(TypedDict, total=False):
    """`Program.__call__`'s keywords as one value. A caller may leave any out; `LaunchProgram.launch`
    receives all four, the defaults filled in."""

    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    vals: tuple[int, ...]
    wait: bool


#: `Program.__call__`'s defaults
_DEFAULT_LAUNCH = Launch(global_size=(1, 1, 1), local_size=(1, 1, 1), vals=(), wait=False)


class LaunchProgram(Program):
    """A Program that takes its launch as the buffers and one `Launch` (`launch`): the core's own runtimes
    and the kit's wrappers, which hand the keywords on or read a few of them."""

    def __call__(self, *bufs: Any, **kw: Unpack[Launch]) -> float | Event | None:
        return self.launch(bufs, {**_DEFAULT_LAUNCH, **kw})

    @abstractmethod
    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | Event | None:
        """`Program.__call__` with its keywords gathered into ``kw``."""


class Runtime(ABC):
    """One device: its allocator and its program loader."""

    device: str
    allocator: Allocator

    @abstractmethod
    def load(self, name: str, lib: bytes) -> Program:
        """Load compiled bytes (``ProgramSpec.lib``) and return the function ``name``. Never compiles.

        Bytes that do not load (corrupt, for another device, no function ``name``) raise
        ``ProgramLoadError``."""

    def synchronize(self) -> None:
        """Wait for all launched work to finish (a no-op for synchronous devices)."""
        return None


# ---------------------------------------------------------------------------------------
# host memory


_ALIGN = 64  # a cache line, and enough for any SIMD load


#: the smallest buffer a reusing `HostAllocator` keeps when it is freed (smaller ones are cheap to allocate anew)
KEEP_MIN_BYTES = 1 << 16


class HostAllocator(Allocator):
    """Aligned host memory backed by numpy; handles are 1-D ``uint8`` arrays.

    ``handle.ctypes.data`` is the address to pass to native code, and ``as_memoryview`` is
    zero-copy. New memory is zeroed (calloc-backed, so large buffers cost nothing until touched).

    With ``keep_bytes``, freed buffers of ``KEEP_MIN_BYTES`` or more are kept, up to that many bytes in all (the
    least recently freed size goes first), and an allocation of the same size takes one back as it is, not
    zeroed, as malloc reuses freed memory. Why: a new buffer's pages fault in on their first write, and on a
    virtual machine that dominates a streaming kernel (softmax of 2048^2 into new memory 16.7 ms, into reused
    memory 1.6 ms, on the 2-core EPYC).
    """

    def __init__(self, align: int = _ALIGN, keep_bytes: int = 0) -> None:
        if align <= 0 or align & (align - 1):
            raise ValueError(f"alignment must be a power of two, got {align}")
        if keep_bytes < 0:
            raise ValueError(f"keep_bytes must be >= 0, got {keep_bytes}")
        self.align = align
        self.keep_bytes = keep_bytes
        self._kept: OrderedDict[int, list[np.ndarray]] = OrderedDict()  # size -> freed handles, least recent first
        self._kept_total = 0
        self._lock = threading.Lock()  # buffers are freed by the garbage collector, in any thread

    def alloc(self, nbytes: int) -> np.ndarray:
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative size ({nbytes} bytes)")
        if self._kept_total and nbytes >= KEEP_MIN_BYTES:
            with self._lock:
                free = self._kept.get(nbytes)
                if free:
                    handle = free.pop()
                    if not free:
                        del self._kept[nbytes]
                    self._kept_total -= nbytes
                    return handle
        raw = np.zeros(nbytes + self.align, dtype=np.uint8)
        off = -raw.ctypes.data % self.align
        # the view keeps ``raw`` alive (and, unlike an empty slice, keeps the aligned address at 0 bytes)
        return np.ndarray((nbytes,), dtype=np.uint8, buffer=raw, offset=off)

    def free(self, handle: Any, nbytes: int) -> None:
        # numpy owns the memory; it is released when the last view of it is dropped (or kept for reuse)
        self._check(handle, nbytes, "free")
        if KEEP_MIN_BYTES <= nbytes <= self.keep_bytes:
            with self._lock:
                self._kept.setdefault(nbytes, []).append(handle)
                self._kept.move_to_end(nbytes)
                self._kept_total += nbytes
                while self._kept_total > self.keep_bytes:
                    size, handles = next(iter(self._kept.items()))
                    handles.pop(0)
                    if not handles:
                        del self._kept[size]
                    self._kept_total -= size

    @property
    def kept_bytes(self) -> int:
        """Bytes of freed buffers kept for reuse."""
        return self._kept_total

    def copyin(self, handle: Any, src: memoryview) -> None:
        data = np.frombuffer(src, dtype=np.uint8)
        self._check(handle, data.nbytes, "copyin")
        handle[:] = data

    def copyout(self, dest: memoryview, handle: Any) -> None:
        out = np.frombuffer(dest, dtype=np.uint8)
        self._check(handle, out.nbytes, "copyout")
        if out.flags.writeable is False:
            raise ValueError("copyout needs a writable destination; got a read-only buffer")
        out[:] = handle

    def as_memoryview(self, handle: Any, nbytes: int) -> memoryview:
        self._check(handle, nbytes, "as_memoryview")
        return handle.data

    def view(self, handle: Any, offset: int, nbytes: int) -> np.ndarray:
        self._check(handle, handle.nbytes if isinstance(handle, np.ndarray) else -1, "view")
        if offset < 0 or nbytes < 0 or offset + nbytes > handle.nbytes:
            raise ValueError(
                f"HostAllocator.view: bytes [{offset}, {offset + nbytes}) are outside the {handle.nbytes}-byte buffer"
            )
        return handle[offset : offset + nbytes]

    @staticmethod
    def _check(handle: Any, nbytes: int, what: str) -> None:
        if not isinstance(handle, np.ndarray) or handle.dtype != np.uint8 or handle.ndim != 1:
            raise TypeError(f"HostAllocator.{what}: expected a handle from HostAllocator.alloc, got {type(handle)}")
        if handle.nbytes != nbytes:
            raise ValueError(f"HostAllocator.{what}: size mismatch, buffer has {handle.nbytes} bytes, got {nbytes}")


# ---------------------------------------------------------------------------------------
# Buffer


class BufferFreedError(UopsError, RuntimeError):
    """A Buffer was used after ``free()``."""


class BufferViewError(UopsError, NotImplementedError):
    """A view (sub-buffer) was asked of a runtime whose allocator has none."""


#: what a Buffer's pending launches and copies left to wait on: (event, what must stay alive until it is done)
_Pending = list[tuple[Event, Any]]


def _wait_all(pending: _Pending) -> None:
    done, pending[:] = list(pending), []
    for event, _ in done:
        event.wait()


def _release(allocator: Allocator, handle: Any, nbytes: int, pending: _Pending) -> None:
    _wait_all(pending)
    allocator.free(handle, nbytes)


#: a view's byte offset must be a multiple of this: kernels may use vector loads that need the alignment
VIEW_ALIGN = 64


class Buffer:
    """``size`` elements of ``dtype`` on a runtime's device, allocated on first use."""

    def __init__(self, runtime: Runtime, size: int, dtype: DType, name: str | None = None) -> None:
        if isinstance(dtype, PtrDType):
            raise TypeError(f"a Buffer holds values, not pointers: pass {dtype.base!r}, not {dtype!r}")
        if not isinstance(size, int) or size < 0:
            raise ValueError(f"Buffer size must be a non-negative int (elements), got {size!r}")
        to_numpy(dtype)  # fail now, not at first use, for a dtype with no host form
        self.runtime = runtime
        self.size = size
        self.dtype = dtype
        self.name = name
        self._handle: Any = None
        self._freed = False
        self._finalizer: weakref.finalize | None = None
        self._pending: _Pending = []  # shared with the views of this buffer: they use the same memory
        self._base: Buffer | None = None

    @classmethod
    def wrap(cls, runtime: Runtime, size: int, dtype: DType, handle: Any) -> Buffer:
        """A Buffer over memory someone else allocated (DLPack imports): never freed through the allocator;
        the handle's own lifetime (and whatever it keeps alive) decides when the memory goes."""
        buf = cls(runtime, size, dtype)
        buf._handle = handle
        return buf

    def view(self, offset: int, size: int) -> Buffer:
        """``size`` elements of this buffer from element ``offset`` on, sharing its memory (a sub-buffer).

        The view keeps this buffer alive, is never freed itself, and fails once this buffer is freed.
        Raises ``NotImplementedError`` on a runtime without sub-buffers (``Allocator.view`` returns None)."""
        self._live()
        if not isinstance(offset, int) or not isinstance(size, int) or offset < 0 or size < 0:
            raise ValueError(f"view of {self!r}: offset and size must be non-negative ints, got {offset!r}, {size!r}")
        if offset + size > self.size:
            raise ValueError(f"view of {self!r}: elements [{offset}, {offset + size}) are outside the buffer")
        itemsize = self.dtype.nbytes
        if (offset * itemsize) % VIEW_ALIGN:
            raise ValueError(
                f"view of {self!r}: the offset is {offset * itemsize} bytes, which must be a multiple of {VIEW_ALIGN}"
            )
        handle = self.runtime.allocator.view(self.handle, offset * itemsize, size * itemsize)
        if handle is None:
            raise BufferViewError(f"{self.device}'s allocator has no sub-buffers (Allocator.view returned None)")
        buf = Buffer.wrap(self.runtime, size, self.dtype, handle)
        root = self._base or self
        buf._base, buf._pending = root, root._pending
        return buf

    # ---- identity

    @property
    def device(self) -> str:
        return self.runtime.device

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.nbytes

    @property
    def is_allocated(self) -> bool:
        return self._handle is not None

    def __repr__(self) -> str:
        state = "freed" if self._freed else ("allocated" if self._handle is not None else "unallocated")
        label = f" {self.name!r}" if self.name else ""
        return f"<Buffer{label} {self.device} {self.dtype!r}[{self.size}] {state}>"

    # ---- memory

    def _live(self) -> None:
        if self._freed:
            raise BufferFreedError(f"use of buffer {self!r} after free(); allocate a new Buffer instead")
        if self._base is not None and self._base._freed:
            raise BufferFreedError(f"use of view {self!r} after its buffer {self._base!r} was freed")

    def after(self, result: object) -> None:
        """Note what a launch or copy that used this buffer returned: an `Event` is waited on before the buffer
        is read or freed; anything else (a synchronous runtime) leaves it to ``Runtime.synchronize``."""
        if result is not None and not isinstance(result, float) and isinstance(result, Event):
            self._pending.append((result, None))
        else:
            self._pending.clear()  # synchronize waits for everything, the events before this launch too

    def wait(self) -> None:
        """Wait until the launches and copies that used this buffer are done: on their events where they
        returned some, else on ``Runtime.synchronize``."""
        self._live()
        if self._pending:
            _wait_all(self._pending)
        else:
            self.runtime.synchronize()

    def allocate(self) -> Buffer:
        """Allocate now (otherwise the first use does it)."""
        self._live()
        if self._handle is None:
            alloc = self.runtime.allocator
            self._handle = alloc.alloc(self.nbytes)
            # free on garbage collection, but not at interpreter exit when drivers may be gone
            self._finalizer = weakref.finalize(self, _release, alloc, self._handle, self.nbytes, self._pending)
            self._finalizer.atexit = False
        return self

    @property
    def handle(self) -> Any:
        """The allocator's handle (allocating if needed): what a Program is called with."""
        self.allocate()
        return self._handle

    def free(self) -> None:
        """Release the memory now; any later use of this Buffer raises ``BufferFreedError``."""
        self._live()
        self._freed = True
        if self._finalizer is not None:
            self._finalizer()  # calls allocator.free once
            self._finalizer = None
        self._handle = None

    # ---- data

    def _host_dtype(self) -> np.dtype:
        return to_numpy(self.dtype)

    def copyin(self, arr: np.ndarray) -> Buffer:
        """Copy a host array into the buffer; dtype and element count must match exactly."""
        self._live()
        arr = np.asarray(arr)
        want = self._host_dtype()
        if arr.dtype != want:
            raise TypeError(
                f"copyin to {self!r}: array dtype is {arr.dtype}, buffer holds {want}; "
                f"convert first with arr.astype(np.{want.name})"
            )
        if arr.size != self.size * self.dtype.count:
            raise ValueError(f"copyin to {self!r}: array has {arr.size} elements ({arr.shape}), buffer has {self.size}")
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        event = self.runtime.allocator.copyin(self.handle, flat.data)
        if isinstance(event, Event):
            self._pending.append((event, flat))  # the host bytes stay alive until the copy is done
        return self

    def numpy(self) -> np.ndarray:
        """A host copy of the contents (1-D; bfloat16 comes back as raw uint16 bits)."""
        self._live()
        out = np.empty(self.size * self.dtype.count, dtype=self._host_dtype())
        self.wait()
        event = self.runtime.allocator.copyout(out.view(np.uint8).data, self.handle)
        if isinstance(event, Event):
            event.wait()
        return out

    def as_numpy(self) -> np.ndarray | None:
        """A zero-copy writable view of the device memory, or None when it isn't host-visible.

        The view is valid only until ``free()``; it is taken after the work that used the buffer is done
        (``wait()``), so call ``wait()`` again before reading it after a later launch.
        """
        self.wait()
        mv = self.runtime.allocator.as_memoryview(self.handle, self.nbytes)
        if mv is None:
            return None
        return np.frombuffer(mv, dtype=self._host_dtype())


def copy_between(src: Buffer, dst: Buffer) -> None:
    """Copy ``src`` into ``dst`` through host memory (works across any two devices)."""
    src._live()
    dst._live()
    if src.nbytes != dst.nbytes:
        raise ValueError(f"copy_between: {src!r} has {src.nbytes} bytes but {dst!r} has {dst.nbytes}")
    src.wait()
    view = src.runtime.allocator.as_memoryview(src.handle, src.nbytes)
    keep: Any = src
    if view is None:
        keep = tmp = np.empty(src.nbytes, dtype=np.uint8)
        event = src.runtime.allocator.copyout(tmp.data, src.handle)
        if isinstance(event, Event):
            event.wait()
        view = tmp.data
    event = dst.runtime.allocator.copyin(dst.handle, view)
    if isinstance(event, Event):
        dst._pending.append((event, keep))
