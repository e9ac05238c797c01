"""Neural-network helpers: activations, softmax family, matmul and linear layers, losses, one_hot,
dropout and batchnorm (compositions of the rest)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np

from uops.dtypes import DType, dtypes
from uops.errors import UopsError
from uops.ir.ops import Ops

from .args import broadcast_shape, int_arg, result_dtype, to_dtype

if TYPE_CHECKING:
    from . import Tensor


def relu(self: Tensor) -> Tensor:
    return self.maximum(0)


def sigmoid(self: Tensor) -> Tensor:
    return 1.0 / (1.0 + (-self._float()).exp())


def tanh(self: Tensor) -> Tensor:
    x = self._float()
    return (x == 0).where(x, 2.0 * (2.0 * x).sigmoid() - 1.0)  # tanh(-0.0) is -0.0


def gelu(self: Tensor) -> Tensor:
    """The tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = self._float()
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)).tanh())


def logsumexp(self: Tensor, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    x = self._float()
    m = x.max(axis, keepdim=True)
    mm = (m.abs() == math.inf).where(0.0, m)  # keep -inf rows from producing nan
    out = (x - mm).exp().sum(axis, keepdim=True).log() + mm
    return out if keepdim else out.squeeze_axes(self._axes(axis))


def softmax(self: Tensor, axis: int = -1) -> Tensor:
    """Each value times the reciprocal of its row's sum, as torch's kernel does: one division per row, not per
    element (within 1.5 ulp of a division; 2048^2 on CPU, kernel alone: 1.29 -> 1.18 ms)."""
    x = self._float()
    e = (x - x.max(axis, keepdim=True)).exp()
    return e * e.sum(axis, keepdim=True).reciprocal()


def log_softmax(self: Tensor, axis: int = -1) -> Tensor:
    x = self._float()
    m = x - x.max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()


def matmul(self: Tensor, y: Tensor | np.ndarray) -> Tensor:
    """numpy matmul: batched over leading dims (broadcast), vectors promoted and squeezed."""
    if isinstance(y, np.ndarray):
        y = type(self)(y, device=self.device)
    if not isinstance(y, type(self)):
        raise TypeError(f"matmul needs a Tensor operand, got {type(y).__name__}")
    self._same_device(y)
    if self.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul needs at least 1-D operands, got shapes {self.shape} and {y.shape}")
    a = self.unsqueeze(0) if self.ndim == 1 else self
    b = y.unsqueeze(-1) if y.ndim == 1 else y
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul inner dimensions differ: {self.shape} has {a.shape[-1]} columns, {y.shape} has {b.shape[-2]} rows"
        )
    dt = result_dtype(self.device, a.dtype, b.dtype)
    if y.ndim == 1 and self.ndim >= 2:  # a matrix-vector product: the vector broadcast over the rows, 2 ops not 8
        out = (self.cast(dt) * y.cast(dt)).sum(-1)
    else:
        batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        a3 = a.cast(dt).reshape(a.shape[:-1] + (1, k))  # (..., M, 1, K)
        b3 = b.cast(dt).transpose(-1, -2).reshape(b.shape[:-2] + (1, n, k))  # (..., 1, N, K)
        out = (a3._broadcast_to(batch + (m, n, k)) * b3._broadcast_to(batch + (m, n, k))).sum(-1)
        out = out.squeeze(-2) if self.ndim == 1 else out
        out = out.squeeze(-1) if y.ndim == 1 else out
    # numpy: int32 @ int32 is int32, bool @ bool is bool (any of the ANDs), not a count
    return out if out.dtype == dt else out.cast(dt)


def rmatmul(self: Tensor, y: Tensor | np.ndarray) -> Tensor:
    return (type(self)(y, device=self.device) if isinstance(y, np.ndarray) else y).matmul(self)


