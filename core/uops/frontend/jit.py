"""``jit``: capture the kernels one call of a function launches, then replay them on new input buffers.

Why: a decode or training step builds and schedules the same graph every call, and that front-end work
costs more than the kernels of a small model. The first call of a function (per input signature) runs
normally, doing its one-time work (compiling, uploading weights, creating state); the next call runs
normally too while every launch, copy and allocation is recorded; from then on a call only launches
the recorded kernels, with the new inputs' buffers in the inputs' places, and wraps fresh output
buffers in Tensors. No graph is built or scheduled.

What is replayed:
- inputs are the Tensors among the arguments (also inside lists, tuples and dicts). A new shape,
  dtype or device of an input, a different pattern of inputs sharing one buffer, or other non-Tensor
  arguments (compared by value) capture again;
- a bound ``Variable`` argument is passed to the kernels with its new value, without capturing again;
- buffers the function reads that are not inputs (weights, a KV cache, constants it made) are the
  same buffers at every replay; what kernels write into them in place is written again;
- each output Tensor gets a new buffer per call (a later call never overwrites an earlier result),
  unless it is an input or a buffer that existed before the call.

What cannot be replayed is refused: reading data back to the host while capturing (``.numpy()``,
``.item()``, ``bool(t)``: a Python value derived from data would be frozen at its captured value)
numpy arrays as arguments (their data would be frozen as constants) and random numbers drawn inside
(``Tensor.rand`` draws on the host: a replay would repeat them) raise ``JitError``.
``UOPS_DEBUG=2`` prints each capture and replay.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, overload

import numpy as np

from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from . import realize as _realize
from . import rng as _rng
from .realize import _buffers, debug_level, device_handle, get_buffer
from .schedule import new_buffer, realized
from .tensor import Tensor
from .tensor.variable import bound_variable

__all__ = ["Jit", "JitError", "jit"]

R = TypeVar("R")


class JitError(UopsError, RuntimeError):
    """A function cannot be captured as it is (it reads data back on the host, takes numpy arrays, ...)."""


# ----- arguments and results as a flat list of leaves plus a structure -----


def _flatten(x: Any, leaves: list[Any]) -> Hashable:
    """Append the leaves of ``x`` (lists, tuples and dicts are walked) and return its structure."""
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return (type(x).__name__, tuple(_flatten(v, leaves) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _flatten(v, leaves)) for k, v in x.items()))
    leaves.append(x)
    return None


def _unflatten(tree: Any, leaves: list[Any], pos: list[int]) -> Any:
    if tree is None:
        pos[0] += 1
        return leaves[pos[0] - 1]
    kind, items = tree
    if kind == "dict":
        return {k: _unflatten(v, leaves, pos) for k, v in items}
    out = [_unflatten(v, leaves, pos) for v in items]
    return tuple(out) if kind == "tuple" else out


def _is_full_buffer(u: UOp) -> bool:
    return u.op is Ops.VIEW and u.src[0].op is Ops.BUFFER and u.arg.contiguous and u.arg.size == u.src[0].arg[1]


class _Call:
    """One call's arguments: the input tensors realized into whole buffers, the variables' values, and the
    signature (what must match for a capture to be replayed)."""

    __slots__ = ("args", "kwargs", "bufs", "nodes", "tensors", "var_vals", "key")

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]):
        leaves: list[Any] = []
        tree = _flatten((args, kwargs), leaves)
        sig: list[Hashable] = [tree]
        self.bufs: list[Any] = []
        self.nodes: list[UOp] = []
        self.tensors: list[tuple[Tensor, UOp]] = []
        self.var_vals: dict[str, int] = {}
        first: dict[int, int] = {}
        changed = False
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                bv = bound_variable(leaf)
                if bv is not None:
                    var, value = bv
                    self.var_vals[var.arg[0]] = value
                    sig.append(("var", var, leaf.device))
                    continue
                if not _is_full_buffer(leaf.uop):
                    leaf.realize()
                    if not _is_full_buffer(leaf.uop):  # a view of a buffer: the kernels see a whole one
                        leaves[i] = leaf = leaf._new(UOp(Ops.CONTIGUOUS, leaf.dtype, (leaf.uop,))).realize()
                        changed = True
                node = leaf.uop.src[0]
                buf = get_buffer(node)
                alias = first.setdefault(id(buf), len(self.bufs))
                sig.append(("tensor", leaf.shape, leaf.dtype, leaf.device, alias))
                self.bufs.append(buf)
                self.nodes.append(node)
                self.tensors.append((leaf, leaf.uop))
            elif isinstance(leaf, np.ndarray):
                raise JitError(
                    f"a jitted function got a numpy array (shape {leaf.shape}) as an argument: its data would be "
                    f"captured as a constant; pass a Tensor instead"
                )
            else:
                try:
                    hash(leaf)
                except TypeError:
                    raise JitError(
                        f"a jitted function got an argument of type {type(leaf).__name__} that is neither a Tensor "
                        f"nor hashable; its value decides what is captured, so it must be comparable"
                    ) from None
                sig.append(("value", type(leaf), leaf))
        if changed:
            args, kwargs = _unflatten(tree, leaves, [0])
        self.args, self.kwargs = args, kwargs
        self.key = tuple(sig)


# ----- recording -----


class _Recorder:
    """Told by the realize layer of every allocation, launch, copy and readback while a call is captured."""

    def __init__(self) -> None:
        self.steps: list[tuple[Any, ...]] = []
        # id(Buffer) allocated while capturing -> (it, whether host data was put in it); holding each Buffer keeps
        # its id from being reused by another one during the capture
        self.made: dict[int, tuple[Any, bool]] = {}
        self.first_write: dict[int, bool] = {}  # id(Buffer) -> whether its first use was a (whole) write
        self.written: dict[int, Any] = {}  # id(Buffer) -> Buffer, for every buffer a step writes

    def _use(self, buf: Any, write: bool) -> None:
        self.first_write.setdefault(id(buf), write)
        if write:
            self.written[id(buf)] = buf

    def allocated(self, buf: Any, data: np.ndarray | None) -> None:
        self.made[id(buf)] = (buf, data is not None)

    def launch(
        self,
        spec: Any,
        prog: Any,
        gsz: tuple[int, ...],
        lsz: tuple[int, ...],
        bufs: list[Any],
        var_vals: dict[str, int],
    ) -> None:
        for i, b in enumerate(bufs):
            self._use(b, i in spec.outs and i not in spec.ins)
        for i in spec.outs:
            self.written[id(bufs[i])] = bufs[i]
        self.steps.append(("kernel", spec, prog, gsz, lsz, list(bufs), dict(var_vals)))

    def copy(self, src: Any, dst: Any) -> None:
        self._use(src, False)
        self._use(dst, True)
        self.steps.append(("copy", src, dst))

    def upload(self, data: np.ndarray, dst: Any) -> None:
        self._use(dst, True)
        self.steps.append(("upload", np.array(data, copy=True), dst))

    def readback(self, node: UOp) -> None:
        raise JitError(
            "a jitted function read tensor data back to the host while being captured (.numpy(), .item(), "
            "bool(t) or print of values): a replay launches kernels only, so a Python value derived from data "
            "would keep its captured value; return the Tensor and read it outside the jitted function"
        )


# ----- a captured call -----

_IN, _OUT = 0, 1  # kinds of replaced buffers: the call's inputs, fresh outputs


class _Captured:
    """The launches of one captured call, ready to run again with other input buffers and variable values."""

    def __init__(self, name: str, call: _Call, rec: _Recorder, outs: list[Tensor], tree: Hashable, leaves: list[Any]):
        self.name = name
        self.n_inputs = len(call.bufs)
        inputs = {id(b): i for i, b in enumerate(call.bufs)}
        out_slot: dict[int, int] = {}  # id(Buffer) of a fresh output -> its index among fresh buffers
        self.fresh: list[tuple[str, int, Any]] = []  # (device, size, dtype) of each fresh output buffer
        for t in outs:
            buf = get_buffer(t.uop.src[0] if t.uop.op is Ops.VIEW else t.uop)
            i = id(buf)
            if i in inputs or i in out_slot:
                continue
            made = rec.made.get(i)
            if made is not None and not made[1] and rec.first_write.get(i) and i in rec.written:
                out_slot[i] = len(self.fresh)
                self.fresh.append((buf.device, buf.size, buf.dtype))

        def ref(buf: Any) -> tuple[int, int] | None:
            i = id(buf)
            if i in inputs:
                return (_IN, inputs[i])
            if i in out_slot:
                return (_OUT, out_slot[i])
            return None

        self.steps: list[tuple[Any, ...]] = []
        self.n_kernels = 0
        self.var_names: set[str] = set()
        for step in rec.steps:
            if step[0] == "kernel":
                _, spec, prog, gsz, lsz, bufs, var_vals = step
                args = [b.handle for b in bufs]
                patches = tuple((j, r) for j, b in enumerate(bufs) if (r := ref(b)) is not None)
                names = tuple(spec.var_names)
                self.var_names.update(names)
                fixed = {k: v for k, v in var_vals.items() if k in names}
                self.steps.append(("kernel", prog, args, patches, gsz, lsz, spec, fixed, bufs))
                self.n_kernels += 1
            elif step[0] == "copy":
                _, src, dst = step
                self.steps.append(("copy", src, dst, ref(src), ref(dst)))
            else:
                _, data, dst = step
                self.steps.append(("upload", data, dst, ref(dst)))
        self.tree, self.leaves = tree, leaves
        # each output Tensor: (position among the leaves, buffer reference or the fixed node, view arg or None)
        self.outs: list[tuple[int, tuple[int, int] | UOp, Any, str]] = []
        pos = 0
        for j, leaf in enumerate(leaves):
            if not isinstance(leaf, Tensor):
                continue
            t = outs[pos]
            pos += 1
            u = t.uop
            node = u.src[0] if u.op is Ops.VIEW else u
            r = ref(get_buffer(node))
            self.outs.append((j, r if r is not None else node, u.arg if u.op is Ops.VIEW else None, t.device))

    def replay(self, call: _Call) -> Any:
        fresh = [_realize_buffer(d, n, dt) for d, n, dt in self.fresh]
        groups = (call.bufs, fresh)
        handles = ([b.handle for b in call.bufs], [b.handle for b in fresh])
        var_vals = call.var_vals
        verbose = debug_level() >= 3
        for step in self.steps:
            kind = step[0]
            if kind == "kernel":
                _, prog, template, patches, gsz, lsz, spec, fixed, captured = step
                args, used = template.copy(), list(captured)
                for j, (g, i) in patches:
                    args[j], used[j] = handles[g][i], groups[g][i]
                vals = spec.vals({**fixed, **var_vals}) if spec.vars else ()
                t = prog(*args, global_size=gsz, local_size=lsz, vals=vals, wait=verbose)
                for b in used:
                    b.after(t)
                if verbose:
                    print(f"jit      {spec.name:28s} {(t or 0.0) * 1e3:9.3f} ms", file=sys.stderr)
            elif kind == "copy":
                from uops.runtime import copy_between

                _, src, dst, rs, rd = step
                copy_between(src if rs is None else groups[rs[0]][rs[1]], dst if rd is None else groups[rd[0]][rd[1]])
            else:
                _, data, dst, rd = step
                (dst if rd is None else groups[rd[0]][rd[1]]).copyin(data)
        leaves = list(self.leaves)
        made: dict[int, UOp] = {}
        for j, r, st, device in self.outs:
            if isinstance(r, UOp):
                node = r
            elif r[0] == _IN:
                node = call.nodes[r[1]]
            else:
                node = made.get(r[1])  # type: ignore[assignment]
                if node is None:
                    b = fresh[r[1]]
                    node = made[r[1]] = new_buffer(b.device, b.size, b.dtype)
                    _buffers[node] = b
            u = node if st is None else UOp(Ops.VIEW, node.dtype, (node,), st)
            leaves[j] = Tensor._untracked(u, device)  # a replayed value has no graph
        return _unflatten(self.tree, leaves, [0])


def _realize_buffer(device: str, size: int, dtype: Any) -> Any:
    from uops.runtime import Buffer

    return Buffer(device_handle(device).runtime, size, dtype)


def _forget_derived(inputs: list[UOp]) -> None:
    """Drop the scheduler's memory of lazy nodes computed from the call's input buffers (by an earlier call with the
    same tensors): the captured call must launch every kernel that reads an input, or a replay on other inputs would
    return what the earlier call computed."""
    derived: dict[UOp, bool] = dict.fromkeys(inputs, True)  # node -> whether it reads an input (one shared walk)
    if not derived:
        return
    for n in list(realized.keys()):
        for u in n.toposort(gate=lambda u: u not in derived):
            if u not in derived:
                derived[u] = any(derived[s] for s in u.src)
        if derived[n]:
            realized.pop(n, None)


def _forget_realized(written: dict[int, Any]) -> None:
    """Drop the scheduler's memory of lazy nodes whose values live in buffers that replays overwrite: a later
    graph with those nodes must compute them again, not read whatever the last replay left there."""
    stale = [n for n, v in list(realized.items()) if id(_buffers.get(v.src[0] if v.src else v)) in written]
    for n in stale:
        realized.pop(n, None)


# ----- the public API -----


class Jit(Generic[R]):
    """A function whose calls, after ``warmup`` plain ones and one captured one per input signature, replay
    the captured kernels. ``captures`` counts the calls captured so far (a test and a benchmark read it)."""

    def __init__(self, fn: Callable[..., R], warmup: int = 1):
        if warmup < 0:
            raise ValueError(f"jit: warmup must be >= 0, got {warmup}")
        self.fn = fn
        self.warmup = warmup
        self.captures = 0
        self.replays = 0
        self._calls: dict[Hashable, int] = {}
        self._captured: dict[Hashable, _Captured] = {}
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def reset(self) -> None:
        """Forget every capture (e.g. after rebinding a weight the function reads through a closure)."""
        self._calls.clear()
        self._captured.clear()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        bound = _bound_jits.get(obj)
        if bound is None:
            bound = _bound_jits[obj] = {}
        j = bound.get(id(self))
        if j is None:
            j = bound[id(self)] = Jit(self.fn.__get__(obj, objtype), self.warmup)
        return j

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        if _realize.recorder is not None:  # inside another function's capture: run plainly so it sees every launch
            return self.fn(*args, **kwargs)
        call = _Call(args, kwargs)
        cap = self._captured.get(call.key)
        if cap is not None:
            self.replays += 1
            if debug_level() >= 2:
                print(f"jit: replay {cap.name}: {cap.n_kernels} kernels, variables {call.var_vals}", file=sys.stderr)
            return cap.replay(call)
        n = self._calls.get(call.key, 0)
        self._calls[call.key] = n + 1
        if n < self.warmup:
            return self.fn(*call.args, **call.kwargs)
        return self._capture(call)

    def _capture(self, call: _Call) -> Any:
        _forget_derived(call.nodes)
        rec = _Recorder()
        draws = _rng._State.counter
        _realize.recorder = rec
        try:
            ret = self.fn(*call.args, **call.kwargs)
            if _rng._State.counter != draws:
                raise JitError(
                    f"{self.name} drew random numbers (Tensor.rand/randn/uniform) while being captured: they are "
                    f"drawn on the host, so every replay would repeat the captured ones; draw them outside and "
                    f"pass them in as an argument"
                )
            leaves: list[Any] = []
            tree = _flatten(ret, leaves)
            outs = [leaf for leaf in leaves if isinstance(leaf, Tensor)]
            for t in outs:
                if bound_variable(t) is not None:
                    raise JitError(f"{self.name} returns a bound variable; return a Tensor computed from it")
            if outs:
                outs[0].realize(*outs[1:])
            for k, ((t, u), buf) in enumerate(zip(call.tensors, call.bufs)):
                if t.uop is not u and (t.realize().uop.op is not Ops.VIEW or get_buffer(t.uop.src[0]) is not buf):
                    raise JitError(
                        f"{self.name} gave its input tensor {k} a new value in a new buffer: a replay cannot do "
                        f"that; write into the input's own buffer in place or return the new value"
                    )
        finally:
            _realize.recorder = None
        if not rec.steps and not outs:
            raise JitError(f"{self.name} launched no kernels and returned no tensors while being captured")
        cap = _Captured(self.name, call, rec, outs, tree, leaves)
        _forget_realized(rec.written)
        self._captured[call.key] = cap
        self.captures += 1
        if debug_level() >= 2:
            copies = sum(1 for s in cap.steps if s[0] != "kernel")
            print(
                f"jit: captured {cap.name}: {cap.n_kernels} kernels, {copies} copies, {cap.n_inputs} inputs, "
                f"{len(cap.fresh)} fresh outputs, variables {sorted(cap.var_names)}",
                file=sys.stderr,
            )
        return ret


#: an object -> its methods' Jits (a jitted method captures per instance, never across instances)
_bound_jits: weakref.WeakKeyDictionary[Any, dict[int, Jit[Any]]] = weakref.WeakKeyDictionary()


@overload
def jit(fn: Callable[..., R], *, warmup: int = 1) -> Jit[R]: ...
@overload
def jit(fn: None = None, *, warmup: int = 1) -> Callable[[Callable[..., R]], Jit[R]]: ...
def jit(fn: Callable[..., R] | None = None, *, warmup: int = 1) -> Jit[R] | Callable[[Callable[..., R]], Jit[R]]:
    """Capture ``fn``'s kernels and replay them (see the module docstring). ``@jit`` or ``@jit(warmup=0)``."""
    if fn is None:
        return lambda f: Jit(f, warmup)
    return Jit(fn, warmup)
