"""Execution: host data in and out, device buffers for tensor-level BUFFER nodes, compiled-program caches,
running schedules.

A kernel AST is hash-consed, so the same computation on other buffers is the same object: the
lowered, compiled and loaded program is cached per (ast, device) and a second run costs only
launches.
"""

from __future__ import annotations

import os
import sys
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from uops.compiler import compile_workers, positive_int_from_env
from uops.compiler.cache import LRU
from uops.dtypes import SCALARS, DType, bf16_to_f32, dtypes, f32_to_bf16, to_numpy
from uops.ir.ops import Ops
from uops.ir.uop import UOp
from uops.renderer import DTypeNotSupportedError

from .schedule import Schedule, ScheduleItem, buffer_view, create_schedule, new_buffer, realized, shape_of

if TYPE_CHECKING:
    from uops.runtime import Buffer

#: tensor-level BUFFER node -> its device Buffer (freed when the node is garbage)
_buffers: weakref.WeakKeyDictionary[UOp, Buffer] = weakref.WeakKeyDictionary()
#: host data waiting to be copied into a BUFFER node's device memory on first use
pending: weakref.WeakKeyDictionary[UOp, np.ndarray] = weakref.WeakKeyDictionary()
#: (kernel AST, device) -> (ProgramSpec, loaded Program, global size, local size), the most recently used
#: ``UOPS_PROGRAM_CACHE`` (default 256) kept loaded; one that falls out is unloaded once unreferenced
_programs: LRU[tuple[UOp, str], tuple[Any, Any, tuple[int, ...], tuple[int, ...]]] = LRU(
    positive_int_from_env("UOPS_PROGRAM_CACHE", 256)
)
#: while the JIT captures a call (``frontend/jit.py``): told of every allocation, launch, copy and host readback
recorder: Any = None


def device_handle(device: str) -> Any:
    from uops.plugins import Device

    return Device[device]


_dtype_ok: set[tuple[str, DType]] = set()


def _unsupported(device: str) -> frozenset[DType]:
    return getattr(device_handle(device).renderer, "unsupported_dtypes", frozenset())


def check_dtype(device: str, dtype: DType) -> None:
    """Raise a clear error when ``device`` cannot hold or compute ``dtype``."""
    if (device, dtype) in _dtype_ok:
        return
    bad = _unsupported(device)
    if dtype.scalar() in bad:
        ok = sorted(d.name for d in SCALARS if d not in bad)
        raise DTypeNotSupportedError(
            f"device {device} does not support dtype {dtype.name}; cast to one of {', '.join(ok)} "
            f"or use another device (e.g. PYTHON)"
        )
    _dtype_ok.add((device, dtype))


def get_buffer(b: UOp) -> Buffer:
    """The device Buffer of a BUFFER node, allocating it (and copying pending host data) on first use."""
    if b.op is not Ops.BUFFER:
        raise TypeError(f"expected a BUFFER node, got {b.op}")
    buf = _buffers.get(b)
    if buf is None:
        from uops.runtime import Buffer

        device, size, _ = b.arg
        check_dtype(device, b.dtype)
        buf = Buffer(device_handle(device).runtime, size, b.dtype)
        data = pending.pop(b, None)
        if data is not None:
            buf.copyin(data)
        _buffers[b] = buf
        if recorder is not None:
            recorder.allocated(buf, data)
    return buf


def buffer_numpy(b: UOp) -> np.ndarray:
    """The flat host contents of a BUFFER node (no device round trip for data not yet uploaded)."""
    if recorder is not None:
        recorder.readback(b)
    data = pending.get(b)
    if data is not None and b not in _buffers:
        return data.copy()
    return get_buffer(b).numpy()


def beam_width(beam: int | None = None) -> int:
    """The BEAM width: ``beam`` if given, else ``UOPS_BEAM`` (0: the default heuristics, no search)."""
    if beam is not None:
        return beam
    env = os.environ.get("UOPS_BEAM", "").strip() or "0"
    try:
        return int(env)
    except ValueError:
        raise ValueError(f"UOPS_BEAM must be an integer (the beam width), got {env!r}") from None


