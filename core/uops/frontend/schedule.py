"""The scheduler: a lazy tensor graph -> kernel ASTs (the format in docs/internals.md).

Tensor-level nodes are UOps: ``BUFFER`` (arg ``(device, size, uid)``), ``VIEW`` (arg a
``ShapeTracker``), ``CONST`` (shape ``()``), ALU ops and ``CAST``, ``REDUCE_AXIS`` (arg
``(op, axes)``, keepdim shape), ``CONTIGUOUS``, ``COPY`` (arg: target device), ``INDEX`` (src: value,
int32 index of the output's shape; arg: axis): a gather, one gated load per element, and ``BIND`` (a
``DEFINE_VAR`` with its value, shape ``()``: the kernel reads the variable, the launch passes the value,
so one compiled kernel and one cached plan serve every value).

Before fusion, reductions are lowered: a reduction of a value that is the same everywhere (a
constant, broadcast) folds to a constant (``size * value`` for a sum), and one over more than
``SPLIT_THRESHOLD`` elements runs in two stages.

Kernel boundaries (buffers) are made only where needed: the outputs asked for, ``CONTIGUOUS``
and ``COPY``, a reduction read through an expanding view or by another reduction (inlining
would recompute it per output element), and a reduction read by more than one kernel (so
it is computed once). The exception is a row's chain of reductions on a CPU-style device
(softmax's max then sum, layernorm's mean then variance, each broadcast back over the row it
reduced): they fuse into the kernel that reads them, which walks each row pass after pass from
cache (``_RowFusion``). Everything else — elementwise chains, movement ops as index math,
a reduction's elementwise inputs and epilogue — fuses into the kernel that reads it.
"""

from __future__ import annotations

import functools
import itertools
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from uops.compiler import positive_int_from_env
from uops.compiler.cache import LRU
from uops.dtypes import DType, dtypes, truncate
from uops.errors import UopsError
from uops.ir.alu import eval_scalar
from uops.ir.ops import AxisType, GroupOp, Ops
from uops.ir.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.ir.uop import UOp

from .view import ShapeTracker, View, _and, _c, _lin, strides_for

_uid = itertools.count()
_shapes: weakref.WeakKeyDictionary[UOp, tuple[int, ...]] = weakref.WeakKeyDictionary()
#: lazy node -> the VIEW(BUFFER) holding its value, once realized (kept while the node lives)
realized: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
#: lazy node -> the same computation reading snapshots of buffers written in place since it was built
rebased: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()


def new_buffer(device: str, size: int, dtype: DType) -> UOp:
    """A fresh tensor-level BUFFER node (unique: the uid makes it distinct from every other)."""
    return UOp(Ops.BUFFER, dtype, (), (device, size, next(_uid)))


def buffer_view(buf: UOp, shape: tuple[int, ...]) -> UOp:
    return UOp(Ops.VIEW, buf.dtype, (buf,), ShapeTracker.from_shape(shape))


def _shape_from_sources(n: UOp) -> tuple[int, ...]:
    """The shape of ``n`` given its sources' shapes (in ``_shapes``)."""
    if n.op is Ops.BUFFER:
        return (n.arg[1],)
    if n.op is Ops.VIEW:
        return n.arg.shape
    if n.op in (Ops.CONST, Ops.DEFINE_VAR):
        return ()
    if n.op is Ops.REDUCE_AXIS:
        src = _shapes[n.src[0]]
        return tuple(1 if i in n.arg[1] else s for i, s in enumerate(src))
    if n.op is Ops.INDEX:  # a gather: the index's shape
        return _shapes[n.src[1]]
    if n.src:
        return _shapes[n.src[-1]] if n.op is Ops.WHERE else _shapes[n.src[0]]
    raise TypeError(f"{n.op} is not a tensor-level node")


def shape_of(u: UOp) -> tuple[int, ...]:
    """The shape of a tensor-level node (memoized; iterative, so deep graphs are fine)."""
    s = _shapes.get(u)
    if s is not None:
        return s
    if u.op is Ops.VIEW or all(x in _shapes for x in u.src):  # a new node over known ones: no walk
        s = _shapes[u] = _shape_from_sources(u)
        return s
    for n in u.toposort(gate=lambda x: x not in _shapes):
        if n not in _shapes:
            _shapes[n] = _shape_from_sources(n)
    return _shapes[u]


def apply_view(u: UOp, fn: Callable[[ShapeTracker], ShapeTracker]) -> UOp:
    """A movement op on a tensor-level node: views of views merge into one ShapeTracker; a view that
    undoes itself over a computed value is that value."""
    if u.op is Ops.VIEW:
        base, st = u.src[0], u.arg
    else:
        base, st = u, ShapeTracker.from_shape(shape_of(u))
    new = fn(st)
    if base.op is not Ops.BUFFER and new.contiguous and new.shape == shape_of(base):
        return base
    return UOp(Ops.VIEW, u.dtype, (base,), new)


@dataclass(frozen=True)
class MoveTracker(ShapeTracker):
    """The tracker of a view made by one elementary movement, which it records as ``(method, arg)``
    (``("reshape", shape)``, ``("detach", None)``...): autograd reads it to send gradients back."""

    move: tuple[str, object] = ("detach", None)


