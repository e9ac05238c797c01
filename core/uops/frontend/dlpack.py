"""DLPack: sharing tensor memory with numpy, torch, jax and cupy without copies, both ways.

The C structs of DLPack 1.x are declared with ctypes, capsules are made and read through
``ctypes.pythonapi``, so no compiled extension is needed. What this module decides:

- A lazy tensor is realized first (as ``numpy()`` does): a consumer asking for memory wants the value.
- A tensor whose view is not a plain strided window of one buffer (padded, or a reshape the
  strides cannot say) is made contiguous first; that is a new buffer, flagged as a copy.
- Memory is exported writable, like torch and cupy do: a consumer's writes are seen by the tensor.
  ``copy=True`` hands out a private copy instead.
- Importing keeps the producer's memory alive (its deleter runs when the last uops buffer over it
  is garbage). A read-only producer (DLPack's READ_ONLY flag) is copied, never aliased; with
  ``copy=False`` that is a ``BufferError``.
- A consumer that refuses a capsule and calls its deleter with an exception already pending (numpy
  does, for bfloat16) cannot run a Python deleter: it reports a ``SystemError`` and that one export
  stays alive until exit. Deleters written in Python cannot run in that state; the rest of the
  protocol does not need C.
- CPU memory (host-visible allocators: the CPU and PYTHON devices) is shared both ways. A CUDA
  tensor exports its device pointer (kDLCUDA); other memory raises ``BufferError`` naming the device.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import weakref
from typing import Any

import numpy as np

from uops.dtypes import DType, dtypes, to_numpy
from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .realize import _buffers, device_handle, get_buffer, realize
from .schedule import new_buffer, shape_of
from .view import ShapeTracker, View

__all__ = ["DLPackError", "dlpack_device", "export_dlpack", "import_dlpack"]


class DLPackError(UopsError, BufferError):
    """Memory that cannot be shared through DLPack: which tensor, which device or dtype, and what to do."""


# ----- the DLPack 1.x ABI -----
kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM, kDLMetal = 1, 2, 3, 10, 8
_DEVICE_TYPES = {"CPU": kDLCPU, "PYTHON": kDLCPU, "CUDA": kDLCUDA, "AMD": kDLROCM, "METAL": kDLMetal}
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6
FLAG_READ_ONLY, FLAG_IS_COPIED = 1 << 0, 1 << 1
DLPACK_VERSION = (1, 0)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _Deleter),
    ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor),
]

_py = ctypes.pythonapi
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_py.PyCapsule_GetDestructor.restype = ctypes.c_void_p
_py.PyCapsule_GetDestructor.argtypes = [ctypes.py_object]
_py.PyCapsule_GetPointer.restype = ctypes.c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_IsValid.restype = ctypes.c_int
_py.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_SetName.restype = ctypes.c_int
_py.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_py.PyCapsule_GetName.restype = ctypes.c_char_p
_py.PyCapsule_GetName.argtypes = [ctypes.py_object]
_LEGACY, _VERSIONED = b"dltensor", b"dltensor_versioned"
# PyCapsule_New and PyCapsule_SetName keep the name pointer, not a copy: the names live as long as the module
_NAMES = {n: ctypes.c_char_p(n) for n in (_LEGACY, _VERSIONED, b"used_dltensor", b"used_dltensor_versioned")}
_USED = {_LEGACY: _NAMES[b"used_dltensor"], _VERSIONED: _NAMES[b"used_dltensor_versioned"]}


# ----- export -----
#: address of an exported struct -> what it needs alive (owner, shape/strides arrays, the struct) until its deleter
_exports: dict[int, tuple[Any, ...]] = {}
_export_ids = itertools.count(1)


def _release_export(managed: int | None) -> None:
    # bytecode only, no calls: a consumer that refused a capsule may call this with its exception pending
    if managed in _exports:
        del _exports[managed]


_deleter = _Deleter(_release_export)


def _capsule_destructor(capsule: int) -> None:
    """A capsule dropped unconsumed still owns its struct: call its deleter (a consumer renames it instead)."""
    for name in (_LEGACY, _VERSIONED):
        if _py.PyCapsule_IsValid(ctypes.cast(capsule, ctypes.py_object), _NAMES[name]):
            _release_export(_py.PyCapsule_GetPointer(ctypes.cast(capsule, ctypes.py_object), _NAMES[name]))


_py_destructor = _CapsuleDestructor(_capsule_destructor)


def _capsule_destructors() -> dict[bytes, int]:
    """The C destructor numpy gives its own capsules of each name, else a Python one.

    Why numpy's: a capsule is often dropped by a consumer that refused it with an exception pending,
    when no Python code can run; numpy's destructor does what the DLPack spec prescribes (call the
    struct's deleter unless the capsule was renamed "used_...") in C, setting the exception aside.
    """
    out = {name: ctypes.cast(_py_destructor, ctypes.c_void_p).value or 0 for name in (_LEGACY, _VERSIONED)}
    probe = np.zeros(1)
    asks: tuple[tuple[bytes, dict[str, Any]], ...] = ((_LEGACY, {}), (_VERSIONED, {"max_version": (1, 0)}))
    for name, kw in asks:
        try:
            cap = probe.__dlpack__(**kw)
        except (TypeError, BufferError):
            continue
        if _py.PyCapsule_GetName(cap) == name and (fn := _py.PyCapsule_GetDestructor(cap)):
            out[name] = fn
    return out


_DESTRUCTORS = _capsule_destructors()


def _dl_dtype(dt: DType) -> DLDataType:
    if dtypes.is_bool(dt):
        return DLDataType(kDLBool, 8, 1)
    if dt == dtypes.bfloat16:
        return DLDataType(kDLBfloat, 16, 1)
    code = kDLFloat if dtypes.is_float(dt) else kDLUInt if dtypes.is_unsigned(dt) else kDLInt
    return DLDataType(code, 8 * dt.itemsize, 1)


def _device_type(device: str) -> tuple[int, int]:
    base, _, idx = device.partition(":")
    kind = _DEVICE_TYPES.get(base)
    if kind is None:
        raise DLPackError(f"device {device} has no DLPack device type; move the tensor with .to('CPU') first")
    return kind, int(idx or 0)


def host_memory(device: str) -> bool:
    """Whether the device's buffers are host memory a pointer can share (the CPU and PYTHON devices)."""
    from uops.runtime import HostAllocator

    return isinstance(device_handle(device).runtime.allocator, HostAllocator)


