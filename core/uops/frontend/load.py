"""``load_program``: the one checked entry point for saved ProgramSpecs.

Why: a saved spec is launched by native code that trusts its arguments. Called with too few
buffers, a buffer that is too small, or launch sizes the kernel was not built for, it reads and
writes out of bounds. The loader checks every launch against the spec before it reaches the
device: the buffer count, each slot's dtype and size (the elements the kernel can touch, bounded
from the index expressions of its own uops with the IR's value ranges, gates included), the
variables and the launch dimensions (they must match the kernel's launch indices).

The spec's ``lib`` is native code: load specs only from a source you trust, as you would a
wheel; ``sha256=`` pins the exact file (or ``lib``) you reviewed.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from uops.codegen.program import ProgramSpec
from uops.compiler.cache import read_regular_file
from uops.dtypes import DType, PtrDType, dtypes, to_numpy
from uops.ir.ops import Ops
from uops.ir.spec import verify
from uops.ir.uop import UOp
from uops.plugins import Device
from uops.runtime import Buffer, Event, Runtime

__all__ = ["LoadedProgram", "load_program"]

MAX_SPEC_BYTES = 1 << 30
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")


def load_program(
    spec_or_path: ProgramSpec | str | os.PathLike[str], *, sha256: str | None = None, runtime: Runtime | None = None
) -> LoadedProgram:
    """A checked, launchable program from a ProgramSpec or a saved spec file (``ProgramSpec.to_json``).

    ``sha256`` (hex) pins the file's bytes, or ``spec.lib`` for a spec object; a mismatch raises
    before anything is parsed or loaded. ``runtime`` defaults to the runtime of the spec's device.
    """
    if isinstance(spec_or_path, ProgramSpec):
        spec, pinned, what = spec_or_path, spec_or_path.lib, f"the lib of kernel {spec_or_path.name!r}"
    elif isinstance(spec_or_path, str | os.PathLike):
        path = os.fspath(spec_or_path)
        data = read_regular_file(path, MAX_SPEC_BYTES, follow_symlinks=True)
        pinned, what = data, path
    else:
        raise TypeError(
            f"load_program takes a ProgramSpec or a path to a saved spec, got {type(spec_or_path).__name__}"
        )
    if sha256 is not None:
        _check_pin(pinned, sha256, what)
    if not isinstance(spec_or_path, ProgramSpec):
        try:
            spec = ProgramSpec.from_json(data.decode())
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise ValueError(f"{path} is not a saved ProgramSpec: {type(e).__name__}: {e}") from None
    return LoadedProgram(spec, runtime)


def _check_pin(data: bytes, sha256: str, what: str) -> None:
    if not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256):
        raise ValueError(f"sha256 must be 64 hex digits, got {sha256!r}")
    got = hashlib.sha256(data).hexdigest()
    if not hmac.compare_digest(got, sha256.lower()):
        raise ValueError(f"sha256 of {what} is {got}, not the pinned {sha256.lower()}: refusing to load it")


# ---------------------------------------------------------------------------------------
# what the kernel touches


@dataclass(frozen=True)
class _Access:
    buf: int | UOp  # a global buffer's slot, or the DEFINE_LOCAL / DEFINE_REG itself
    index: UOp  # element index into the slot's buffer
    gate: UOp | None  # the access happens only where this is true
    width: int  # elements per access
    store: bool


def _root(buf: UOp) -> UOp:
    while buf.op is Ops.AFTER:
        buf = buf.src[0]
    return buf


def _accesses(uops: list[UOp]) -> list[_Access]:
    out = []
    for u in uops:
        if u.op not in (Ops.LOAD, Ops.STORE):
            continue
        idx = u.src[0]
        if idx.op is not Ops.INDEX:
            raise ValueError(f"cannot bound a {u.op.name} whose address is a {idx.op.name}, not an INDEX")
        buf = _root(idx.src[0])
        if not isinstance(buf.dtype, PtrDType) or buf.op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG):
            raise ValueError(f"cannot bound a {u.op.name} of a {buf.op.name}: not a declared buffer")
        val = u if u.op is Ops.LOAD else u.src[1]
        width = max(1, val.dtype.count // max(1, buf.dtype.base.count))
        gate = idx.src[2] if len(idx.src) > 2 else None
        key = buf.arg if buf.op is Ops.DEFINE_GLOBAL else buf
        out.append(_Access(key, idx.src[1], gate, width, u.op is Ops.STORE))
    return out


def _clauses(g: UOp) -> list[UOp]:
    if g.op is Ops.AND and g.dtype == dtypes.bool:
        return _clauses(g.src[0]) + _clauses(g.src[1])
    return [g]


def _bound(clause: UOp) -> tuple[UOp, float, float] | None:
    """``(e, lo, hi)`` with ``lo <= e <= hi`` wherever ``clause`` holds, for the forms masks take."""
    negate = False
    if clause.op is Ops.CMPNE and clause.src[1].op is Ops.CONST and clause.src[1].arg is True:
        clause, negate = clause.src[0], True
    if clause.op is not Ops.CMPLT or not dtypes.is_int(clause.src[0].dtype):
        return None
    a, b = clause.src
    if b.vmin == b.vmax:  # a < c (or, negated, a >= c)
        c = int(b.vmin)
        return (a, c, math.inf) if negate else (a, -math.inf, c - 1)
    if a.vmin == a.vmax:  # c < b (or, negated, b <= c)
        c = int(a.vmin)
        return (b, -math.inf, c) if negate else (b, c + 1, math.inf)
    return None


def _touched(accesses: list[_Access], bind: dict[UOp, UOp]) -> tuple[dict[int | UOp, int], dict[int | UOp, int]]:
    """(buffer -> elements the kernel can touch, buffer -> lowest index it can touch), vars bound by ``bind``."""
    need: dict[int | UOp, int] = {}
    low: dict[int | UOp, int] = {}
    for n, acc in enumerate(accesses):
        idx = acc.index.substitute(bind)
        if acc.gate is not None:
            # wherever the access happens its gate holds: narrow the gated sub-expressions of the index
            bounds: dict[UOp, tuple[float, float]] = {}
            for clause in _clauses(acc.gate.substitute(bind)):
                b = _bound(clause)
                if b is not None:
                    e, lo, hi = b
                    plo, phi = bounds.get(e, (e.vmin, e.vmax))
                    bounds[e] = (max(lo, plo), min(hi, phi))
            if any(lo > hi for lo, hi in bounds.values()):
                continue  # the gate is never true
            narrowed = {
                e: UOp(Ops.DEFINE_VAR, e.dtype, (), (f"__gate{n}_{k}", int(lo), int(hi)))
                for k, (e, (lo, hi)) in enumerate(bounds.items())
            }
            idx = idx.substitute(narrowed)
        if any(u.op in (Ops.RANGE, Ops.SPECIAL) and u.src[0].vmax <= 0 for u in idx.toposort()):
            continue  # inside a loop that runs zero times
        lo_i, hi_i = int(idx.vmin), int(idx.vmax)
        need[acc.buf] = max(need.get(acc.buf, 0), hi_i + acc.width)
        low[acc.buf] = min(low.get(acc.buf, lo_i), lo_i)
    return need, low


# ---------------------------------------------------------------------------------------
# the loaded program


def _ints(x: object) -> bool:
    return isinstance(x, list | tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)


def _check_fields(spec: ProgramSpec) -> None:
    """The plain fields have the types the checks rely on (a spec may come from an edited file)."""
    for field, ok in (
        ("device", isinstance(spec.device, str)),
        ("lib", isinstance(spec.lib, bytes)),
        ("outs", _ints(spec.outs)),
        ("ins", _ints(spec.ins)),
        ("local_size", _ints(spec.local_size)),
        ("global_size", isinstance(spec.global_size, tuple) and all(isinstance(g, UOp) for g in spec.global_size)),
        ("uops", isinstance(spec.uops, list) and all(isinstance(u, UOp) for u in spec.uops)),
        ("vars", isinstance(spec.vars, list) and all(isinstance(v, UOp) and v.op is Ops.DEFINE_VAR for v in spec.vars)),
        ("buffers", isinstance(spec.buffers, dict)),
    ):
        if not ok:
            raise ValueError(f"kernel {spec.name!r}: the spec's {field} is malformed: {getattr(spec, field)!r:.80}")


class LoadedProgram:
    """A ProgramSpec loaded on its device; calling it checks the launch, then runs it.

    ``prog(*arrays_or_buffers, **vars)``: one argument per buffer slot, in slot order (numpy
    arrays are uploaded and, for the slots the kernel writes, read back into the array; uops
    ``Buffer``s on the spec's device are used as they are), then the kernel's variables by name.
    """

    def __init__(self, spec: ProgramSpec, runtime: Runtime | None = None) -> None:
        if not isinstance(spec.name, str) or not _NAME_RE.fullmatch(spec.name):
            raise ValueError(f"kernel name {spec.name!r} is not an identifier of at most 128 characters")
        _check_fields(spec)
        verify(spec.uops, "linear")  # SpecError (a ValueError) naming the first malformed node
        self.spec = spec
        self.slots = self._slots(spec)
        self._accesses = _accesses(spec.uops)
        for what, listed, store in (("outs", spec.outs, True), ("ins", spec.ins, False)):
            code = sorted({a.buf for a in self._accesses if a.store is store and isinstance(a.buf, int)})
            if sorted(listed) != code:
                verb = "writes" if store else "reads"
                raise ValueError(f"kernel {spec.name}: the spec lists {what} {list(listed)}, the code {verb} {code}")
        self.outs = frozenset(spec.outs)
        self._specials = self._launch_indices(spec)
        declared = {v.arg[0] for v in spec.vars}
        used = {u.arg[0] for u in spec.uops if u.op is Ops.DEFINE_VAR}
        if used - declared:
            raise ValueError(f"kernel {spec.name} uses variables {sorted(used - declared)} the spec does not declare")
        self.runtime = runtime if runtime is not None else Device[spec.device].runtime
        self.device = self.runtime.device
        self.program = self.runtime.load(spec.name, spec.lib)
        self._sizes: dict[tuple[int, ...], tuple[dict[int, int], tuple[int, ...], tuple[int, ...]]] = {}

    @staticmethod
    def _slots(spec: ProgramSpec) -> list[DType]:
        glob = {u.arg: u.dtype for u in spec.uops if u.op is Ops.DEFINE_GLOBAL}
        if sorted(glob) != list(range(len(glob))):
            raise ValueError(f"kernel {spec.name}: buffer slots {sorted(glob)} are not numbered 0..{len(glob) - 1}")
        slots: list[DType] = []
        for i in range(len(glob)):
            pt = glob[i]
            if not isinstance(pt, PtrDType):
                raise ValueError(f"kernel {spec.name}: slot {i} is declared as {pt!r}, not a pointer")
            if spec.buffers.get(i) != pt.base.name:
                said = spec.buffers.get(i)
                raise ValueError(f"kernel {spec.name}: the spec says slot {i} holds {said!r}, the uops {pt.base.name}")
            slots.append(pt.base)
        return slots

    @staticmethod
    def _launch_indices(spec: ProgramSpec) -> dict[tuple[str, int], UOp]:
        out: dict[tuple[str, int], UOp] = {}
        for u in spec.uops:
            if u.op is not Ops.SPECIAL:
                continue
            m = re.fullmatch(r"(gidx|lidx)([0-2])", str(u.arg))
            if m is None:
                raise ValueError(f"kernel {spec.name}: launch index {u.arg!r} is not gidx0-2 or lidx0-2")
            out[(m.group(1), int(m.group(2)))] = u.src[0]
        if len(spec.global_size) > 3 or len(spec.local_size) > 3:
            raise ValueError(f"kernel {spec.name}: more than 3 launch dimensions")
        return out

    # ---- checks

    @property
    def signature(self) -> str:
        """The slots, for error messages: ``0: float32 written, 1: float32 read``."""
        parts = []
        for i, dt in enumerate(self.slots):
            role = "written" if i in self.outs else "read"
            parts.append(f"{i}: {dt.name} {role}")
        return ", ".join(parts)

    def _vals(self, var_vals: dict[str, Any]) -> tuple[int, ...]:
        names = self.spec.var_names
        extra = sorted(set(var_vals) - set(names))
        if extra:
            raise TypeError(f"kernel {self.spec.name} has no variable {extra[0]!r}; its variables are {names}")
        for k, v in var_vals.items():
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise TypeError(f"kernel {self.spec.name}: variable {k}={v!r} must be an int")
        return self.spec.vals({k: int(v) for k, v in var_vals.items()})

    def _checked(self, vals: tuple[int, ...]) -> tuple[dict[int, int], tuple[int, ...], tuple[int, ...]]:
        hit = self._sizes.get(vals)
        if hit is not None:
            return hit
        spec = self.spec
        var_vals = dict(zip(spec.var_names, vals))
        gsz, lsz = spec.launch_dims(var_vals)
        bind = {v: UOp.const(v.dtype, var_vals[v.arg[0]]) for v in spec.vars}
        for kind, sizes in (("gidx", gsz), ("lidx", lsz)):
            for d in range(3):
                ext = self._specials.get((kind, d))
                if ext is None:
                    want = 1
                else:
                    ext = ext.substitute(bind)
                    if ext.vmin != ext.vmax:
                        raise ValueError(f"kernel {spec.name}: cannot evaluate the extent of {kind}{d}: {ext}")
                    want = int(ext.vmax)
                if sizes[d] != want:
                    what = "global_size" if kind == "gidx" else "local_size"
                    raise ValueError(
                        f"kernel {spec.name}: {what}[{d}] is {sizes[d]} but the kernel was built for {want} "
                        f"({kind}{d}); the spec's launch dimensions do not match its code"
                    )
        touched, low = _touched(self._accesses, bind)
        for buf, lo in low.items():
            what = f"slot {buf}" if isinstance(buf, int) else f"its {buf.op.name} {buf.arg}"
            if lo < 0:
                raise ValueError(f"kernel {spec.name}: {what} may be indexed at {lo}, before its first element")
            size = buf.dtype.size if isinstance(buf, UOp) and isinstance(buf.dtype, PtrDType) else None
            if size is not None and touched[buf] > size:
                raise ValueError(f"kernel {spec.name}: {what} holds {size} elements, its code may touch {touched[buf]}")
        need = {k: n for k, n in touched.items() if isinstance(k, int)}
        out = (need, gsz, lsz)
        if len(self._sizes) < 64:
            self._sizes[vals] = out
        return out

    def buffer_sizes(self, **var_vals: int) -> list[int]:
        """The elements each slot must hold for a launch with these variables."""
        need, _, _ = self._checked(self._vals(var_vals))
        return [need.get(i, 0) for i in range(len(self.slots))]

    # ---- launch

    def __call__(self, *args: np.ndarray | Buffer, **var_vals: int) -> None:
        spec = self.spec
        if len(args) != len(self.slots):
            raise TypeError(f"kernel {spec.name} takes {len(self.slots)} buffers ({self.signature}), got {len(args)}")
        vals = self._vals(var_vals)
        need, gsz, lsz = self._checked(vals)
        handles: list[Any] = []
        readback: list[tuple[np.ndarray, Buffer]] = []
        staged: list[Buffer] = []  # the copies of numpy arguments: alive until the launch is done, then freed
        for slot, (arg, dt) in enumerate(zip(args, self.slots)):
            where = f"kernel {spec.name}, slot {slot}"
            if isinstance(arg, Buffer):
                if arg.device != self.device:
                    raise ValueError(f"{where}: the Buffer is on {arg.device}, the kernel runs on {self.device}")
                if arg.dtype != dt:
                    raise TypeError(f"{where}: the Buffer holds {arg.dtype.name}, the kernel takes {dt.name}")
            elif isinstance(arg, np.ndarray):
                want = to_numpy(dt)
                if arg.dtype != want:
                    raise TypeError(
                        f"{where}: the array is {arg.dtype}, the kernel takes {dt.name} (use .astype(np.{want}))"
                    )
                if slot in self.outs and not arg.flags.writeable:
                    raise ValueError(f"{where}: the kernel writes this slot and the array is read-only")
            else:
                raise TypeError(f"{where}: expected a numpy array or a uops Buffer, got {type(arg).__name__}")
            n = need.get(slot, 0)
            if arg.size < n:
                raise ValueError(
                    f"{where}: the kernel {'writes' if slot in self.outs else 'reads'} up to {n} {dt.name} elements "
                    f"({n * dt.nbytes} bytes), the {type(arg).__name__} has {arg.size}"
                )
            if isinstance(arg, np.ndarray):
                buf = Buffer(self.runtime, arg.size, dt)
                staged.append(buf)
                buf.copyin(arg)
                if slot in self.outs:
                    readback.append((arg, buf))
                arg = buf
            handles.append(arg.handle)
        done: object = None
        try:
            done = self.program(*handles, global_size=gsz, local_size=lsz, vals=vals)
            for arg in args:
                if isinstance(arg, Buffer):
                    arg.after(done)
            for buf in staged:
                buf.after(done)
            for arr, buf in readback:
                arr[...] = buf.numpy().reshape(arr.shape)
        finally:
            # a handle is freed only after the device is done with it (a launch may still run on an
            # asynchronous runtime), and never left to the garbage collector while the launch holds it
            if staged and not isinstance(done, Event):
                self.runtime.synchronize()
            for buf in staged:
                buf.free()  # waits on the events of the launch and copies that used it first

    def __repr__(self) -> str:
        return f"<LoadedProgram {self.spec.name} on {self.device} ({self.signature})>"
