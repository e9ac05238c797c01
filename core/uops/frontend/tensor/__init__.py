"""``Tensor``: a lazy, numpy-like array. Operations build a UOp graph; ``realize()`` schedules it
into fused kernels and runs them on the tensor's device.

Why lazy: the scheduler sees whole expressions, so an elementwise chain, a reduction with its
inputs and epilogue, and movement ops (index math) become one kernel instead of one per op.

The class is assembled here from modules by concern — ``creation``, ``elementwise``,
``movement`` (and indexing), ``reduce``, ``nn`` — whose functions take the tensor as their
first argument; ``args`` checks arguments for all of them. Host data moves in and out through
the realize layer.
"""

from __future__ import annotations

import importlib
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from uops.dtypes import DType, dtypes, from_numpy, to_numpy
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .. import autograd, dlpack, inplace
from ..autograd import GRAD_ENABLED, AutogradError, NonDifferentiableError, no_grad
from ..realize import readback, realize, upload
from ..schedule import ScheduleItem, create_schedule, device_of, move, shape_of
from . import assign as _assign
from . import conv, creation, elementwise, indexing, movement, nn, reduce, sort
from .args import AxisError, Scalar, broadcast_shape, check_scalar, device_arg, scalar_dtype, to_dtype

__all__ = [
    "AutogradError", "AxisError", "NonDifferentiableError", "Scalar", "Tensor", "broadcast_shape", "from_dlpack",
    "no_grad",
]  # fmt: skip

#: the module ``Tensor.__array_namespace__`` returns (it imports Tensor, so it is found by name)
ARRAY_NAMESPACE = "uops.array_api"

#: id -> the leaf tensors requiring grad (set by the user, not made by an op): what ``backward()`` fills.
#: Keyed by id, not a WeakSet: a set would compare tensors with ``==``, which is elementwise here.
_leaves: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def _is_leaf(t: Tensor) -> bool:
    return _leaves.get(id(t)) is t


class _Casts:
    """Casts named like Python types; kept out of Tensor's namespace so annotations see the builtins."""

    def cast(self, dtype: DType | str | type) -> Tensor:
        raise NotImplementedError

    def float(self) -> Tensor:
        return self.cast(dtypes.float32)

    def int(self) -> Tensor:
        return self.cast(dtypes.int32)

    def bool(self) -> Tensor:
        return self.cast(dtypes.bool)


def _list_dtype(arr: np.ndarray, data: Sequence[Any]) -> DType:
    """The dtype of a nested list, like numpy 2 but with uops' defaults where the values fit them."""
    if arr.dtype == np.bool_:
        return dtypes.bool
    if arr.dtype == np.object_:
        flat = np.asarray(arr).reshape(-1)
        for v in flat:
            if isinstance(v, int):
                scalar_dtype(v)  # raises OverflowError naming the value
        raise TypeError(f"cannot make a Tensor from a list of mixed or non-numeric values ({arr.dtype})")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == np.uint64 and arr.size and arr.max() > np.iinfo(np.int64).max:
            return dtypes.uint64
        if arr.size and (arr.min() < dtypes.min(dtypes.default_int) or arr.max() > dtypes.max(dtypes.default_int)):
            return dtypes.int64
        return dtypes.default_int
    if np.issubdtype(arr.dtype, np.floating):
        with np.errstate(over="ignore"):
            overflows = np.isfinite(arr) & ~np.isfinite(arr.astype(to_numpy(dtypes.default_float)))
        return dtypes.float64 if overflows.any() else dtypes.default_float
    raise TypeError(f"cannot make a Tensor from a list of {arr.dtype} values")