def dlpack_device(device: str) -> tuple[int, int]:
    """``(device_type, device_id)`` of memory on ``device``, as DLPack numbers them (CPU is 1, CUDA 2)."""
    return (kDLCPU, 0) if host_memory(device) else _device_type(device)


def _strided(u: UOp) -> tuple[UOp, View] | None:
    """(BUFFER, its one view) when ``u`` is a plain strided window of a buffer: the strides DLPack can say."""
    if u.op is not Ops.VIEW or u.src[0].op is not Ops.BUFFER or len(u.arg.views) != 1:
        return None
    v = u.arg.views[0]
    return (u.src[0], v) if v.mask is None else None


def export_dlpack(
    u: UOp,
    device: str,
    stream: int | Any | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """The memory of tensor node ``u`` as a DLPack capsule (`Tensor.__dlpack__`): versioned
    ("dltensor_versioned") when the consumer's ``max_version`` is 1.0 or later, else the legacy ("dltensor")
    one. A lazy node is computed first."""
    kind, dev_id = dlpack_device(device)
    if dl_device is not None and tuple(dl_device) != (kind, dev_id):
        if tuple(dl_device) != (kDLCPU, 0):
            raise DLPackError(f"a {device} tensor cannot be exported to DLPack device {tuple(dl_device)}")
        if copy is False:
            raise DLPackError(f"exporting a {device} tensor to the CPU needs a copy, and copy=False forbids it")
        return _export_host_copy(u, device, max_version, flags=FLAG_IS_COPIED)
    if kind == kDLCPU and stream is not None and stream != -1:
        raise DLPackError(f"stream must be None for CPU memory, got {stream!r}")
    rt = device_handle(device).runtime
    if copy:
        if kind == kDLCPU:
            return _export_host_copy(u, device, max_version, flags=FLAG_IS_COPIED)
        u = UOp(Ops.CONTIGUOUS, u.dtype, (u,))
    flags = FLAG_IS_COPIED if copy else 0
    shape = shape_of(u)
    (u,) = realize([u], device)
    sv = _strided(u)
    if sv is None:
        if copy is False:
            raise DLPackError(
                f"the tensor's view (shape {shape}) is not one strided window of a buffer; "
                "sharing it needs a copy, and copy=False forbids it"
            )
        (u,) = realize([UOp(Ops.CONTIGUOUS, u.dtype, (u,))], device)
        sv = _strided(u)
        assert sv is not None
        flags |= FLAG_IS_COPIED
    buf_node, view = sv
    buf = get_buffer(buf_node)
    rt.synchronize()
    if kind == kDLCPU:
        host = buf.as_numpy()
        assert host is not None
        base = host.ctypes.data if host.size else 0
    elif kind == kDLCUDA:
        base = int(buf.handle)
    else:
        raise DLPackError(f"{device} memory has no DLPack pointer form here; move the tensor with .to('CPU')")
    data = base + view.offset * u.dtype.itemsize if base else None
    return _capsule(buf, shape, view.strides, u.dtype, (kind, dev_id), data, max_version, flags)


def _export_host_copy(u: UOp, device: str, max_version: tuple[int, int] | None, flags: int) -> Any:
    from .realize import readback

    arr = np.ascontiguousarray(readback(u, device))
    if u.dtype == dtypes.bfloat16:  # readback widens bfloat16; send the raw 16-bit values
        from uops.dtypes import f32_to_bf16

        arr = f32_to_bf16(arr)
    strides = tuple(s // arr.itemsize for s in arr.strides)
    return _capsule(arr, shape_of(u), strides, u.dtype, (kDLCPU, 0), arr.ctypes.data or None, max_version, flags)


def _capsule(
    owner: Any,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dt: DType,
    device: tuple[int, int],
    data: int | None,
    max_version: tuple[int, int] | None,
    flags: int,
) -> Any:
    n = len(shape)
    shape_arr = (ctypes.c_int64 * max(n, 1))(*shape)
    # size-1 dims carry stride 0 in a view; DLPack consumers expect the row-major stride there
    row = [1] * n
    for d in range(n - 2, -1, -1):
        row[d] = row[d + 1] * shape[d + 1]
    full = [st if s != 1 else row[d] for d, (s, st) in enumerate(zip(shape, strides))]
    strides_arr = (ctypes.c_int64 * max(n, 1))(*full)
    dl = DLTensor(
        data, DLDevice(*device), n, _dl_dtype(dt), ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64)),
        ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64)), 0,
    )  # fmt: skip
    ctx = next(_export_ids)
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    managed: ctypes.Structure
    if versioned:
        managed = DLManagedTensorVersioned(DLPackVersion(*DLPACK_VERSION), ctx, _deleter, flags, dl)
    else:
        managed = DLManagedTensor(dl, ctx, _deleter)
    _exports[ctypes.addressof(managed)] = (owner, shape_arr, strides_arr, managed)
    name = _VERSIONED if versioned else _LEGACY
    return _py.PyCapsule_New(ctypes.addressof(managed), _NAMES[name], _DESTRUCTORS[name])


