"""Gradients on ``device`` against numpy's closed forms: a backward graph is ordinary kernels (matmuls,
reductions with their epilogues, movement as index math), so a backend that runs the forward ops
must run these too. float32 throughout, so every device takes part."""

from __future__ import annotations

import numpy as np

from uops import Tensor
from uops.testing.kit.helpers import close, rnd


def test_linear_relu_softmax_cross_entropy(device):
    x, w, b = rnd(5, 4), rnd(4, 3), rnd(3)
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0]]
    tx, tw, tb = (Tensor(a, device=device, requires_grad=True) for a in (x, w, b))
    z = (tx @ tw + tb).relu()
    loss = -(z.log_softmax(-1) * Tensor(onehot, device=device)).sum()
    gw, gb, gx = loss.gradient(tw, tb, tx)
    zr = np.maximum(x @ w + b, 0)
    sm = np.exp(zr - zr.max(-1, keepdims=True))
    sm /= sm.sum(-1, keepdims=True)
    dz = (sm - onehot) * (x @ w + b > 0)
    close(gw, x.T @ dz, rtol=1e-4, atol=1e-5)
    close(gb, dz.sum(0), rtol=1e-4, atol=1e-5)
    close(gx, dz @ w.T, rtol=1e-4, atol=1e-5)


def test_elementwise_and_reductions(device):
    a = rnd(3, 4, lo=0.5, hi=2.0)
    t = Tensor(a, device=device, requires_grad=True)
    ((t.exp() * t.sqrt()).sum() + t.log().mean() + t.max(1).sum()).backward()
    assert t.grad is not None
    m = a == a.max(1, keepdims=True)
    ref = np.exp(a) * np.sqrt(a) + np.exp(a) * 0.5 / np.sqrt(a) + 1 / (a * a.size) + m / m.sum(1, keepdims=True)
    close(t.grad, ref, rtol=1e-4, atol=1e-5)


def test_movement_windows(device):
    """Overlapping windows (pad, then two shifted slices) and a flip: each input's gradient counts its uses."""
    a = rnd(6, 5)
    wts = rnd(7, 5)
    t = Tensor(a, device=device, requires_grad=True)
    p = t.pad(((1, 1), (0, 0)))
    win = p[:-1] + 2.0 * p[1:].flip(1)
    (win * Tensor(wts, device=device)).sum().backward()
    assert t.grad is not None
    ref = np.zeros((8, 5), dtype=np.float32)
    ref[:-1] += wts
    ref[1:] += 2.0 * wts[:, ::-1]
    close(t.grad, ref[1:-1], rtol=1e-5, atol=1e-5)
