"""Losses, one_hot, dropout and batchnorm on Tensor, against numpy formulas written out here."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.frontend.tensor.nn import LossArgumentError
from uops.testing import devices_from_env

DEVICES = devices_from_env()

DEV = "CPU" if "CPU" in DEVICES else "PYTHON"
RNG = np.random.default_rng(3)


def np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x - x.max(axis, keepdims=True)
    return m - np.log(np.exp(m).sum(axis, keepdims=True))


def test_one_hot():
    y = np.array([[0, 3], [2, 1]], dtype=np.int32)
    out = Tensor(y, device=DEV).one_hot(5)
    assert out.dtype == dtypes.int32 and out.shape == (2, 2, 5)
    np.testing.assert_array_equal(out.numpy(), np.eye(5, dtype=np.int32)[y])
    np.testing.assert_array_equal(Tensor(y, device=DEV).one_hot().numpy(), np.eye(4, dtype=np.int32)[y])
    with pytest.raises(LossArgumentError, match="needs integer class indices"):
        Tensor([0.5], device=DEV).one_hot(2)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_integer_labels(smoothing):
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    y = RNG.integers(0, 5, 6).astype(np.int32)
    lp = np_log_softmax(x.astype(np.float64), 1)
    q = np.eye(5)[y] * (1 - smoothing) + smoothing / 5
    per = -(lp * q).sum(1)
    t, ty = Tensor(x, device=DEV), Tensor(y, device=DEV)
    np.testing.assert_allclose(t.cross_entropy(ty, label_smoothing=smoothing).item(), per.mean(), rtol=1e-5)
    np.testing.assert_allclose(t.cross_entropy(ty, "sum", smoothing).item(), per.sum(), rtol=1e-5)
    np.testing.assert_allclose(t.cross_entropy(ty, "none", smoothing).numpy(), per, rtol=1e-5)
    got = t.sparse_categorical_crossentropy(ty, label_smoothing=smoothing).item()
    np.testing.assert_allclose(got, per.mean(), rtol=1e-5)


def test_cross_entropy_spatial_probabilities_and_ignore_index():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)  # (N, C, L): classes on axis 1, as torch
    y = RNG.integers(0, 3, (2, 4)).astype(np.int32)
    y[0, 1] = y[1, 3] = -100
    lp = np_log_softmax(x.astype(np.float64), 1)
    picked = np.take_along_axis(lp, np.where(y < 0, 0, y)[:, None], 1)[:, 0]
    keep = y != -100
    want = -(picked * keep).sum() / keep.sum()
    np.testing.assert_allclose(Tensor(x, device=DEV).cross_entropy(Tensor(y, device=DEV)).item(), want, rtol=1e-5)
    probs = np.exp(np_log_softmax(RNG.standard_normal((2, 3, 4)), 1)).astype(np.float32)
    want_p = -(lp * probs).sum(1).mean()
    got_p = Tensor(x, device=DEV).cross_entropy(Tensor(probs, device=DEV)).item()
    np.testing.assert_allclose(got_p, want_p, rtol=1e-5)


def test_sparse_categorical_crossentropy_last_axis_and_ignore():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)  # classes last
    y = RNG.integers(0, 4, (2, 3)).astype(np.int32)
    y[1, 2] = -1
    lp = np_log_softmax(x.astype(np.float64), -1)
    picked = np.take_along_axis(lp, np.where(y < 0, 0, y)[..., None], -1)[..., 0]
    want = -(picked * (y >= 0)).sum() / (y >= 0).sum()
    got = Tensor(x, device=DEV).sparse_categorical_crossentropy(Tensor(y, device=DEV)).item()
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_binary_crossentropy_and_logits():
    x = (RNG.standard_normal(10) * 30).astype(np.float32)  # large logits: the stable form must not overflow
    y = RNG.integers(0, 2, 10).astype(np.float32)
    x64 = x.astype(np.float64)
    want = np.mean(np.maximum(x64, 0) - x64 * y + np.log1p(np.exp(-np.abs(x64))))
    got = Tensor(x, device=DEV).binary_crossentropy_logits(Tensor(y, device=DEV)).item()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    pw = np.float32(3.0)
    want_w = np.mean((1 - y) * x64 + (1 + (pw - 1) * y) * (np.log1p(np.exp(-np.abs(x64))) + np.maximum(-x64, 0)))
    got_w = Tensor(x, device=DEV).binary_crossentropy_logits(Tensor(y, device=DEV), pos_weight=Tensor(pw, device=DEV))
    np.testing.assert_allclose(got_w.item(), want_w, rtol=1e-5)
    p = RNG.uniform(0.01, 0.99, 10).astype(np.float32)
    want_p = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(
        Tensor(p, device=DEV).binary_crossentropy(Tensor(y, device=DEV)).item(), want_p, rtol=1e-5
    )
    edge = Tensor(np.array([0.0, 1.0], np.float32), device=DEV)  # log(0) is clamped at -100, as in torch
    np.testing.assert_allclose(edge.binary_crossentropy(Tensor([1.0, 0.0], device=DEV)).item(), 100.0)


def test_loss_errors():
    t = Tensor(np.zeros((2, 3), np.float32), device=DEV)
    with pytest.raises(LossArgumentError, match=r"integer labels must have the logits' shape \(2, 3\) without"):
        t.cross_entropy(Tensor(np.zeros(3, np.int32), device=DEV))
    with pytest.raises(LossArgumentError, match="reduction must be"):
        t.cross_entropy(Tensor(np.zeros(2, np.int32), device=DEV), reduction="avg")  # type: ignore[arg-type]
    with pytest.raises(LossArgumentError, match="label_smoothing must be in"):
        t.cross_entropy(Tensor(np.zeros(2, np.int32), device=DEV), label_smoothing=2.0)
    with pytest.raises(LossArgumentError, match="needs integer labels"):
        t.sparse_categorical_crossentropy(t)
    with pytest.raises(LossArgumentError, match="target"):
        t.binary_crossentropy(Tensor(np.zeros(3, np.float32), device=DEV))


def test_dropout_is_seeded_scaled_and_off_in_eval():
    x = Tensor(np.ones((64, 64), np.float32), device=DEV)
    assert x.dropout(0.5, training=False) is x
    Tensor.manual_seed(11)
    a = x.dropout(0.25).numpy()
    Tensor.manual_seed(11)
    b = x.dropout(0.25).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.2 < (a == 0).mean() < 0.3
    assert not x.dropout(0.25).numpy().tolist() == a.tolist()  # a new draw without reseeding
    np.testing.assert_array_equal(x.dropout(1.0).numpy(), 0.0)
    with pytest.raises(LossArgumentError, match="dropout probability"):
        x.dropout(1.5)


def test_batchnorm_train_and_eval():
    x = RNG.standard_normal((4, 3, 5, 2)).astype(np.float32) * 2 + 1
    w, b = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    t = Tensor(x, device=DEV)
    out, mean, var = t.batchnorm_train(Tensor(w, device=DEV), Tensor(b, device=DEV), eps=1e-5)
    m = x.mean((0, 2, 3))
    v = x.var((0, 2, 3))
    want = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * w[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean.numpy(), m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var.numpy(), x.var((0, 2, 3), ddof=1), rtol=1e-5)
    rm, rv = RNG.standard_normal(3).astype(np.float32), RNG.uniform(0.5, 2, 3).astype(np.float32)
    ev = t.batchnorm(None, None, Tensor(rm, device=DEV), (Tensor(rv, device=DEV) + 1e-5).rsqrt())
    np.testing.assert_allclose(ev.numpy(), (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), rtol=1e-5)
    with pytest.raises(LossArgumentError, match=r"weight must have shape \(3,\)"):
        t.batchnorm(Tensor(np.ones(4, np.float32), device=DEV), None, mean, var)