# ----- import -----
_NP_OF_CODE = {kDLInt: "i", kDLUInt: "u", kDLFloat: "f"}


def _uops_dtype(d: DLDataType) -> DType:
    if d.lanes != 1:
        raise DLPackError(f"DLPack vector dtypes (lanes={d.lanes}) are not supported")
    if d.code == kDLBool and d.bits == 8:
        return dtypes.bool
    if d.code == kDLBfloat and d.bits == 16:
        return dtypes.bfloat16
    kind = _NP_OF_CODE.get(d.code)
    if kind is not None and d.bits in (8, 16, 32, 64) and not (kind == "f" and d.bits == 8):
        from uops.dtypes import from_numpy

        return from_numpy(np.dtype(f"{kind}{d.bits // 8}"))
    raise DLPackError(f"DLPack dtype (code {d.code}, {d.bits} bits) has no uops equivalent (complex or float8?)")


class _Imported:
    """Calls the producer's deleter once, when the last uops buffer over its memory is garbage."""

    def __init__(self, managed: ctypes.Structure) -> None:
        self.managed = managed
        self.done = False

    def release(self) -> None:
        if not self.done:
            self.done = True
            deleter = self.managed.deleter
            if deleter:
                deleter(ctypes.addressof(self.managed))


def _consume(capsule: Any) -> tuple[DLTensor, int, _Imported]:
    """Take ownership of a capsule's struct (renaming it "used_...", as the protocol says)."""
    name = _py.PyCapsule_GetName(capsule)
    if name == _VERSIONED:
        managed: ctypes.Structure = DLManagedTensorVersioned.from_address(_py.PyCapsule_GetPointer(capsule, name))
        if managed.version.major > DLPACK_VERSION[0]:
            raise DLPackError(f"DLPack {managed.version.major}.{managed.version.minor} is newer than this reader (1.x)")
        flags = int(managed.flags)
    elif name == _LEGACY:
        managed = DLManagedTensor.from_address(_py.PyCapsule_GetPointer(capsule, name))
        flags = 0
    else:
        raise DLPackError(f"not an unused DLPack capsule (its name is {name!r}); a capsule can be consumed only once")
    _py.PyCapsule_SetName(capsule, _USED[name])
    return managed.dl_tensor, flags, _Imported(managed)