def move(u: UOp, method: str, arg: object) -> UOp:
    """One elementary movement of a tensor-level node (``method`` names the ShapeTracker method).

    The tracker is merged with the views below, as ``apply_view`` does, so kernels see one view;
    a second source keeps the node moved (when it is a view), so the chain of elementary movements
    survives the merge for autograd. A chain that undoes itself over a computed value is that value,
    unless a detach is in it."""
    srcs: tuple[UOp, ...]
    if u.op is Ops.VIEW:
        base, st, srcs = u.src[0], u.arg, (u.src[0], u)
    else:
        base, st, srcs = u, ShapeTracker.from_shape(shape_of(u)), (u,)
    new = st if method == "detach" else _moved_tracker(st, method, arg)
    if (
        base.op is not Ops.BUFFER
        and new.contiguous
        and new.shape == shape_of(base)
        and method != "detach"
        and not _detached(u)
    ):
        return base
    return UOp(Ops.VIEW, u.dtype, srcs, MoveTracker(new.views, (method, arg)))


@functools.lru_cache(maxsize=4096)
def _moved_tracker(st: ShapeTracker, method: str, arg: object) -> ShapeTracker:
    """``st`` after one movement: trackers are values, and a program makes the same few again and again."""
    new: ShapeTracker = getattr(st, method)(arg)
    return new


def _detached(u: UOp) -> bool:
    while u.op is Ops.VIEW:
        if isinstance(u.arg, MoveTracker) and u.arg.move[0] == "detach":
            return True
        if len(u.src) < 2:
            return False
        u = u.src[1]
    return False


def reshaped(u: UOp, shape: tuple[int, ...]) -> UOp:
    return u if shape_of(u) == shape else apply_view(u, lambda st: st.reshape(shape))


@functools.lru_cache(maxsize=1024)
def _broadcast_scalar(shape: tuple[int, ...]) -> ShapeTracker:
    """The view of a scalar broadcast to ``shape`` (every elementwise op with a Python scalar makes one)."""
    st = ShapeTracker.from_shape(()).reshape((1,) * len(shape))
    return st if all(s == 1 for s in shape) else st.expand(shape)


def const_view(value: bool | int | float, dtype: DType, shape: tuple[int, ...]) -> UOp:
    """One value broadcast to ``shape`` (a CONST under an expanding view; no memory)."""
    c = UOp.const(dtype, value)
    return UOp(Ops.VIEW, dtype, (c,), _broadcast_scalar(shape)) if shape else c


def device_of(u: UOp) -> str | None:
    """The device a node's value lives on (None for pure constants)."""
    for n in u.toposort(gate=lambda x: x.op not in (Ops.COPY, Ops.BUFFER)):
        if n.op is Ops.BUFFER:
            return n.arg[0]
        if n.op is Ops.COPY:
            return n.arg
    return None


@dataclass
class ScheduleItem:
    """One step of a schedule: a kernel (``ast`` is its SINK) or a copy between devices.

    ``bufs`` are tensor-level BUFFER nodes in slot order (outputs first).
    """

    kind: str  # "kernel" | "copy"
    device: str
    bufs: tuple[UOp, ...]
    ast: UOp | None = None
    outputs: tuple[UOp, ...] = field(default_factory=tuple)  # the lazy nodes this item realizes
    var_vals: dict[str, int] = field(default_factory=dict)  # the bound variables' values for the launch

    def __repr__(self) -> str:
        if self.kind == "copy":
            return f"<ScheduleItem copy {self.bufs[1].arg[0]} -> {self.device} [{self.bufs[0].arg[1]}]>"
        n = sum(1 for u in self.ast.toposort() if u.op is Ops.STORE) if self.ast is not None else 0
        return f"<ScheduleItem kernel on {self.device}: {n} store(s), {len(self.bufs)} buffers>"


def _is_buffer_view(u: UOp) -> bool:
    return u.op is Ops.VIEW and u.src[0].op is Ops.BUFFER


def _full_contiguous_buffer(u: UOp) -> bool:
    return _is_buffer_view(u) and u.arg.contiguous and u.arg.size == u.src[0].arg[1]


def _substitute_realized(roots: list[UOp]) -> list[UOp]:
    mapping = {}
    order = UOp.sink(*roots).toposort(gate=lambda x: x not in realized and x.op is not Ops.BIND)
    for n in order:
        r = realized.get(n)
        if r is not None:
            mapping[n] = r
    if not mapping:
        return roots
    # a BIND keeps its constant: the value a launch passes, even where an equal CONST was realized elsewhere
    mapping.update((n, n) for n in order if n.op is Ops.BIND)
    return list(graph_rewrite(UOp.sink(*roots).substitute(mapping), merge_views).src)


def apply_rebased(roots: list[UOp]) -> list[UOp]:
    """``roots`` with every node that read a buffer since written in place reading its snapshot instead."""
    sink = UOp.sink(*roots)
    while True:  # a replacement may hold nodes rebased after it was made: until none is left
        gate = lambda x: x not in realized and x not in rebased and x.op is not Ops.BIND  # noqa: E731
        order = sink.toposort(gate=gate)
        mapping = {n: rebased[n] for n in order if n in rebased}
        if not mapping:
            return list(sink.src)
        # a realized node keeps its value: the rebuild must not enter it (and recompute it from a changed buffer)
        mapping.update((n, n) for n in order if (n in realized or n.op is Ops.BIND) and n not in mapping)
        sink = sink.substitute(mapping)


#: VIEW(VIEW(x)) -> one VIEW (appears when a realized value replaces a lazy node under a view); the
#: record of elementary movements (a view's second source) is for autograd, not needed from here on
merge_views = PatternMatcher(
    [
        (
            UPat(Ops.VIEW, src=(UPat(Ops.VIEW, name="inner"),), name="outer", allow_any_len=True),
            lambda outer, inner: UOp(Ops.VIEW, outer.dtype, inner.src[:1], inner.arg + outer.arg),
        )
    ]
)