def get_runner(ast: UOp, device: str, beam: int | None = None) -> tuple[Any, Any, tuple[int, ...], tuple[int, ...]]:
    """(ProgramSpec, loaded Program, global size, local size) for a kernel on a device, compiled once.

    The opts are the default heuristics', or BEAM search's with ``beam`` (or ``UOPS_BEAM``) > 0."""
    key = (ast, device)
    hit = _programs.get(key)
    if hit is not None:
        return hit
    from uops.codegen.program import get_program

    dev = device_handle(device)
    opts = None
    if (width := beam_width(beam)) > 0:
        from uops.codegen.search import beam_search

        opts = beam_search(ast, device, dev.renderer, dev.compiler, dev.runtime, width)
    spec = get_program(ast, dev.renderer, dev.compiler, opts)
    prog = dev.runtime.load(spec.name, spec.lib)
    gsz, lsz = spec.launch_dims()
    hit = (spec, prog, gsz, lsz)
    _programs.put(key, hit)
    return hit


def compile_schedule(items: list[ScheduleItem]) -> None:
    """Compile every kernel of a schedule that is not loaded yet, concurrently, before any of them runs.

    Why: the first call of a new computation waits on one compiler subprocess per kernel; threads
    overlap those waits with each other and with the lowering of the next kernel. Each kernel's
    dtypes are checked first, in schedule order, and the first kernel that fails (in schedule order,
    not in finishing order) raises its own error. BEAM search is left to ``run_item``: it times
    candidates on the device and must not share it.
    """
    todo: dict[tuple[UOp, str], None] = {}
    for item in items:
        if item.kind == "copy" or item.ast is None:
            continue
        for b in item.bufs:
            check_dtype(item.device, b.dtype)
        if (item.ast, item.device) not in _programs:
            todo[(item.ast, item.device)] = None
    if len(todo) < 2:  # nothing to overlap: a repeated op has every kernel loaded already
        return
    workers = compile_workers(len(todo))
    if workers < 2 or beam_width() > 0:
        return
    for device in {d for _, d in todo}:  # load the plugin's pieces here, not in several threads at once
        dev = device_handle(device)
        dev.renderer, dev.compiler, dev.runtime  # noqa: B018
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="uops-compile") as pool:
        futures = [pool.submit(get_runner, ast, device) for ast, device in todo]
    for f in futures:
        f.result()


def run_item(item: ScheduleItem) -> None:
    if item.kind == "copy":
        from uops.runtime import copy_between

        dst, src = item.bufs
        sbuf = _buffers.get(src)
        if sbuf is None and src in pending:
            # host data never uploaded: send it straight to the target device
            data = pending[src]
            dbuf = get_buffer(dst)
            dbuf.copyin(data)
            if recorder is not None:
                recorder.upload(data, dbuf)
            return
        sbuf, dbuf = get_buffer(src), get_buffer(dst)
        copy_between(sbuf, dbuf)
        if recorder is not None:
            recorder.copy(sbuf, dbuf)
        return
    assert item.ast is not None  # its dtypes were checked by compile_schedule, before any item ran
    spec, prog, gsz, lsz = get_runner(item.ast, item.device)
    bufs = [get_buffer(b) for b in item.bufs]
    args = [b.handle for b in bufs]
    vals = spec.vals(item.var_vals) if spec.vars else ()
    if recorder is not None:
        recorder.launch(spec, prog, gsz, lsz, bufs, item.var_vals)
    if debug_level() < 2:
        done = prog(*args, global_size=gsz, local_size=lsz, vals=vals)
        for b in bufs:
            b.after(done)
        return
    t = prog(*args, global_size=gsz, local_size=lsz, vals=vals, wait=True) or 0.0
    est = spec.estimates
    gflops = est.ops / t / 1e9 if t > 0 else 0.0
    gbs = (est.bytes_read + est.bytes_written) / t / 1e9 if t > 0 else 0.0
    print(
        f"{item.device:8s} {spec.name:28s} {t * 1e3:9.3f} ms {gflops:8.2f} GFLOP/s {gbs:8.2f} GB/s  opts={spec.opts}",
        file=sys.stderr,
    )