def import_dlpack(x: Any, dev: str, copy: bool | None = None) -> UOp:
    """The graph of a tensor on ``dev`` over the memory of any DLPack producer (`Tensor.from_dlpack`).

    CPU memory is aliased, not copied, when it lands on a host-memory device (CPU, PYTHON) and
    ``copy`` is not True; a read-only producer is copied (``copy=False`` then raises). Memory on
    another device, or for another target device, is copied when ``copy`` allows it.
    """
    host_target = host_memory(dev)
    if hasattr(x, "__dlpack__"):
        kw: dict[str, Any] = {"max_version": DLPACK_VERSION}
        if copy is not None:
            kw["copy"] = copy
        if hasattr(x, "__dlpack_device__") and host_target:
            src_dev = tuple(x.__dlpack_device__())
            if src_dev[0] not in (kDLCPU, kDLCUDAHost):
                if copy is False:
                    raise DLPackError(f"memory on DLPack device {src_dev} cannot be aliased on {dev} (copy=False)")
                kw["dl_device"] = (kDLCPU, 0)
        try:
            capsule = x.__dlpack__(**kw)
        except TypeError as e:  # a producer older than DLPack 1.0 takes no keywords
            if "argument" not in str(e):
                raise
            capsule = x.__dlpack__()
    elif type(x).__name__ == "PyCapsule":
        capsule = x
    else:
        raise TypeError(f"from_dlpack needs an object with __dlpack__ (numpy, torch, jax, ...), got {type(x).__name__}")
    dl, flags, owner = _consume(capsule)
    try:
        dt = _uops_dtype(dl.dtype)
        if dl.device.device_type not in (kDLCPU, kDLCUDAHost):
            raise DLPackError(
                f"DLPack device type {dl.device.device_type} memory cannot be read here; export it to the CPU first"
            )
        shape = tuple(dl.shape[i] for i in range(dl.ndim))
        strides = tuple(dl.strides[i] for i in range(dl.ndim)) if dl.strides else None
        n = math.prod(shape)
        ptr = (dl.data or 0) + dl.byte_offset
        if strides is None or n == 0:
            strides = tuple(View.create(shape).strides) if n else (0,) * len(shape)
        lo = sum(st * (s - 1) for s, st in zip(shape, strides) if st < 0) if n else 0
        hi = sum(st * (s - 1) for s, st in zip(shape, strides) if st > 0) if n else -1
        extent = hi - lo + 1
        read_only = bool(flags & FLAG_READ_ONLY)
        alias = host_target and not copy and not read_only
        if read_only and copy is False:
            raise DLPackError("the producer's memory is read-only; uops buffers are writable, so it must be copied")
        if not host_target and copy is False:
            raise DLPackError(f"{dev} memory is not host memory: importing CPU memory there needs a copy")
        raw = (ctypes.c_uint8 * (extent * dt.itemsize)).from_address(ptr + lo * dt.itemsize) if extent else None
        host = np.frombuffer(memoryview(raw), dtype=np.uint8) if raw is not None else np.zeros(0, np.uint8)
        st = ShapeTracker((View.create(shape, strides, -lo),)) if n else ShapeTracker.from_shape(shape)
        if alias:
            weakref.finalize(host, owner.release)
            buf_node = new_buffer(dev, extent, dt)
            _buffers[buf_node] = _wrap(dev, extent, dt, host)
            return UOp(Ops.VIEW, dt, (buf_node,), st)
        flat = host.view(to_numpy(dt)) if extent else np.zeros(0, to_numpy(dt))
        arr = np.lib.stride_tricks.as_strided(
            flat[-lo if n else 0 :], shape, tuple(s * dt.itemsize for s in strides)
        ) if n else flat.reshape(shape)  # fmt: skip
        out = _from_host(np.array(arr, copy=True), dt, dev)
        owner.release()
        return out
    except BaseException:
        owner.release()
        raise


def _wrap(dev: str, size: int, dt: DType, host: np.ndarray) -> Any:
    from uops.runtime import Buffer

    return Buffer.wrap(device_handle(dev).runtime, size, dt, host)


def _from_host(arr: np.ndarray, dt: DType, dev: str) -> UOp:
    from .realize import upload

    if dt == dtypes.bfloat16:
        from uops.dtypes import bf16_to_f32

        arr = bf16_to_f32(arr)
    return upload(arr, dt, dev)