def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``self @ weight.T + bias`` with ``weight`` shaped (out_features, in_features), as in PyTorch."""
    out = self.matmul(weight.T)
    return out + bias if bias is not None else out


class LossArgumentError(UopsError, ValueError):
    """A loss or an nn helper got arguments that do not fit together (shapes, dtypes, options)."""


Reduction = Literal["mean", "sum", "none"]


def _reduced(loss: Tensor, reduction: Reduction, count: Tensor | int | None = None) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean() if count is None else loss.sum() / count
    raise LossArgumentError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def one_hot(self: Tensor, num_classes: int = -1, dtype: DType | str | None = None) -> Tensor:
    """``self`` (integer class indices) with a new last axis of ``num_classes`` zeros and a one at each
    index (``-1``: the largest index + 1, which reads the values). int32 by default."""
    if not dtypes.is_int(self.dtype):
        raise LossArgumentError(f"one_hot needs integer class indices, got {self.dtype.name}")
    if num_classes == -1:
        num_classes = int(self.max().item()) + 1 if self.numel() else 0
    n = int_arg(num_classes, "num_classes")
    if n < 0:
        raise LossArgumentError(f"num_classes must be >= 0 (or -1), got {n}")
    classes = type(self).arange(n, dtype=self.dtype, device=self.device)
    return (self.unsqueeze(-1) == classes).cast(to_dtype(dtype) or dtypes.default_int)


def _host_values(t: Tensor) -> np.ndarray | None:
    """``t``'s values on the host for a check. Inside a ``jit`` capture no kernel may run for it and the check is
    not replayed, so only a tensor already in memory (an input) is read, and None is returned for others."""
    from uops.frontend import realize as _realize

    if _realize.recorder is None:
        return t.numpy()
    u = t.uop
    if u.op is not Ops.VIEW or u.src[0].op is not Ops.BUFFER or not u.arg.contiguous:
        return None
    b = u.src[0]
    host = _realize.pending.get(b)
    if host is None:
        mem = _realize._buffers.get(b)
        host = None if mem is None else mem.numpy()
    if host is None or u.arg.size != host.size:
        return None
    return host.reshape(t.shape)


def _check_labels(target: Tensor, logits: tuple[int, ...], ax: int, ignore_index: int | None, name: str) -> None:
    """Integer class labels shaped like the ``logits`` without the class axis ``ax``, each a class or
    ``ignore_index``: a bad one is named (with its position) here, where a one-hot past the classes would
    silently count for nothing."""
    shape, n_cls = logits[:ax] + logits[ax + 1 :], logits[ax]
    if not dtypes.is_int(target.dtype):
        raise LossArgumentError(
            f"{name}: labels must be integer class indices of shape {shape}, got {target.dtype.name} of shape "
            f"{target.shape} (float targets are class probabilities shaped like the logits)"
        )
    if target.shape != shape:
        raise LossArgumentError(
            f"{name}: integer labels must have the logits' shape {logits} without the class axis {ax}, i.e. "
            f"{shape}; got {target.shape}"
        )
    labels = _host_values(target)
    if labels is None or labels.size == 0:
        return
    bad = (labels < 0) | (labels >= n_cls)
    if ignore_index is not None:
        bad &= labels != ignore_index
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        skip = "" if ignore_index is None else f" or ignore_index={ignore_index}"
        raise LossArgumentError(
            f"{name}: label {int(labels[where])} at index {where} is not a class: labels must be in [0, {n_cls})"
            f"{skip} (the logits have {n_cls} classes on axis {ax})"
        )


def _class_nll(
    self: Tensor,
    target: Tensor,
    axis: int,
    reduction: Reduction,
    label_smoothing: float,
    ignore_index: int | None,
    name: str,
) -> Tensor:
    """Cross entropy of logits ``self`` against integer classes (or class probabilities) along ``axis``."""
    if not 0.0 <= label_smoothing <= 1.0:
        raise LossArgumentError(f"{name}: label_smoothing must be in [0, 1], got {label_smoothing}")
    if self.ndim == 0:
        raise LossArgumentError(f"{name} needs logits with a class axis, got a 0-d tensor")
    ax = self._axis(axis)
    n_cls = self.shape[ax]
    logp = self.log_softmax(ax)
    if dtypes.is_float(target.dtype) and target.shape == self.shape:
        probs, valid = target, None
    else:
        _check_labels(target, self.shape, ax, ignore_index, name)
        probs = target.one_hot(n_cls, dtype=logp.dtype)
        if ax != self.ndim - 1:
            probs = probs.permute(tuple(range(ax)) + (self.ndim - 1,) + tuple(range(ax, self.ndim - 1)))
        valid = None if ignore_index is None else target != ignore_index
    if label_smoothing:
        probs = probs * (1.0 - label_smoothing) + label_smoothing / n_cls
    loss = -(logp * probs).sum(ax)
    if valid is None:
        return _reduced(loss, reduction)
    loss = valid.where(loss, 0.0)
    return _reduced(loss, reduction, valid.sum().maximum(1).cast(loss.dtype))  # an int64 count would widen to float64


def cross_entropy(
    self: Tensor,
    target: Tensor,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    ignore_index: int = -100,
) -> Tensor:
    """``torch.nn.functional.cross_entropy``: logits (N, C, ...) with classes on axis 1 (or (C,)),
    ``target`` integer labels (N, ...) or class probabilities shaped like the logits; labels equal
    to ``ignore_index`` count for nothing (and not in the mean)."""
    return _class_nll(
        self, target, 1 if self.ndim > 1 else 0, reduction, label_smoothing, ignore_index, "cross_entropy"
    )


def nll_loss(
    self: Tensor,
    target: Tensor,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
) -> Tensor:
    """``torch.nn.functional.nll_loss``: ``self`` holds log-probabilities (N, C, ...) with classes on axis 1 (or
    (C,)), ``target`` integer labels (N, ...); the loss is ``-self[n, target[n]]``, labels equal to
    ``ignore_index`` count for nothing (and not in the mean)."""
    if self.ndim == 0:
        raise LossArgumentError("nll_loss needs log-probabilities with a class axis, got a 0-d tensor")
    ax = 1 if self.ndim > 1 else 0
    n_cls = self.shape[ax]
    _check_labels(target, self.shape, ax, ignore_index, "nll_loss")
    hit = target.one_hot(n_cls, dtype=dtypes.bool)
    if ax != self.ndim - 1:
        hit = hit.permute(tuple(range(ax)) + (self.ndim - 1,) + tuple(range(ax, self.ndim - 1)))
    loss = -hit.where(self._float(), 0.0).sum(ax)  # a -inf of another class stays out (no -inf * 0)
    valid = target != ignore_index
    return _reduced(valid.where(loss, 0.0), reduction, valid.sum().maximum(1))


def sparse_categorical_crossentropy(
    self: Tensor,
    target: Tensor,
    ignore_index: int = -1,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """tinygrad's and Keras' spelling: logits (..., C) with classes on the last axis, integer labels (...)."""
    if dtypes.is_float(target.dtype):
        raise LossArgumentError(f"sparse_categorical_crossentropy needs integer labels, got {target.dtype.name}")
    return _class_nll(self, target, -1, reduction, label_smoothing, ignore_index, "sparse_categorical_crossentropy")


def _binary_target(self: Tensor, target: Tensor, name: str) -> Tensor:
    if target.shape != self.shape:
        raise LossArgumentError(f"{name}: target {target.shape} must have the input's shape {self.shape}")
    return target._float()


def binary_crossentropy(self: Tensor, target: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Binary cross entropy of probabilities ``self``; each log is clamped at -100 as in torch."""
    y = _binary_target(self, target, "binary_crossentropy")
    p = self._float()
    loss = -(y * p.log().maximum(-100.0) + (1.0 - y) * (1.0 - p).log().maximum(-100.0))
    return _reduced(loss, reduction)