class Tensor(_Casts):
    """A lazy n-dimensional array on one device."""

    # _shape_node, _shape: the shape of the node last asked about (ops ask for their operands' shapes many times)
    __slots__ = ("uop", "device", "grad", "_requires_grad", "_shape_node", "_shape")
    grad: Tensor | None
    _shape_node: UOp | None
    _shape: tuple[int, ...]
    #: numpy defers to Tensor's operators (``ndarray + Tensor`` is a Tensor), and ``np.asarray(t)`` reads the values
    __array_ufunc__ = None

    def __init__(
        self,
        data: Tensor | UOp | np.ndarray | Sequence[Any] | Scalar,
        device: str | None = None,
        dtype: DType | str | type | None = None,
        requires_grad: bool = False,
    ):
        self.grad = None
        self._requires_grad = False
        self._shape_node = None
        self._build(data, device, dtype)
        if requires_grad:
            self.requires_grad = True

    def _build(
        self,
        data: Tensor | UOp | np.ndarray | Sequence[Any] | Scalar,
        device: str | None,
        dtype: DType | str | type | None,
    ) -> None:
        dt = to_dtype(dtype)
        self.device = device_arg(device)
        if isinstance(data, UOp):
            self.uop: UOp = inplace.current(data if dt is None or dt == data.dtype else data.cast(dt))
            return
        if isinstance(data, Tensor):
            src = data.to(self.device) if device is not None else data
            self.device = src.device
            self.uop = src.uop if dt is None else src.cast(dt).uop
            self._requires_grad = src._requires_grad
            return
        if isinstance(data, (bool, int, float)) and not isinstance(data, np.generic):
            d = dt or scalar_dtype(data)
            self.uop = UOp.const(d, check_scalar(data, d))
            return
        if isinstance(data, (list, tuple)):
            if dt is None:
                arr = np.array(data)
                dt = _list_dtype(arr, data)
            else:  # numpy checks each Python value against the dtype (OverflowError for an int that does not fit)
                arr = np.array(data, dtype=to_numpy(dt) if dt != dtypes.bfloat16 else np.float32)
        elif isinstance(data, (np.ndarray, np.generic)):
            arr = np.asarray(data)
        else:
            raise TypeError(f"cannot make a Tensor from {type(data).__name__}; pass a numpy array, a list or a scalar")
        if dt is None:
            dt = from_numpy(arr.dtype)
        self.uop = upload(arr, dt, self.device)

    def _new(self, u: UOp, *others: Tensor) -> Tensor:
        """A tensor of node ``u`` on this tensor's device, made from this tensor (and ``others``): it requires
        grad when one of them does (inside ``no_grad`` it does not, and its node is detached)."""
        t = object.__new__(type(self))
        rg = self._requires_grad or any(o._requires_grad for o in others)
        if rg and not GRAD_ENABLED[0]:
            u, rg = move(u, "detach", None), False
        t.uop, t.device, t.grad, t._requires_grad, t._shape_node = inplace.current(u), self.device, None, rg, None
        return t

    # ----- autograd (rules in frontend/autograd.py) -----
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor: set on a leaf, inherited by every result of an op on it."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value == self._requires_grad:
            return
        if self._requires_grad and not _is_leaf(self):
            raise AutogradError(
                f"requires_grad can only be turned off on a leaf tensor; this one (shape {self.shape}) is the "
                "result of ops on tensors requiring grad: use .detach()"
            )
        if not value:
            self._requires_grad = False
            _leaves.pop(id(self), None)
            return
        if not dtypes.is_float(self.dtype):
            raise NonDifferentiableError(
                f"only floating-point tensors can require grad, this one is {self.dtype.name}; cast it first"
            )
        if not (self.uop.op is Ops.VIEW and self.uop.src[0].op is Ops.BUFFER):
            self.realize()  # a leaf is its own buffer: a lazy or constant node could be shared with others
        self._requires_grad = True
        _leaves[id(self)] = self

    @property
    def is_leaf(self) -> bool:
        """Whether this tensor was made by the user, not by an op on tensors requiring grad."""
        return not self._requires_grad or _is_leaf(self)

    def detach(self) -> Tensor:
        """The same value, with no gradient flowing back through it."""
        t = self._new(move(self.uop, "detach", None))
        t._requires_grad = False
        return t

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    no_grad = staticmethod(no_grad)

    def _root_grad(self, gradient: Tensor | np.ndarray | Scalar | None, what: str) -> UOp:
        if not self._requires_grad:
            raise AutogradError(
                f"{what} of a tensor that does not require grad (shape {self.shape}): none of the tensors it was "
                "computed from has requires_grad=True, or it was made under no_grad() or from .detach()"
            )
        if not dtypes.is_float(self.dtype):
            raise NonDifferentiableError(
                f"{what} of a {self.dtype.name} tensor: only floating-point tensors have gradients"
            )
        if gradient is None:
            if self.numel() != 1:
                raise AutogradError(
                    f"{what} of a non-scalar tensor (shape {self.shape}) needs a gradient argument of that shape "
                    "(the gradient of whatever the tensor feeds into); or reduce it first, e.g. .sum()"
                )
            return type(self).ones_like(self).uop
        g = gradient if isinstance(gradient, Tensor) else Tensor(gradient, device=self.device, dtype=self.dtype)
        if g.shape != self.shape:
            raise AutogradError(f"{what}: the gradient has shape {g.shape}, the tensor {self.shape}; they must agree")
        return g.cast(self.dtype).uop

    @classmethod
    def _untracked(cls, u: UOp, device: str) -> Tensor:
        """A tensor of node ``u`` that requires no grad and is not tracked as a reader (gradients, JIT replays)."""
        t = object.__new__(cls)
        t.uop, t.device, t.grad, t._requires_grad, t._shape_node = u, device, None, False, None
        return t

    def _grad_tensor(self, u: UOp) -> Tensor:
        return self._untracked(u.cast(self.dtype), self.device)

    def backward(self, gradient: Tensor | np.ndarray | Scalar | None = None) -> Tensor:
        """Add the gradient of this tensor to ``.grad`` of every leaf requiring grad it was computed from.

        Gradients accumulate over calls until ``.grad`` is set to None; they are lazy tensors (the backward
        graph is scheduled and fused when they are realized). ``gradient`` is needed unless this is a scalar."""
        root = self._root_grad(gradient, "backward()")
        by_node: dict[UOp, list[Tensor]] = {}
        for leaf in list(_leaves.values()):
            if leaf._requires_grad:
                by_node.setdefault(leaf.uop, []).append(leaf)
        grads = autograd.compute_gradients(self.uop, root, set(by_node))
        for node, g in grads.items():
            for leaf in by_node[node]:
                new = leaf._grad_tensor(g)
                leaf.grad = new if leaf.grad is None else leaf.grad + new
        return self

    def gradient(self, *targets: Tensor, gradient: Tensor | np.ndarray | Scalar | None = None) -> list[Tensor]:
        """The gradients of this tensor with respect to ``targets`` (zeros for one it does not depend on);
        no ``.grad`` is touched."""
        for t in targets:
            if not dtypes.is_float(t.dtype):
                raise NonDifferentiableError(
                    f"gradient with respect to a {t.dtype.name} tensor (shape {t.shape}): only floating-point "
                    "tensors have gradients"
                )
        root = self._root_grad(gradient, "gradient()")
        grads = autograd.compute_gradients(self.uop, root, {t.uop for t in targets})
        return [t._grad_tensor(grads[t.uop]) if t.uop in grads else t.zeros_like() for t in targets]

    # ----- basic properties -----
    @property
    def shape(self) -> tuple[int, ...]:
        u = self.uop
        if self._shape_node is not u:
            self._shape, self._shape_node = shape_of(u), u
        return self._shape

    @property
    def dtype(self) -> DType:
        return self.uop.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def size(self) -> int:
        """The number of elements (numpy's and the Array API standard's attribute)."""
        return math.prod(self.shape)

    @property
    def mT(self) -> Tensor:  # noqa: N802
        """The last two axes swapped (a stack of matrices transposed)."""
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dimensions, got shape {self.shape}")
        return self.transpose(-1, -2)

    def to_device(self, device: str, stream: Any = None) -> Tensor:
        return self.to(device)

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __index__(self) -> int:
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"only integer tensors can be used as an index, this one is {self.dtype.name}")
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        """numpy's rule: a one-element tensor is its value's truth; any other size is ambiguous."""
        n = self.numel()
        if n != 1:
            what = "an empty tensor" if n == 0 else "a tensor with more than one element"
            raise ValueError(f"the truth value of {what} is ambiguous (shape {self.shape}); use .any() or .all()")
        return bool(self.item())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise ValueError("a Tensor's values live on its device: reading them makes a copy (copy=False)")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        state = "realized" if self.uop.op is Ops.VIEW and self.uop.src[0].op is Ops.BUFFER else "lazy"
        return f"<Tensor shape={self.shape} dtype={self.dtype.name} device={self.device} {state}>"

    __hash__ = object.__hash__

    # ----- realization -----
    def schedule(self, *others: Tensor) -> list[ScheduleItem]:
        """The kernels and copies realizing this tensor (and ``others``) would run; runs nothing."""
        return create_schedule([t.uop for t in (self, *others)], self.device).items

    def realize(self, *others: Tensor) -> Tensor:
        """Compute this tensor (and ``others``) now; afterwards each is backed by a buffer."""
        ts = (self, *others)
        for t, v in zip(ts, realize([t.uop for t in ts], self.device)):
            nv = v if v is t.uop else inplace.own(t.uop, v, self.device)
            if t._requires_grad and not _is_leaf(t):
                autograd.remember_origin(nv, t.uop)
            t.uop = nv
        return self

    def numpy(self) -> np.ndarray:
        """A host copy as a numpy array (bfloat16 comes back as float32)."""
        return readback(self.realize().uop, self.device)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> Scalar:
        if self.numel() != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def to(self, device: str) -> Tensor:
        """This tensor on another device (a copy, through host memory between backends)."""
        dev = device_arg(device)
        if dev == self.device:
            return self
        if device_of(self.uop) is None:  # pure constants live nowhere yet
            return Tensor(self.uop, device=dev)
        out = Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), dev), device=dev)
        out._requires_grad = self._requires_grad and GRAD_ENABLED[0]
        return out

    def contiguous(self) -> Tensor:
        """A kernel boundary: the value is materialised in its own buffer."""
        u = self.uop
        if u.op is Ops.VIEW and u.src[0].op is Ops.BUFFER and u.arg.contiguous:
            return self
        return self._new(UOp(Ops.CONTIGUOUS, self.dtype, (u,)))

    def cast(self, dtype: DType | str | type) -> Tensor:
        dt = to_dtype(dtype)
        if dt is None:
            raise TypeError("cast needs a dtype, got None")
        if dt == self.dtype:
            return self
        return self._new(UOp(Ops.CAST, dt, (self.uop,)))

    @property
    def T(self) -> Tensor:  # noqa: N802
        return self.permute(tuple(reversed(range(self.ndim))))

    # ----- creation -----
    full = classmethod(creation.full)
    zeros = classmethod(creation.zeros)
    ones = classmethod(creation.ones)
    empty = classmethod(creation.empty)
    arange = classmethod(creation.arange)
    eye = classmethod(creation.eye)
    manual_seed = classmethod(creation.manual_seed)
    from_dlpack = classmethod(creation.from_dlpack)
    rand = classmethod(creation.rand)
    randn = classmethod(creation.randn)
    uniform = classmethod(creation.uniform)
    full_like = creation.full_like
    zeros_like = creation.zeros_like
    ones_like = creation.ones_like
    empty_like = creation.empty_like
    rand_like = creation.rand_like
    randn_like = creation.randn_like

    # ----- movement and indexing -----
    _view = movement.view
    _moved = movement.moved
    _broadcast_to = movement.broadcast_valid
    _axis = movement.axis
    _stride = movement.stride
    reshape = movement.reshape
    view = movement.reshape
    permute = movement.permute
    transpose = movement.transpose
    expand = movement.expand
    broadcast_to = movement.broadcast_to
    pad = movement.pad
    shrink = movement.shrink
    flip = movement.flip
    squeeze = movement.squeeze
    unsqueeze = movement.unsqueeze
    flatten = movement.flatten
    squeeze_axes = movement.squeeze_axes
    __getitem__ = indexing.getitem
    __setitem__ = _assign.setitem
    assign = _assign.assign
    gather = indexing.gather
    take_along_axis = indexing.take_along_axis
    scatter = indexing.scatter
    scatter_add = indexing.scatter_add
    cumsum = indexing.cumsum
    tril = indexing.tril
    triu = indexing.triu
    masked_fill = indexing.masked_fill
    topk = indexing.topk
    cat = movement.cat
    cat_with = movement.cat
    stack = movement.stack

    # ----- elementwise -----
    _same_device = elementwise.same_device
    _operands = elementwise.operands
    _alu = elementwise.alu
    _float = elementwise.as_float
    _cmp = elementwise.cmp
    _order_flip = elementwise.order_flip
    add = elementwise.add
    sub = elementwise.sub
    mul = elementwise.mul
    div = elementwise.div
    floordiv = elementwise.floordiv
    mod = elementwise.mod
    pow = elementwise.pow
    maximum = elementwise.maximum
    minimum = elementwise.minimum
    where = elementwise.where
    logical_not = elementwise.logical_not
    exp2 = elementwise.exp2
    log2 = elementwise.log2
    exp = elementwise.exp
    log = elementwise.log
    sqrt = elementwise.sqrt
    rsqrt = elementwise.rsqrt
    reciprocal = elementwise.reciprocal
    sin = elementwise.sin
    cos = elementwise.cos
    tan = elementwise.tan
    trunc = elementwise.trunc
    floor = elementwise.floor
    ceil = elementwise.ceil
    round_half_away = elementwise.round_half_away
    abs = elementwise.abs
    sign = elementwise.sign
    clip = elementwise.clip
    square = elementwise.square
    isnan = elementwise.isnan
    isinf = elementwise.isinf
    isfinite = elementwise.isfinite
    signbit = elementwise.signbit
    copysign = elementwise.copysign
    expm1 = elementwise.expm1
    log1p = elementwise.log1p
    log10 = elementwise.log10
    sinh = elementwise.sinh
    cosh = elementwise.cosh
    atan = elementwise.atan
    atan2 = elementwise.atan2
    asin = elementwise.asin
    acos = elementwise.acos
    asinh = elementwise.asinh
    acosh = elementwise.acosh
    atanh = elementwise.atanh
    hypot = elementwise.hypot
    logaddexp = elementwise.logaddexp
    round_half_even = elementwise.round_half_even
    left_shift = elementwise.left_shift
    right_shift = elementwise.right_shift

    def __lshift__(self, y: Tensor | Scalar) -> Tensor:
        return self.left_shift(y)

    def __rshift__(self, y: Tensor | Scalar) -> Tensor:
        return self.right_shift(y)

    def __pos__(self) -> Tensor:
        return self

    def __add__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.add(y)

    def __radd__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.add(y, True)

    def __sub__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.sub(y)

    def __rsub__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.sub(y, True)

    def __mul__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.mul(y)

    def __rmul__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.mul(y, True)

    def __truediv__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.div(y)

    def __rtruediv__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.div(y, True)

    def __floordiv__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.floordiv(y)

    def __rfloordiv__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.floordiv(y, True)

    def __mod__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.mod(y)

    def __rmod__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.mod(y, True)

    def __pow__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return self.pow(y)

    def __rpow__(self, y: Scalar | np.ndarray) -> Tensor:
        return self.pow(y, True)

    def __and__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_and(self, y)

    def __rand__(self, y: Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_and(self, y, True)

    def __or__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_or(self, y)

    def __ror__(self, y: Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_or(self, y, True)

    def __xor__(self, y: Tensor | Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_xor(self, y)

    def __rxor__(self, y: Scalar | np.ndarray) -> Tensor:
        return elementwise.bitwise_xor(self, y, True)

    __neg__ = elementwise.neg
    __invert__ = elementwise.invert
    __abs__ = elementwise.abs
    __lt__ = elementwise.lt
    __gt__ = elementwise.gt
    __le__ = elementwise.le
    __ge__ = elementwise.ge
    __eq__ = elementwise.eq  # type: ignore[assignment]
    __ne__ = elementwise.ne  # type: ignore[assignment]

    # ----- reductions -----
    _axes = reduce.axes
    _reduce = reduce.reduce
    _acc_dtype = reduce.acc_dtype
    sum = reduce.sum
    prod = reduce.prod
    max = reduce.max
    min = reduce.min
    any = reduce.any
    all = reduce.all
    mean = reduce.mean
    var = reduce.var
    std = reduce.std
    argmax = reduce.argmax
    argmin = reduce.argmin

    # ----- nn helpers and linear algebra -----
    relu = nn.relu
    sigmoid = nn.sigmoid
    tanh = nn.tanh
    gelu = nn.gelu
    logsumexp = nn.logsumexp
    softmax = nn.softmax
    log_softmax = nn.log_softmax
    matmul = nn.matmul
    dot = nn.matmul
    linear = nn.linear
    __matmul__ = nn.matmul
    __rmatmul__ = nn.rmatmul
    one_hot = nn.one_hot
    cross_entropy = nn.cross_entropy
    nll_loss = nn.nll_loss
    sparse_categorical_crossentropy = nn.sparse_categorical_crossentropy
    binary_crossentropy = nn.binary_crossentropy
    binary_crossentropy_logits = nn.binary_crossentropy_logits
    dropout = nn.dropout
    batchnorm = nn.batchnorm
    batchnorm_train = nn.batchnorm_train

    # ----- convolution and pooling -----
    _pool = conv.pool
    conv2d = conv.conv2d
    conv1d = conv.conv1d
    max_pool2d = conv.max_pool2d
    avg_pool2d = conv.avg_pool2d

    # ----- sorting -----
    ranks = sort.ranks
    argsort = sort.argsort
    sort = sort.sort

    # ----- interchange: DLPack and the Array API standard -----
    def __dlpack__(
        self,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """This tensor's memory as a DLPack capsule (`uops.frontend.dlpack.export_dlpack`). It is computed
        first, unless a copy is asked for, so the consumer shares the buffer this tensor keeps."""
        if not copy:
            self.realize()
        return dlpack.export_dlpack(self.uop, self.device, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack.dlpack_device(self.device)

    def __array_namespace__(self, api_version: str | None = None) -> Any:
        """``uops.array_api``, the Python Array API standard's namespace over Tensor.

        The namespace is a layer above Tensor, so it is bound by name when first asked for, the way
        ``uops`` binds its public names (`uops._lazy`), never imported from here.
        """
        return importlib.import_module(ARRAY_NAMESPACE).namespace(api_version)


from_dlpack = Tensor.from_dlpack
