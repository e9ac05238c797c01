"""The PYTHON runtime: executes linear uops over numpy, all threads of the launch in lockstep.

Every value is an array over the launch's threads (or a scalar, when uniform), so a barrier
is satisfied by construction and a loop runs its body once per iteration for every thread.
Out-of-bounds accesses raise instead of reading garbage: this is the reference backend.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np

from uops.dtypes import DType, PtrDType, bf16_to_f32, dtypes, f32_to_bf16, to_numpy
from uops.errors import UopsError
from uops.ir.alu import ALU, eval_array
from uops.ir.ops import AxisType, GroupOp, Ops
from uops.ir.serialize import uops_from_data
from uops.ir.uop import UOp
from uops.runtime import Allocator, HostAllocator, Launch, LaunchProgram, ProgramLoadError, Runtime

_PLUGIN = __name__.rpartition(".")[0]  # uops.backends.python, as ProgramLoadError names a plugin


class InterpreterError(UopsError, RuntimeError):
    """The program did something undefined (out-of-bounds access, unknown op)."""


def _np(dt: DType) -> np.dtype:
    """Compute dtype: bfloat16 values are computed in float32 and rounded after each op."""
    return np.dtype(np.float32) if dt.scalar() == dtypes.bfloat16 else to_numpy(dt.scalar())


def _round(x: Any, dt: DType) -> np.ndarray:
    arr = np.asarray(x).astype(_np(dt), copy=False)
    if dt.scalar() == dtypes.bfloat16:
        arr = bf16_to_f32(f32_to_bf16(arr))
    return arr


def _alu(op: Ops, dt: DType, srcs: list[np.ndarray]) -> np.ndarray:
    """The ALU table's array semantics, rounded to the result dtype (comparisons stay bool)."""
    if op not in ALU:
        raise InterpreterError(f"the PYTHON backend has no definition of {op.name}; this is a bug")
    with np.errstate(all="ignore"):
        out = eval_array(op, srcs)
    return out if op in GroupOp.Comparison else _round(out, dt)


def _cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dst == dtypes.bool:
            return np.not_equal(x, 0)
        if dtypes.is_int(dst) and dtypes.is_float(src):
            x = np.trunc(x)
            x = np.where(np.isfinite(x), x, 0)
            info = np.iinfo(to_numpy(dst)) if dst.itemsize < 8 else None
            if info is not None:
                # C leaves out-of-range float->int undefined; wrap like the hardware's 64-bit convert
                return x.astype(np.int64).astype(to_numpy(dst))
            return x.astype(to_numpy(dst))
        return _round(x, dst)


class _Ptr:
    """A pointer value: an array, per-thread element indices, an optional gate."""

    __slots__ = ("arr", "idx", "gate", "rows")

    def __init__(self, arr: np.ndarray, idx: np.ndarray, gate: np.ndarray | None, rows: np.ndarray | None) -> None:
        # rows: per thread, its row of a register file (one per thread) or of local memory (one per workgroup)
        self.arr, self.idx, self.gate, self.rows = arr, idx, gate, rows

    @property
    def per_thread(self) -> bool:
        return self.rows is not None


