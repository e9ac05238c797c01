"""Attention pieces of a transformer: scaled dot-product attention, RMS norm, rotary embeddings, Embedding.

Compositions of Tensor ops (no kernels of their own), so every backend runs them and the scheduler
fuses them like any other expression.
"""

from __future__ import annotations

import math

import numpy as np

from uops.dtypes import dtypes
from uops.frontend.tensor import Tensor

__all__ = ["Embedding", "apply_rotary", "precompute_freqs_cis", "rms_norm", "scaled_dot_product_attention"]


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """torch's ``scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v`` over the last two dims.

    ``q`` is (..., L, E), ``k`` (..., S, E), ``v`` (..., S, Ev). A bool ``mask`` keeps where true; a float one is
    added. ``is_causal`` keeps ``j <= i`` (the top-left aligned lower triangle, as torch)."""
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"attention: q {q.shape}, k {k.shape} and v {v.shape} do not fit (..., L, E)/(..., S, E)/(..., S, Ev)"
        )
    if is_causal and mask is not None:
        raise ValueError("attention: pass either mask or is_causal, not both (as torch)")
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-1, -2)) * s
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]  # noqa: N806
        mask = Tensor.ones(L, S, dtype=dtypes.bool, device=q.device).tril()
    if mask is not None:
        if dtypes.is_bool(mask.dtype):
            scores = mask.where(scores, -math.inf)
        else:
            scores = scores + mask
    return scores.softmax(-1) @ v


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x^2, last dim) + eps) * weight``."""
    xf = x._float()
    out = xf * ((xf * xf).mean(-1, keepdim=True) + eps).rsqrt()
    return out * weight if weight is not None else out


def precompute_freqs_cis(
    dim: int, end: int, theta: float = 10000.0, device: str | None = None
) -> tuple[Tensor, Tensor]:
    """Rotary tables: ``cos`` and ``sin`` of ``position * theta^(-2i/dim)``, each (end, dim // 2)."""
    if dim % 2:
        raise ValueError(f"rotary embeddings need an even head dim, got {dim}")
    freqs = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64)[: dim // 2] / dim)
    angles = np.outer(np.arange(end, dtype=np.float64), freqs)
    return Tensor(np.cos(angles).astype(np.float32), device=device), Tensor(
        np.sin(angles).astype(np.float32), device=device
    )


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair ``(x[..., 2i], x[..., 2i+1])`` of ``x`` (..., T, dim) by the angles of ``cos``/``sin``
    (T, dim // 2) — the interleaved (llama) layout; slice the tables to the positions first."""
    d = x.shape[-1]
    if d % 2 or cos.shape[-1] != d // 2:
        raise ValueError(f"apply_rotary: x's last dim {d} must be even and twice the tables' ({cos.shape[-1]})")
    pairs = x.reshape(x.shape[:-1] + (d // 2, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    re = a * cos - b * sin
    im = a * sin + b * cos
    return re.unsqueeze(-1).cat(im.unsqueeze(-1), dim=-1).reshape(x.shape)


class Embedding:
    """A table of ``vocab_size`` vectors of ``dim``: ``emb(idx)`` is ``weight[idx]`` (idx an integer tensor)."""

    def __init__(self, vocab_size: int, dim: int, device: str | None = None):
        self.vocab_size, self.dim = vocab_size, dim
        self.weight = Tensor.randn(vocab_size, dim, device=device)

    def __call__(self, idx: Tensor) -> Tensor:
        return self.weight[idx]