SPLIT_THRESHOLD = 1 << 16  # reductions over more elements than this run in two stages


_NOT_UNIFORM = object()
#: node -> its value when it is the same at every index, else _NOT_UNIFORM (kept while the node lives)
_uniform: weakref.WeakKeyDictionary[UOp, object] = weakref.WeakKeyDictionary()


def _uniform_of(n: UOp) -> object:
    if n.op is Ops.CONST:
        return n.arg
    if n.op is Ops.VIEW and all(v.mask is None for v in n.arg.views):
        return _uniform[n.src[0]]
    if n.op is Ops.CAST:
        v = _uniform[n.src[0]]
        return v if v is _NOT_UNIFORM else truncate(v, n.dtype)
    if n.op in GroupOp.ALU:
        vals = tuple(_uniform[s] for s in n.src)
        if any(v is _NOT_UNIFORM for v in vals):
            return _NOT_UNIFORM
        out = eval_scalar(n.op, n.dtype, vals, n.src[-1].dtype)  # type: ignore[arg-type]
        return _NOT_UNIFORM if out is None or out != out else out  # a NaN is left to the kernel
    return _NOT_UNIFORM


def _uniform_value(u: UOp) -> bool | int | float | None:
    """The value of a node that is the same at every index (constants under unmasked views, casts and ALU ops),
    else None. Iterative and memoized: deep graphs are fine and each node is looked at once."""
    for n in u.toposort(gate=lambda x: x not in _uniform):
        if n not in _uniform:
            _uniform[n] = _uniform_of(n)
    v = _uniform[u]
    return None if v is _NOT_UNIFORM else v  # type: ignore[return-value]


def _fold_uniform_reduce(n: UOp) -> UOp | None:
    """A reduction of one value repeated ``count`` times, computed here: ``count * v``, ``v``, or ``v ** count``."""
    v = _uniform_value(n.src[0])
    op, axes = n.arg
    sshape = shape_of(n.src[0])
    count = math.prod(sshape[a] for a in axes)
    if v is None or count == 0 or dtypes.is_bool(n.dtype):
        return None
    if op is Ops.MAX:
        out = v
    elif op is Ops.ADD:
        out = v * count + (0.0 if dtypes.is_float(n.dtype) else 0)
    elif op is Ops.MUL and dtypes.is_int(n.dtype):
        out = pow(int(v), count, 1 << (8 * n.dtype.itemsize))
    elif op is Ops.MUL:
        try:
            out = math.pow(float(v), count)
        except OverflowError:
            out = -math.inf if v < 0 and count % 2 else math.inf
    else:
        return None
    return const_view(truncate(out, n.dtype), n.dtype, shape_of(n))


def _reduce_identity(op: Ops, dtype: DType) -> bool | int | float:
    return 0 if op is Ops.ADD else 1 if op is Ops.MUL else dtypes.min(dtype)


def _split_reduce(n: UOp) -> UOp | None:
    """Two stages: contiguous chunks of about sqrt(size) first, then the partials (precision and parallelism)."""
    op, axes = n.arg
    x = n.src[0]
    shape = shape_of(x)
    size = math.prod(shape[a] for a in axes)
    if size <= SPLIT_THRESHOLD or math.prod(shape) == 0:
        return None
    keep = [i for i in range(len(shape)) if i not in axes]
    order = tuple(keep + list(axes))
    if order != tuple(range(len(shape))):
        x = apply_view(x, lambda st: st.permute(order))
    outer = tuple(shape[i] for i in keep)
    k = 1 << math.ceil(math.log2(math.isqrt(size)))
    m = -(-size // k)
    x = reshaped(x, outer + (size,))
    if m * k != size:
        pads = ((0, 0),) * len(outer) + ((0, m * k - size),)
        padded = apply_view(x, lambda st: st.pad(pads))
        ident = _reduce_identity(op, n.dtype)
        if ident == 0:
            x = padded
        else:
            valid = apply_view(const_view(True, dtypes.bool, outer + (size,)), lambda st: st.pad(pads))
            fill = const_view(ident, n.dtype, outer + (m * k,))
            x = UOp(Ops.WHERE, n.dtype, (valid, padded, fill))
    x = reshaped(x, outer + (m, k))
    part = UOp(Ops.REDUCE_AXIS, n.dtype, (x,), (op, (len(outer) + 1,)))
    part = UOp(Ops.CONTIGUOUS, n.dtype, (reshaped(part, outer + (m,)),))
    out = UOp(Ops.REDUCE_AXIS, n.dtype, (part,), (op, (len(outer),)))
    return reshaped(out, shape_of(n))


#: REDUCE_AXIS node -> its lowered form, kept while the node lives (so a realized stage is found again)
_lowered: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
#: the REDUCE_AXIS nodes whose lowering is a fold to a constant (it read their values, not only their structure)
_folded: weakref.WeakSet[UOp] = weakref.WeakSet()


def _lower_reduce(n: UOp) -> UOp | None:
    out = _lowered.get(n)
    if out is None:
        out = _fold_uniform_reduce(n)
        if out is not None:
            _folded.add(n)
        else:
            out = _split_reduce(n)
        if out is None:
            return None
        _lowered[n] = out
    return out


def _folds_read_realized(nodes: list[UOp]) -> bool:
    """Whether a reduction among ``nodes`` folded to a constant through a realized value: the fold read that value's
    lazy graph, which a graph key does not hold (it holds the value's buffer), so another graph with the same key
    may not fold."""
    return any(
        n.op is Ops.REDUCE_AXIS and n in _folded and any(x in realized for x in n.src[0].toposort()) for n in nodes
    )


lower_reduces = PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="n"), _lower_reduce), *merge_views.rules])