class PythonProgram(LaunchProgram):
    def __init__(self, name: str, lib: bytes) -> None:
        try:
            data = json.loads(lib)
            self.uops: list[UOp] = uops_from_data(data["program"])
        except (ValueError, KeyError, TypeError) as e:
            raise ProgramLoadError(_PLUGIN, name, f"not a serialised PYTHON program: {e}") from e
        if data.get("name") != name:
            found = f"this binary holds kernel {data.get('name')!r}, not {name!r}"
            raise ProgramLoadError(_PLUGIN, name, found) from InterpreterError(found)
        self.name = name
        self.ends: dict[int, int] = {}
        self.starts: dict[int, int] = {}
        pos = {u: i for i, u in enumerate(self.uops)}
        for i, u in enumerate(self.uops):
            if u.op is Ops.END:
                start = pos[u.src[-1]]
                self.ends[start], self.starts[i] = i, start
        self.n_globals = sum(1 for u in self.uops if u.op is Ops.DEFINE_GLOBAL)

    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | None:
        t0 = time.perf_counter()
        if len(bufs) != self.n_globals:
            raise InterpreterError(f"kernel {self.name} takes {self.n_globals} buffers, got {len(bufs)}")
        self._run(bufs, tuple(kw["global_size"]), tuple(kw["local_size"]), kw["vals"])
        return time.perf_counter() - t0 if kw["wait"] else None

    def _run(self, bufs: tuple[Any, ...], gsz: tuple[int, ...], lsz: tuple[int, ...], vals: tuple[int, ...]) -> None:
        gsz = (*gsz, 1, 1, 1)[:3]
        lsz = (*lsz, 1, 1, 1)[:3]
        n = math.prod(gsz) * math.prod(lsz)
        tid = np.arange(n, dtype=np.int64)
        group = math.prod(lsz)  # threads per workgroup: the lidx vary fastest
        special: dict[str, np.ndarray] = {}
        rest = tid
        for d in range(3):
            special[f"lidx{d}"] = (rest % lsz[d]).astype(np.int32)
            rest = rest // lsz[d]
        for d in range(3):
            special[f"gidx{d}"] = (rest % gsz[d]).astype(np.int32)
            rest = rest // gsz[d]
        var_names = sorted(u.arg[0] for u in self.uops if u.op is Ops.DEFINE_VAR)
        if len(vals) != len(var_names):
            raise InterpreterError(f"kernel {self.name} takes variables {var_names}, got {len(vals)} values")
        var_vals = dict(zip(var_names, vals))
        v: dict[UOp, Any] = {}
        counters: dict[int, int] = {}
        uops = self.uops
        pc = 0
        while pc < len(uops):
            u = uops[pc]
            op, dt, src = u.op, u.dtype, u.src
            if op is Ops.DEFINE_GLOBAL:
                assert isinstance(dt, PtrDType)
                v[u] = bufs[u.arg].view(to_numpy(dt.base))
            elif op is Ops.DEFINE_VAR:
                v[u] = np.asarray(var_vals[u.arg[0]], dtype=_np(dt))
            elif op is Ops.DEFINE_REG:
                assert isinstance(dt, PtrDType)
                v[u] = np.zeros((n, dt.size), dtype=_np(dt.base))
            elif op is Ops.DEFINE_LOCAL:
                assert isinstance(dt, PtrDType)
                v[u] = np.zeros((n // group, dt.size), dtype=_np(dt.base))
            elif op is Ops.CONST:
                v[u] = np.asarray(u.arg, dtype=_np(dt))
            elif op is Ops.SPECIAL:
                v[u] = special[u.arg].astype(_np(dt), copy=False)
            elif op is Ops.AFTER:
                v[u] = v[src[0]]
            elif op is Ops.RANGE:
                end = int(np.asarray(v[src[0]]).reshape(-1)[0]) if np.ndim(v[src[0]]) else int(v[src[0]])
                i = counters.get(pc, -1) + 1 if pc in counters and counters[pc] >= 0 else 0
                if i >= end:
                    counters.pop(pc, None)
                    pc = self.ends[pc] + 1
                    continue
                counters[pc] = i
                v[u] = np.asarray(i, dtype=_np(dt))
            elif op is Ops.END:
                start = self.starts[pc]
                end = int(v[uops[start].src[0]])
                if counters[start] + 1 < end:
                    pc = start
                    continue
                counters.pop(start)
            elif op is Ops.INDEX:
                base = v[src[0]]
                gate = np.broadcast_to(v[src[2]], (n,)) if len(src) == 3 else None
                root = _root_op(src[0])
                rows = tid if root is Ops.DEFINE_REG else tid // group if root is Ops.DEFINE_LOCAL else None
                v[u] = _Ptr(base, np.broadcast_to(v[src[1]], (n,)).astype(np.int64), gate, rows)
            elif op is Ops.LOAD:
                p: _Ptr = v[src[0]]
                idx = p.idx if p.gate is None else np.where(p.gate, p.idx, 0)
                # only lanes whose gate is true dereference (they must be in bounds); the others read
                # element 0 as a stand-in, or nothing at all from an empty buffer
                if dt.count > 1:  # a vector load: dt.count consecutive elements from the index on
                    lanes = np.arange(dt.count, dtype=np.int64)
                    idx = idx[:, None] + lanes
                    self._check_bounds(p, (p.idx if p.gate is None else p.idx[p.gate])[:, None] + lanes, u)
                else:
                    self._check_bounds(p, p.idx if p.gate is None else p.idx[p.gate], u)
                if p.arr.shape[-1] == 0:
                    raw = np.zeros(idx.shape, dtype=p.arr.dtype)
                elif p.rows is not None:
                    raw = p.arr[p.rows, idx]
                else:
                    raw = p.arr[idx]
                if not p.per_thread and dt.scalar() == dtypes.bfloat16:
                    raw = bf16_to_f32(raw)
                raw = raw.astype(_np(dt), copy=False)
                gate = p.gate if p.gate is None or dt.count == 1 else p.gate[:, None]
                v[u] = raw if gate is None else np.where(gate, raw, v[src[1]]).astype(_np(dt))
            elif op is Ops.STORE:
                p = v[src[0]]
                count = src[1].dtype.count  # a vector store writes count consecutive elements from the index on
                val = np.broadcast_to(v[src[1]], (n,) if count == 1 else (n, count))
                sel = np.ones(n, dtype=bool) if p.gate is None else p.gate.copy()
                idx = p.idx[sel] if count == 1 else p.idx[sel][:, None] + np.arange(count, dtype=np.int64)
                self._check_bounds(p, idx, u)
                if p.rows is not None:
                    p.arr[p.rows[sel], idx] = val[sel]
                else:
                    store_dt = src[1].dtype
                    out = f32_to_bf16(val[sel]) if store_dt.scalar() == dtypes.bfloat16 else val[sel]
                    p.arr[idx] = out
            elif op is Ops.BARRIER:
                pass  # all threads run in lockstep: every earlier uop has finished for every thread
            elif op is Ops.CAST:
                v[u] = _cast(np.asarray(v[src[0]]), src[0].dtype, dt)
            elif op is Ops.BITCAST:
                v[u] = np.asarray(v[src[0]]).astype(to_numpy(src[0].dtype)).view(to_numpy(dt))
            elif op is Ops.VECTORIZE:
                v[u] = np.stack([np.broadcast_to(v[s], (n,)) for s in src], axis=-1)
            elif op is Ops.GEP:
                x = v[src[0]]
                v[u] = x[..., u.arg[0]] if len(u.arg) == 1 else x[..., list(u.arg)]
            else:
                v[u] = _alu(op, dt, [np.asarray(v[s]) for s in src])
            pc += 1

    def _check_bounds(self, p: _Ptr, idx: np.ndarray, u: UOp) -> None:
        size = p.arr.shape[-1]
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            bad = idx[(idx < 0) | (idx >= size)][0]
            raise InterpreterError(f"kernel {self.name}: {u.op.name} at element {bad} of a buffer of {size} elements")


def _root_op(u: UOp) -> Ops:
    while u.op is Ops.AFTER:
        u = u.src[0]
    return u.op


class PythonRuntime(Runtime):
    device = "PYTHON"

    def __init__(self) -> None:
        self.allocator: Allocator = HostAllocator()

    def load(self, name: str, lib: bytes) -> PythonProgram:
        return PythonProgram(name, lib)


__all__ = ["AxisType", "PythonProgram", "PythonRuntime"]