def debug_level() -> int:
    """``UOPS_DEBUG``: 2 prints each launched kernel with its opts, time, GFLOP/s and GB/s."""
    try:
        return int(os.environ.get("UOPS_DEBUG", "0") or 0)
    except ValueError:
        return 0


def run_schedule(sched: Schedule) -> None:
    """Compile the kernels not loaded yet (concurrently), run every item in order, then record which lazy
    nodes now have buffers."""
    compile_schedule(sched.items)
    for item in sched.items:
        run_item(item)
    for n, v in sched.done.items():
        realized[n] = v
    # output buffers of 0-size results still need a (0-element) Buffer to exist
    for v in sched.root_views:
        b = v.src[0] if v.op is Ops.VIEW else v
        if b.op is Ops.BUFFER and b.arg[1] == 0 and b not in _buffers and b not in pending:
            pending[b] = np.empty(0, dtype=to_numpy(b.dtype))


def realize(roots: list[UOp], default_device: str) -> list[UOp]:
    """Compute ``roots`` now; returns the VIEW(BUFFER) holding each one's value."""
    if all(r.op is Ops.VIEW and r.src[0].op is Ops.BUFFER and r.src[0].arg[1] for r in roots):
        return list(roots)  # already realized: nothing to schedule or run
    sched = create_schedule(roots, default_device)
    run_schedule(sched)
    return sched.root_views


def _host_buffer(device: str, size: int, dtype: DType) -> Buffer | None:
    """A new buffer in host memory to fill now, or None where the data must wait as a host copy: the device's
    runtime is not loaded yet (creating a tensor never loads a driver), its memory is not the host's, the dtype
    is one the device refuses (that error comes at first use), or a ``jit`` capture records the upload."""
    from uops.runtime import Buffer, HostAllocator

    if recorder is not None or size == 0:
        return None
    runtime = device_handle(device).loaded_runtime
    if runtime is None or not isinstance(runtime.allocator, HostAllocator):
        return None
    if (device, dtype) not in _dtype_ok and dtype.scalar() in _unsupported(device):
        return None
    return Buffer(runtime, size, dtype)


def upload(arr: np.ndarray, dtype: DType, device: str) -> UOp:
    """A host array as a tensor-level buffer view of ``dtype``, copied now: straight into the buffer where the
    device's memory is the host's (one copy), else into a host copy sent to the device on first use."""
    if dtype == dtypes.bfloat16:
        host = f32_to_bf16(np.asarray(arr, dtype=np.float32))
    else:
        host = np.asarray(arr).astype(to_numpy(dtype), copy=False)
    host = np.ascontiguousarray(host).reshape(-1)
    buf = new_buffer(device, host.size, dtype)
    mem = _host_buffer(device, host.size, dtype)
    if mem is not None:
        _buffers[buf] = mem.copyin(host)
    else:
        pending[buf] = np.array(host, copy=True)  # never alias the caller's array
    return buffer_view(buf, tuple(arr.shape))


def readback(u: UOp, default_device: str) -> np.ndarray:
    """The value of a tensor-level node as a host array of its shape (bfloat16 comes back as float32)."""
    (v,) = realize([u], default_device)
    st = v.arg
    if not (st.contiguous and st.size == v.src[0].arg[1]):
        (v,) = realize([UOp(Ops.CONTIGUOUS, v.dtype, (v,))], default_device)
    flat = buffer_numpy(v.src[0])
    if u.dtype == dtypes.bfloat16:
        flat = bf16_to_f32(flat)
    return flat.reshape(shape_of(u))