def binary_crossentropy_logits(
    self: Tensor, target: Tensor, reduction: Reduction = "mean", pos_weight: Tensor | None = None
) -> Tensor:
    """Binary cross entropy of logits ``self``, stable for large |x|: ``max(x, 0) - x y + log(1 + e^-|x|)``."""
    y = _binary_target(self, target, "binary_crossentropy_logits")
    x = self._float()
    softplus_neg = (1.0 + (-x.abs()).exp()).log() + (-x).maximum(0)  # log(1 + e^-x), stably
    if pos_weight is None:
        return _reduced((1.0 - y) * x + softplus_neg, reduction)
    return _reduced((1.0 - y) * x + (1.0 + (pos_weight - 1.0) * y) * softplus_neg, reduction)


def dropout(self: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` while training;
    the identity otherwise. The mask comes from the seeded streams of ``Tensor.manual_seed``."""
    if not 0.0 <= p <= 1.0:
        raise LossArgumentError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return self
    if p == 1.0:
        return self.zeros_like()
    keep = type(self).rand(*self.shape, device=self.device) >= p
    return keep.where(self._float() * (1.0 / (1.0 - p)), 0.0)


class BatchStats(NamedTuple):
    """A training batchnorm's output and the batch statistics a running-stat update takes."""

    out: Tensor
    mean: Tensor  #: per channel
    var: Tensor  #: per channel, unbiased (divided by n - 1, as torch's running_var takes it)


def _channel_shape(self: Tensor, axis: int, name: str) -> tuple[int, tuple[int, ...]]:
    ax = self._axis(axis, what=f"{name} channel axis")
    return ax, tuple(s if i == ax else 1 for i, s in enumerate(self.shape))


def batchnorm(
    self: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    mean: Tensor,
    invstd: Tensor,
    axis: int = 1,
) -> Tensor:
    """``(x - mean) * invstd * weight + bias`` with per-channel vectors along ``axis`` (the eval form:
    pass the running mean and ``(running_var + eps).rsqrt()``)."""
    ax, shp = _channel_shape(self, axis, "batchnorm")
    c = self.shape[ax]
    for v, what in ((weight, "weight"), (bias, "bias"), (mean, "mean"), (invstd, "invstd")):
        if v is not None and v.shape != (c,):
            raise LossArgumentError(f"batchnorm: {what} must have shape ({c},) for channel axis {ax}, got {v.shape}")
    scale = invstd if weight is None else invstd * weight
    out = (self._float() - mean.reshape(shp)) * scale.reshape(shp)
    return out if bias is None else out + bias.reshape(shp)


def batchnorm_train(
    self: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    axis: int = 1,
) -> BatchStats:
    """The training form: normalise by this batch's statistics over every axis but the channel
    ``axis`` (biased variance, as torch), and return them for the running-stat update."""
    ax, _ = _channel_shape(self, axis, "batchnorm_train")
    red = tuple(i for i in range(self.ndim) if i != ax)
    n = math.prod(self.shape[i] for i in red)
    if n < 2:
        raise LossArgumentError(f"batchnorm_train needs more than one value per channel, got shape {self.shape}")
    x = self._float()
    mean = x.mean(red)
    var = x.var(red)
    out = x.batchnorm(weight, bias, mean, (var + eps).rsqrt(), ax)
    return BatchStats(out, mean, var * (n / (n - 1)))
