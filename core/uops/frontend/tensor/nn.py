"""Neural-network helpers: activations, softmax family, matmul and linear layers (compositions of the rest)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from uops.dtypes import dtypes, least_upper_dtype

from .args import broadcast_shape

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
    x = self._float()
    e = (x - x.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)


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
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    dt = least_upper_dtype(a.dtype, b.dtype)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    a3 = a.cast(dt).reshape(a.shape[:-1] + (1, k))  # (..., M, 1, K)
    b3 = b.cast(dt).transpose(-1, -2).reshape(b.shape[:-2] + (1, n, k))  # (..., 1, N, K)
    out = (a3.expand(batch + (m, n, k)) * b3.expand(batch + (m, n, k))).sum(-1)
    if dtypes.is_bool(dt):  # numpy: bool @ bool is bool (any of the ANDs), not a count
        out = out.cast(dtypes.bool)
    if self.ndim == 1:
        out = out.squeeze(-2)
    if y.ndim == 1:
        out = out.squeeze(-1)
    return out


def rmatmul(self: Tensor, y: Tensor | np.ndarray) -> Tensor:
    return (type(self)(y, device=self.device) if isinstance(y, np.ndarray) else y).matmul(self)


def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``self @ weight.T + bias`` with ``weight`` shaped (out_features, in_features), as in PyTorch."""
    out = self.matmul(weight.T)
    return out + bias if bias is not None else out