#: the longest row (elements reduced) whose reductions fuse into the kernel that reads them, so every pass over
#: the row after the first reads it from cache: 256 KiB of float32, in L2; a longer row is split in two stages anyway
#: (``SPLIT_THRESHOLD``). Timed on the shared 2-core Xeon (softmax, 4M elements, fused / three kernels, best of 30
#: alternating in one process): rows of 1024 to 65536 all take 0.4-0.6 of the time while the machine is busy, about
#: 0.8 when it is quiet
ROW_FUSE_MAX = 1 << 16

_row_devices: dict[str, bool] = {}


def _fuses_rows(device: str) -> bool:
    """Whether ``device``'s kernels fuse a row's reductions: on a CPU-style renderer (loops) one thread walks a row
    pass after pass from cache. A GPU-style one keeps a kernel per pass until a row is reduced by a workgroup: one
    thread per row would read its row alone, uncoalesced."""
    fuses = _row_devices.get(device)
    if fuses is None:
        from uops.plugins import Device

        try:
            fuses = Device[device].renderer.global_max is None
        except UopsError:
            fuses = False  # a device that cannot render here gets no kernels; the plain schedule names the problem
        _row_devices[device] = fuses
    return fuses


#: where a walk from a kernel's root is in a row computation: None outside; True at the row's full shape (what the
#: row's reductions reduce); False at a row value (a reduction's keepdim shape, broadcast back over the row); HEAD
#: at the kernel's own value while it is not known which of the two that is (softmax's output is a row, logsumexp's
#: a row value)
HEAD = "head"
_Row = bool | str | None
_WalkItem = tuple[UOp, bool, bool, _Row, UOp | None]


@functools.lru_cache(maxsize=1024)
def _broadcast(src: tuple[int, ...], shape: tuple[int, ...]) -> tuple[View, ...]:
    """The views of a value of shape ``src`` broadcast to ``shape`` (nothing else moved)."""
    return ShapeTracker.from_shape(src).expand(shape).views


class _RowFusion:
    """Which reductions one kernel computes itself instead of reading from a buffer: the per-row reductions over
    the kernel's own row axis (softmax's max and sum, layernorm's mean and variance), each broadcast back over the
    row with no other movement, the row at most ``ROW_FUSE_MAX`` long. The kernel then reads each row from memory
    once; the lowering runs the reductions one after another inside the loop over rows, the later passes reading
    the row from cache, and the row's outputs in a loop after them (see ``_row_loops`` in the heuristics)."""

    def __init__(self, root: UOp, enabled: bool):
        self.enabled = enabled
        # a reshape of the kernel's value (logsumexp without keepdim) is only its output's layout: the row is below
        reshaped = root.op is Ops.VIEW and root.arg.contiguous and root.src[0].op not in (Ops.BUFFER, Ops.CONST)
        self.head = root.src[0] if reshaped else root
        self.shape: tuple[int, ...] = shape_of(self.head)  # the row's full shape, once the kernel's value is placed
        self.head_is_row: bool | None = None  # whether the kernel's value has the row's full shape
        self.axes: frozenset[int] | None = None  # the row's axes (one longer than 1), once known
        self.axis = -1
        if self.head.op is Ops.REDUCE_AXIS:  # the kernel's value reduces the row: its axes are the row's, or none fuse
            self.shape = shape_of(self.head.src[0])
            self.enabled = self._place(self.shape, frozenset(self.head.arg[1]))

    def start(self) -> _Row:
        """The row state at the head: inside a reduction that is the kernel's value, the row's full shape."""
        return True if self.head.op is Ops.REDUCE_AXIS else HEAD

    def _place(self, shape: tuple[int, ...], axes: frozenset[int]) -> bool:
        """Fix the row as ``axes`` of ``shape`` when they make one that fuses: one axis longer than 1 (an INNER loop
        walks its outputs), the innermost one of the shape (the outputs are stored along it), at most
        ``ROW_FUSE_MAX`` long. Returns whether it did."""
        live = [a for a in axes if shape[a] != 1]
        if not self.enabled or len(live) != 1 or shape[live[0]] > ROW_FUSE_MAX:
            return False
        if live[0] != max(i for i, s in enumerate(shape) if s != 1):
            return False
        self.shape, self.axes, self.axis = shape, axes, live[0]
        return True

    def _level(self, row: _Row) -> _Row:
        if row == HEAD and self.head_is_row is not None:
            return self.head_is_row
        return row

    def view(self, v: UOp, row: _Row) -> _Row:
        """The row state below VIEW ``v``: a row value when ``v`` broadcasts one back over the row, else None."""
        if not self.enabled or v.arg.shape != self.shape or len(v.arg.views) != 1:
            return None
        row = self._level(row)
        if row is not True and row != HEAD:
            return None
        src = shape_of(v.src[0])
        if len(src) != len(self.shape) or v.arg.views != _broadcast(src, self.shape):
            return None
        axes = frozenset(i for i, (a, b) in enumerate(zip(src, self.shape)) if a != b)
        if self.axes is None:
            if not self._place(self.shape, axes):
                return None
            self.head_is_row = True
        elif {a for a in axes if self.shape[a] != 1} != {self.axis}:
            return None
        return False

    def reduce(self, n: UOp, row: _Row) -> _Row:
        """The row state inside REDUCE_AXIS ``n``: True when it is one of the row's reductions, else None."""
        if not self.enabled:
            return None
        row = self._level(row)
        if row == HEAD:
            if shape_of(n) != self.shape or not self._place(shape_of(n.src[0]), frozenset(n.arg[1])):
                return None
            self.head_is_row = False
        elif row is not False or self.axes is None or shape_of(n.src[0]) != self.shape:
            return None
        live = frozenset(a for a in n.arg[1] if self.shape[a] != 1)
        return True if live == {self.axis} and self._streams(n.src[0]) else None

    def _streams(self, value: UOp) -> bool:
        """Whether a pass over the row reads every buffer along the row (stride 0 or 1). A strided row (a softmax
        over axis 0) is left to the plain schedule, whose reductions take whole rows of the other axis per pass."""
        for u in value.toposort(gate=lambda x: x.op not in (Ops.VIEW, Ops.REDUCE_AXIS)):
            if u.op is Ops.INDEX:
                return False
            if u.op is Ops.VIEW and u.arg.shape == self.shape and u.src[0].op is not Ops.CONST:
                if len(u.arg.views) != 1 or u.arg.views[0].strides[self.axis] not in (0, 1):
                    return False
        return True


