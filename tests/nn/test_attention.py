"""uops.nn.attention against numpy: scaled dot-product attention (masks, causal, scale), RMS norm, rotary
embeddings and Embedding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uops import Tensor
from uops.nn.attention import Embedding, apply_rotary, precompute_freqs_cis, rms_norm, scaled_dot_product_attention
from uops.testing.kit.helpers import rnd

DEV = ["CPU", "PYTHON"]


def _sdpa(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float) -> np.ndarray:
    s = (q @ k.swapaxes(-1, -2)).astype(np.float64) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("device", DEV)
def test_scaled_dot_product_attention(device: str) -> None:
    q, k, v = rnd(2, 3, 5, 8), rnd(2, 3, 7, 8), rnd(2, 3, 7, 4)
    T = lambda a: Tensor(a, device=device)  # noqa: E731
    got = scaled_dot_product_attention(T(q), T(k), T(v))
    np.testing.assert_allclose(got.numpy(), _sdpa(q, k, v, None, 1 / math.sqrt(8)), rtol=1e-4, atol=1e-5)
    causal = np.tril(np.ones((5, 7), bool))
    got = scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True, scale=0.5)
    np.testing.assert_allclose(got.numpy(), _sdpa(q, k, v, causal, 0.5), rtol=1e-4, atol=1e-5)
    bias = rnd(5, 7)
    got = scaled_dot_product_attention(T(q), T(k), T(v), mask=T(bias))
    np.testing.assert_allclose(got.numpy(), _sdpa(q, k, v, bias, 1 / math.sqrt(8)), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="do not fit"):
        scaled_dot_product_attention(T(q), T(v), T(v))


@pytest.mark.parametrize("device", DEV)
def test_rms_norm(device: str) -> None:
    x, w = rnd(3, 6), rnd(6)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
    got = rms_norm(Tensor(x, device=device), Tensor(w, device=device), 1e-5)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEV)
def test_rotary(device: str) -> None:
    dim, T_, theta = 8, 5, 500.0
    cos, sin = precompute_freqs_cis(dim, 16, theta, device=device)
    freqs = theta ** (-np.arange(0, dim, 2) / dim)
    ang = np.arange(16)[:, None] * freqs
    np.testing.assert_allclose(cos.numpy(), np.cos(ang), rtol=1e-6, atol=1e-6)
    x = rnd(2, T_, dim)
    got = apply_rotary(Tensor(x, device=device), cos[:T_], sin[:T_]).numpy()
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * ang[:T_])  # a rotation of each pair as a complex number
    want = np.stack([z.real, z.imag], -1).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="even head dim"):
        precompute_freqs_cis(7, 4)


def test_embedding() -> None:
    Tensor.manual_seed(3)
    emb = Embedding(11, 4, device="CPU")
    assert emb.weight.shape == (11, 4)
    tokens = np.array([[1, 10, 1], [0, 5, 2]], np.int32)
    out = emb(Tensor(tokens, device="CPU"))
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[tokens])
