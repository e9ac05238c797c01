"""Convolution and pooling: results against numpy references, one fused kernel per output, and errors."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from uops import Tensor
from uops.frontend.tensor.conv import ConvArgumentError
from uops.ir.ops import Ops
from uops.testing import devices_from_env

DEVICES = devices_from_env()

DEV = "CPU" if "CPU" in DEVICES else "PYTHON"
RNG = np.random.default_rng(7)


def kernels(x: Tensor) -> int:
    return sum(1 for s in x.schedule() if s.kind == "kernel")


def reductions(x: Tensor) -> int:
    return sum(1 for s in x.schedule() if s.ast is not None and any(u.op is Ops.REDUCE for u in s.ast.toposort()))


def ref_conv(x: np.ndarray, w: np.ndarray, b, stride, pad, dil, groups) -> np.ndarray:
    """Cross-correlation by explicit loops over output channels and kernel offsets (float64)."""
    n = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, p) for p in pad])
    cout, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(xp.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(n)]
    out = np.zeros((x.shape[0], cout, *outs))
    per = cout // groups
    for o in range(cout):
        g = o // per
        for kk in np.ndindex(*ks):
            sl = tuple(
                slice(kk[i] * dil[i], kk[i] * dil[i] + (outs[i] - 1) * stride[i] + 1, stride[i]) for i in range(n)
            )
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]  # (N, cg, *outs)
            out[:, o] += np.einsum("nc...,c->n...", patch, w[(o, slice(None)) + kk])
    if b is not None:
        out += b.reshape((1, cout) + (1,) * n)
    return out


CASES_2D = [
    # N, C_in, C_out, groups, spatial, kernel, stride, padding, dilation
    (1, 3, 5, 1, (8, 8), (3, 3), (1, 1), (0, 0), (1, 1)),
    (2, 4, 6, 2, (9, 7), (3, 2), (2, 1), (1, 1), (1, 2)),
    (3, 6, 6, 3, (11, 5), (5, 1), (3, 2), (2, 0), (2, 1)),
    (2, 2, 4, 1, (6, 6), (2, 2), (2, 2), (0, 0), (1, 1)),
    (1, 4, 4, 4, (7, 9), (3, 3), (2, 3), (1, 2), (1, 1)),  # depthwise
]


@pytest.mark.parametrize("case", CASES_2D)
def test_conv2d_matches_numpy_in_one_kernel(case):
    n, cin, cout, g, sp, ks, st, pd, dl = case
    x = RNG.standard_normal((n, cin, *sp)).astype(np.float32)
    w = RNG.standard_normal((cout, cin // g, *ks)).astype(np.float32)
    b = RNG.standard_normal(cout).astype(np.float32)
    out = Tensor(x, device=DEV).conv2d(
        Tensor(w, device=DEV), Tensor(b, device=DEV), stride=st, padding=pd, dilation=dl, groups=g
    )
    # one window reduction; before it a copy of the input padded (no masked loads), and after it, for the flattened
    # form of a stride-1 conv, its output in NCHW with the bias
    assert reductions(out) == 1 and kernels(out) <= 1 + any(pd) + (st == (1, 1)) * 2
    np.testing.assert_allclose(out.numpy(), ref_conv(x, w, b, st, pd, dl, g), rtol=1e-4, atol=1e-4)


def test_conv2d_scalar_args_and_asymmetric_padding():
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = Tensor(x, device=DEV).conv2d(Tensor(w, device=DEV), stride=2, padding=((1, 0), (2, 1)))
    ref = ref_conv(np.pad(x, [(0, 0), (0, 0), (1, 0), (2, 1)]), w, None, (2, 2), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,s,p,d,g", [(3, 1, 1, 1, 1), (4, 3, 2, 2, 2), (1, 2, 0, 1, 1)])
def test_conv1d_matches_numpy(k, s, p, d, g):
    x = RNG.standard_normal((2, 4, 13)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // g, k)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    out = Tensor(x, device=DEV).conv1d(Tensor(w, device=DEV), Tensor(b, device=DEV), s, p, d, g)
    assert reductions(out) == 1 and kernels(out) == 1 + (p > 0)
    np.testing.assert_allclose(out.numpy(), ref_conv(x, w, b, (s,), (p,), (d,), g), rtol=1e-4, atol=1e-4)


def ref_pool(x: np.ndarray, k, s, p, fill: float, fn) -> np.ndarray:
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(p[0], p[0]), (p[1], p[1])], constant_values=fill)
    win = sliding_window_view(xp, k, axis=(-2, -1))[..., :: s[0], :: s[1], :, :]
    return fn(win, axis=(-2, -1))


@pytest.mark.parametrize("k,s,p", [((2, 2), None, (0, 0)), ((3, 3), (2, 2), (1, 1)), ((3, 2), (1, 2), (1, 0))])
def test_max_pool2d_matches_numpy(k, s, p):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    out = Tensor(x, device=DEV).max_pool2d(k, s, p)
    assert kernels(out) == 1
    np.testing.assert_allclose(out.numpy(), ref_pool(x, k, s or k, p, -np.inf, np.max))


@pytest.mark.parametrize("k,s,p", [((2, 2), None, (0, 0)), ((3, 3), (2, 2), (1, 1)), ((3, 2), (2, 1), (1, 1))])
def test_avg_pool2d_matches_numpy(k, s, p):
    x = RNG.standard_normal((2, 9, 7)).astype(np.float32)
    t = Tensor(x, device=DEV)
    out = t.avg_pool2d(k, s, p)
    assert kernels(out) == 1
    np.testing.assert_allclose(out.numpy(), ref_pool(x, k, s or k, p, 0.0, np.mean), rtol=1e-5, atol=1e-6)
    counts = ref_pool(np.ones_like(x), k, s or k, p, 0.0, np.sum)
    excl = ref_pool(x, k, s or k, p, 0.0, np.sum) / counts
    np.testing.assert_allclose(t.avg_pool2d(k, s, p, count_include_pad=False).numpy(), excl, rtol=1e-5, atol=1e-6)


def test_max_pool2d_of_integers_pads_with_the_minimum():
    x = -RNG.integers(1, 100, (1, 1, 5, 5)).astype(np.int32)
    out = Tensor(x, device=DEV).max_pool2d(3, 2, 1)
    np.testing.assert_array_equal(out.numpy(), ref_pool(x, (3, 3), (2, 2), (1, 1), np.iinfo(np.int32).min, np.max))


def test_conv_errors_name_the_problem():
    x = Tensor(np.zeros((1, 4, 5, 5), np.float32), device=DEV)
    with pytest.raises(ConvArgumentError, match=r"takes 3 channels per group, the input has 4 channels"):
        x.conv2d(Tensor(np.zeros((2, 3, 3, 3), np.float32), device=DEV))
    with pytest.raises(ConvArgumentError, match="groups=3 must divide"):
        x.conv2d(Tensor(np.zeros((3, 1, 3, 3), np.float32), device=DEV), groups=3)
    with pytest.raises(ConvArgumentError, match="larger than the padded input"):
        x.conv2d(Tensor(np.zeros((2, 4, 7, 7), np.float32), device=DEV))
    with pytest.raises(ConvArgumentError, match=r"input of shape \(N, C, 2 spatial dims\)"):
        x.reshape(4, 5, 5).conv2d(Tensor(np.zeros((2, 4, 3, 3), np.float32), device=DEV))
    with pytest.raises(ConvArgumentError, match=r"bias must have shape \(2,\)"):
        x.conv2d(Tensor(np.zeros((2, 4, 3, 3), np.float32), device=DEV), Tensor(np.zeros(3), device=DEV))
    with pytest.raises(ConvArgumentError, match="stride needs one value or 2"):
        x.conv2d(Tensor(np.zeros((2, 4, 3, 3), np.float32), device=DEV), stride=(1, 1, 1))
    with pytest.raises(ConvArgumentError, match="at most half the kernel"):
        x.max_pool2d(2, padding=2)
    assert issubclass(ConvArgumentError, ValueError)