#: elementwise ops a reduction's result may pass through on its way into another kernel's reduction and still be
#: computed by the reduction's own kernel (its epilogue)
_EPILOGUE_OPS = GroupOp.ALU | {Ops.CAST}


def _user_counts(roots: list[UOp]) -> dict[UOp, int]:
    """How many nodes of the graph (and roots) use each node's value (a VIEW's later sources are autograd's record
    of the movements, not uses)."""
    users: dict[UOp, int] = {r: 1 for r in roots}
    seen: set[UOp] = set()
    todo = list(roots)
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        for s in u.src[:1] if u.op is Ops.VIEW else u.src:
            users[s] = users.get(s, 0) + 1
            todo.append(s)
    return users


def _find_realize_set(roots: list[UOp], default_device: str) -> list[UOp]:
    """The nodes that become buffers, dependencies first."""
    R: set[UOp] = set()
    for r in roots:
        if not _is_buffer_view(r) and r.op is not Ops.BUFFER:
            R.add(r)
    devices = {default_device}
    for n in UOp.sink(*roots).toposort():
        if n.op is Ops.CONTIGUOUS:
            R.add(n)
        elif n.op is Ops.COPY:
            R.add(n)
            devices.add(n.arg)
            if not _full_contiguous_buffer(n.src[0]):
                R.add(n.src[0])
        elif n.op is Ops.BUFFER:
            devices.add(n.arg[0])
    fuse = all(_fuses_rows(d) for d in devices)  # a row fuses where every device of the graph fuses rows
    users = _user_counts(roots)
    while True:
        reach: dict[UOp, set[UOp]] = {}
        added = False
        for k in list(R):
            if k.op is Ops.COPY:
                continue
            rows = _RowFusion(k, fuse)
            head = rows.head
            # top: the elementwise node that a reduction reached below it through private elementwise ops is realized
            # as, so the reduction's epilogue (a matmul's bias and relu) stays in its own kernel, not in every load
            stack: list[_WalkItem] = [(k, False, False, rows.start(), None)]
            seen: set[_WalkItem] = set()
            while stack:
                item = stack.pop()
                if item in seen:
                    continue
                seen.add(item)
                n, in_reduce, expanded, row, top = item
                if (n in R and n is not k) or n.op in (Ops.BUFFER, Ops.CONST):
                    continue
                if n.op is Ops.REDUCE_AXIS:
                    if n is head:
                        stack.append((n.src[0], True, False, row, None))
                        continue
                    inner_row = rows.reduce(n, row)
                    if inner_row is None and (in_reduce or expanded or row is False):
                        R.add(n if top is None or users.get(n, 0) != 1 else top)
                        added = True
                        continue
                    reach.setdefault(n, set()).add(k)
                    stack.append((n.src[0], True, False, inner_row, None))
                    continue
                if n.op is Ops.VIEW:
                    below = row if n is k and head is not k else rows.view(n, row)
                    spread = expanded or row is False or (below is None and n.arg.expands)
                    keep = top if not n.arg.expands and users.get(n, 0) == 1 else None
                    stack.append((n.src[0], in_reduce, spread if below is None else expanded, below, keep))
                    continue
                if n.op is Ops.INDEX:  # a gather may read one element many times, like an expand
                    spread = expanded or row is False
                    stack.extend(((n.src[0], in_reduce, True, None, None), (n.src[1], in_reduce, spread, None, None)))
                    continue
                epilogue = n is not k and (in_reduce or expanded) and n.op in _EPILOGUE_OPS and users.get(n, 0) == 1
                up = (n if top is None else top) if epilogue else None
                if n.op in GroupOp.ALU or n.op in (Ops.CAST, Ops.BITCAST) or n is k:
                    stack.extend((s, in_reduce, expanded, row, up) for s in n.src)
                else:  # leaving a row value: what is below is read once per row element, as through an expand
                    stack.extend((s, in_reduce, expanded or row is False, None, up) for s in n.src)
        for n, ks in reach.items():
            if len(ks) > 1 and n not in R:
                R.add(n)
                added = True
        if not added:
            break
    order = [n for n in UOp.sink(*roots).toposort() if n in R]
    return order


Key = tuple[UOp, tuple[UOp, ...], UOp | None]


class _KernelBuilder:
    """Renders one kernel: index math through views, loads from buffers, reductions with ranges."""

    def __init__(self, bufmap: dict[UOp, UOp], root: UOp):
        self.bufmap = bufmap
        self.root = root
        self.slots: dict[UOp, int] = {}
        self.next_axis = 0
        self.memo: dict[Key, UOp] = {}

    def slot(self, buf: UOp) -> UOp:
        if buf not in self.slots:
            self.slots[buf] = len(self.slots)
        return UOp(Ops.DEFINE_GLOBAL, buf.dtype.ptr(buf.arg[1]), (), self.slots[buf])

    def new_range(self, size: int, kind: AxisType) -> UOp:
        r = UOp.range(size, self.next_axis, kind)
        self.next_axis += 1
        return r

    def load(self, buf: UOp, st: ShapeTracker, idxs: tuple[UOp, ...], valid: UOp | None) -> UOp:
        lin, v = st.expr(idxs)
        gate = _and(valid, v)
        if gate is not None and gate.op is Ops.CONST and gate.arg is False:
            return UOp.const(buf.dtype, 0)
        ld = self.slot(buf).index(lin).load()
        if v is None and valid is None:
            return ld
        # gate the load by every enclosing validity so an invalid index is never dereferenced
        return UOp(Ops.WHERE, buf.dtype, (gate, ld, UOp.const(buf.dtype, 0)))  # type: ignore[arg-type]

    def render(self, n: UOp, idxs: tuple[UOp, ...], valid: UOp | None) -> UOp:
        """The kernel value of tensor node ``n`` at ``idxs``. Iterative: deep graphs are fine."""
        root: Key = (n, idxs, valid)
        plans: dict[Key, tuple[list[Key], Callable[[list[UOp]], UOp]]] = {}
        stack: list[Key] = [root]
        while stack:
            key = stack[-1]
            if key in self.memo:
                stack.pop()
                continue
            plan = plans.get(key)
            if plan is None:
                plan = plans[key] = self._plan(*key)
            missing = [d for d in plan[0] if d not in self.memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self.memo[key] = plan[1]([self.memo[d] for d in plan[0]])
        return self.memo[root]

    def _plan(self, n: UOp, idxs: tuple[UOp, ...], valid: UOp | None) -> tuple[list[Key], Callable[[list[UOp]], UOp]]:
        """What rendering ``n`` needs first (keys of other renders) and how to combine their values."""

        def done(u: UOp) -> tuple[list[Key], Callable[[list[UOp]], UOp]]:
            return [], lambda _: u

        if n is not self.root and n in self.bufmap:
            return done(self.load(self.bufmap[n], ShapeTracker.from_shape(shape_of(n)), idxs, valid))
        if n.op is Ops.VIEW:
            st: ShapeTracker = n.arg
            src = n.src[0]
            if src.op is Ops.BUFFER:
                return done(self.load(src, st, idxs, valid))
            if src is not self.root and src in self.bufmap:
                return done(self.load(self.bufmap[src], st, idxs, valid))
            if src.op is Ops.CONST:
                _, v = st.expr(idxs)
                return done(src if v is None else UOp(Ops.WHERE, src.dtype, (v, src, UOp.const(src.dtype, 0))))
            sub, v = st.to_base(idxs, shape_of(src))
            if v is not None and v.op is Ops.CONST and v.arg is False:
                return done(UOp.const(n.dtype, 0))
            zero = UOp.const(n.dtype, 0)
            return [
                (src, tuple(sub), _and(valid, v))
            ], lambda xs: xs[0] if v is None else UOp(Ops.WHERE, n.dtype, (v, xs[0], zero))
        if n.op is Ops.BUFFER:
            return done(self.load(n, ShapeTracker.from_shape((n.arg[1],)), idxs, valid))
        if n.op is Ops.CONST:
            return done(n)
        if n.op is Ops.BIND:
            return done(n.src[0])
        if n.op is Ops.REDUCE_AXIS:
            op, axes = n.arg
            sshape = shape_of(n.src[0])
            new = list(idxs)
            ranges: list[UOp] = []
            for a in axes:
                if sshape[a] == 1:
                    new[a] = _c(0)
                else:
                    r = self.new_range(sshape[a], AxisType.REDUCE)
                    ranges.append(r)
                    new[a] = r
            return [
                (n.src[0], tuple(new), valid)
            ], lambda xs: xs[0] if not ranges else UOp(Ops.REDUCE, n.dtype, (xs[0], *ranges), op)
        if n.op is Ops.CONTIGUOUS:
            return [(n.src[0], idxs, valid)], lambda xs: xs[0]
        if n.op is Ops.INDEX:
            return self._gather(n, idxs, valid)
        if n.op is Ops.COPY:
            raise RuntimeError("internal: a COPY must be realized before a kernel reads it")
        return [(s, idxs, valid) for s in n.src], lambda xs: UOp(n.op, n.dtype, tuple(xs), n.arg)

    def _gather(self, n: UOp, idxs: tuple[UOp, ...], valid: UOp | None) -> tuple[list[Key], Callable[[list[UOp]], UOp]]:
        """``INDEX(src, idx, arg=axis)``: ``src`` read at the loaded index along ``axis``; an index outside
        ``[0, size)`` reads zero (the load is gated: never memory outside the buffer)."""
        axis = n.arg
        size = shape_of(n.src[0])[axis]
        i = self.render(n.src[1], idxs, valid).cast(dtypes.index)
        ok = (_c(-1) < i) & (i < _c(size))
        safe = UOp(Ops.WHERE, dtypes.index, (ok, i, _c(0)))
        new = idxs[:axis] + (safe,) + idxs[axis + 1 :]
        zero = UOp.const(n.dtype, 0)
        return [(n.src[0], new, _and(valid, ok))], lambda xs: UOp(Ops.WHERE, n.dtype, (ok, xs[0], zero))

    def build(self, out_buf: UOp, out_st: ShapeTracker | None = None) -> tuple[UOp, tuple[UOp, ...]]:
        """The kernel storing the root into ``out_buf``: contiguously, or through ``out_st`` (an in-place write)."""
        shape = shape_of(self.root)
        self.slot(out_buf)
        idxs = tuple(_c(0) if s == 1 else self.new_range(s, AxisType.GLOBAL) for s in shape)
        value = self.render(self.root, idxs, None)
        if value.dtype != self.root.dtype:
            value = value.cast(self.root.dtype)
        if out_st is not None:
            lin = out_st.expr(idxs)[0]
        else:
            lin = _lin([(i, st) for i, st in zip(idxs, strides_for(shape)) if st != 0], 0)
        store = self.slot(out_buf).index(lin).store(value)
        bufs = tuple(sorted(self.slots, key=lambda b: self.slots[b]))
        return UOp.sink(store), bufs


@dataclass
class Schedule:
    """What realizing some roots takes: the items to run, and where each value will live."""

    items: list[ScheduleItem]
    root_views: list[UOp]  # per root (in the order given): the VIEW(BUFFER) holding its value
    done: dict[UOp, UOp]  # every lazy node made a buffer -> its VIEW(BUFFER); registered after running
    var_vals: dict[str, int] = field(default_factory=dict)  # bound variable name -> value, for the launches


def _build_schedule(
    roots: list[UOp], default_device: str, into: tuple[UOp, ShapeTracker] | None = None
) -> tuple[Schedule, list[UOp]]:
    """Kernels and copies that realize ``roots``, and the buffers made for them in order.

    ``into`` (a BUFFER and a view of it, one root): the last root is stored there instead of a new buffer."""
    roots = list(graph_rewrite(UOp.sink(*roots), lower_reduces).src)
    roots = _substitute_realized(roots)
    # a root that expands a computed value needs only that value as a buffer: the expanding view stays a view
    # (other views are computed straight into the output layout: one kernel, and numpy() needs no copy)
    targets = [
        r.src[0] if r.op is Ops.VIEW and r.src[0].op not in (Ops.BUFFER, Ops.CONST) and r.arg.expands else r
        for r in roots
    ]
    order = _find_realize_set(targets, default_device)
    bufmap: dict[UOp, UOp] = {}
    items: list[ScheduleItem] = []
    for n in order:
        shape = shape_of(n)
        size = 1
        for s in shape:
            size *= s
        if n.op is Ops.COPY:
            src = n.src[0]
            src_buf = src.src[0] if _full_contiguous_buffer(src) else bufmap[src]
            out = new_buffer(n.arg, size, n.dtype)
            bufmap[n] = out
            if size:
                items.append(ScheduleItem("copy", n.arg, (out, src_buf), None, (n,)))
            continue
        device = device_of(n) or default_device
        write = into is not None and n is targets[-1]
        out = into[0] if write else new_buffer(device, size, n.dtype)  # type: ignore[index]
        bufmap[n] = out
        if size == 0:
            continue
        ast, bufs = _KernelBuilder(bufmap, n).build(out, into[1] if write else None)  # type: ignore[index]
        items.append(ScheduleItem("kernel", device, bufs, ast, (n,)))
    views = []
    for r, tg in zip(roots, targets):
        if _is_buffer_view(r) or r.op is Ops.BUFFER:
            views.append(r)
        elif tg is not r:
            views.append(UOp(Ops.VIEW, r.dtype, (bufmap[tg],), r.arg))  # same linear layout as the value
        else:
            views.append(buffer_view(bufmap[r], shape_of(r)))
    done = {n: buffer_view(bufmap[n], shape_of(n)) for n in order}
    nodes = UOp.sink(*roots).toposort(gate=lambda x: x.op is not Ops.BIND and x not in realized)
    return _with_values(Schedule(items, views, done), _bound_values(nodes)), list(bufmap.values())


#: (dtype, buffer reference, ShapeTracker) of a VIEW(BUFFER), or ShapeTracker None for the BUFFER itself
_ViewRef = tuple[DType, int, ShapeTracker | None]


@dataclass(frozen=True)
class _Plan:
    """A schedule with its buffers as references: below ``n_inputs``, the graph's input buffers in the order
    they were met; from there on, fresh buffers ``(device, size, dtype)``. Lazy nodes are positions in the
    graph's toposort."""

    n_inputs: int
    fresh: tuple[tuple[str, int, DType], ...]
    items: tuple[tuple[str, str, tuple[int, ...], UOp | None, tuple[int, ...]], ...]
    root_views: tuple[_ViewRef, ...]
    done: tuple[tuple[int, _ViewRef], ...]


#: hash of a graph structure (see ``_graph_key``) -> (the structure, its plan); ``UOPS_SCHEDULE_CACHE`` (default
#: 256) kept. Keyed by the hash: the LRU looks a key up and moves it to the end, and a structure's hash is a walk
#: over its trackers (3 us of a matmul's 33 us schedule)
_plans: LRU[int, tuple[tuple[object, ...], _Plan]] = LRU(positive_int_from_env("UOPS_SCHEDULE_CACHE", 256))


def _graph_key(roots: list[UOp], default_device: str) -> tuple[tuple[object, ...], list[UOp], list[UOp]]:
    """The structure of a lazy graph with its input buffers abstracted to (dtype, device, size) slots: two
    graphs with equal keys schedule to the same kernels. Also returns the graph's nodes (toposort) and its
    input buffers (slot order).

    A realized node is an input (its value's view and buffer slot). What lowering looks at below it (whether
    it is one value everywhere) is not in the key: a graph that lowering or substitution rewrites has new
    roots, and ``_to_plan`` makes no plan for it."""
    nodes = UOp.sink(*roots).toposort(gate=lambda x: x.op is not Ops.BIND and x not in realized)
    pos: dict[UOp, int] = {}
    slots: dict[UOp, int] = {}
    inputs: list[UOp] = []
    entries: list[object] = [default_device]

    def slot(b: UOp) -> int:
        i = slots.get(b)
        if i is None:
            i = slots[b] = len(inputs)
            inputs.append(b)
            entries.append((b.dtype, b.arg[0], b.arg[1]))
        return i

    for i, n in enumerate(nodes):
        pos[n] = i
        r = realized.get(n)
        if r is not None:
            entries.append(("R", r.arg, slot(r.src[0])))
        elif n.op is Ops.BUFFER:
            entries.append(("B", slot(n)))
        elif n.op is Ops.BIND:
            entries.append(("V", n.src[0]))  # the variable, not its value: every value shares the plan
        elif not n.src:
            entries.append(n)  # hash-consed: the node is its own structure (a CONST's value, -0.0 included)
        else:
            entries.append((n.op, n.dtype, n.arg, tuple([pos[s] for s in n.src])))
    return tuple(entries), nodes, inputs


def _to_plan(sched: Schedule, made: list[UOp], nodes: list[UOp], inputs: list[UOp]) -> _Plan | None:
    """``sched`` as a plan over ``inputs`` and fresh buffers, or None when it reads a buffer that is neither (a
    realized stage of a split reduction) or depends on more than the graph's key (``_folds_read_realized``).

    A lazy node that lowering made (a split reduction's stage, a root in its lowered form) is not in the graph:
    the plan does not record it as realized."""
    if _folds_read_realized(nodes):
        return None
    ref = {b: i for i, b in enumerate(inputs)}
    ref.update((b, len(inputs) + j) for j, b in enumerate(made))
    pos = {n: i for i, n in enumerate(nodes)}

    def view_ref(v: UOp) -> _ViewRef | None:
        b, st = (v, None) if v.op is Ops.BUFFER else (v.src[0], v.arg)
        i = ref.get(b)
        return None if i is None else (v.dtype, i, st)

    items = []
    for it in sched.items:
        bufs = tuple(ref.get(b, -1) for b in it.bufs)
        if -1 in bufs:
            return None
        items.append((it.kind, it.device, bufs, it.ast, tuple(pos[n] for n in it.outputs if n in pos)))
    views = [view_ref(v) for v in sched.root_views]
    done = [(pos[n], view_ref(v)) for n, v in sched.done.items() if n in pos]
    if any(v is None for v in views) or any(v is None for _, v in done):
        return None
    fresh = tuple((b.arg[0], b.arg[1], b.dtype) for b in made)
    return _Plan(len(inputs), fresh, tuple(items), tuple(views), tuple(done))  # type: ignore[arg-type]


class VariableBindingError(UopsError, ValueError):
    """One variable is bound to two different values in one computation."""


def _bound_values(nodes: list[UOp]) -> dict[str, int]:
    """The value of each variable bound (``BIND``) among ``nodes``."""
    out: dict[str, int] = {}
    for n in nodes:
        if n.op is Ops.BIND:
            name, value = n.src[0].arg[0], int(n.src[1].arg)
            if out.setdefault(name, value) != value:
                raise VariableBindingError(
                    f"variable {name!r} is bound to {out[name]} and to {value} in one computation; bind it once"
                )
    return out


def _with_values(sched: Schedule, var_vals: dict[str, int]) -> Schedule:
    if var_vals:
        sched.var_vals = var_vals
        for it in sched.items:
            it.var_vals = var_vals
    return sched


def _from_plan(plan: _Plan, nodes: list[UOp], inputs: list[UOp]) -> Schedule:
    bufs = inputs + [new_buffer(device, size, dtype) for device, size, dtype in plan.fresh]

    def view(r: _ViewRef) -> UOp:
        dtype, i, st = r
        return bufs[i] if st is None else UOp(Ops.VIEW, dtype, (bufs[i],), st)

    items = [
        ScheduleItem(kind, device, tuple([bufs[i] for i in refs]), ast, tuple([nodes[p] for p in outs]))
        for kind, device, refs, ast, outs in plan.items
    ]
    return Schedule(items, [view(r) for r in plan.root_views], {nodes[p]: view(r) for p, r in plan.done})


def create_schedule(roots: list[UOp], default_device: str) -> Schedule:
    """Kernels and copies that realize ``roots`` (nothing runs here).

    Why a plan cache: a repeated computation on new buffers of the same shapes, dtypes and devices has
    the same structure, so its kernels are those of the first time; only the buffers change."""
    if rebased:
        roots = apply_rebased(roots)
    key, nodes, inputs = _graph_key(roots, default_device)
    h = hash(key)
    hit = _plans.get(h)
    if hit is not None and hit[0] == key:
        return _with_values(_from_plan(hit[1], nodes, inputs), _bound_values(nodes))
    sched, made = _build_schedule(roots, default_device)
    plan = _to_plan(sched, made, nodes, inputs)
    if plan is not None:
        _plans.put(h, (key, plan))
    return sched
