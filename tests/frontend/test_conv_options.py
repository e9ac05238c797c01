"""torch's conv and pool options (padding='same'/'valid', ceil_mode) and the class-label checks of the losses,
each against a numpy reference written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uops import Tensor, jit
from uops.frontend.tensor.conv import ConvArgumentError
from uops.frontend.tensor.nn import LossArgumentError
from uops.testing import devices_from_env

DEVICES = devices_from_env()
DEV = "CPU" if "CPU" in DEVICES else "PYTHON"
RNG = np.random.default_rng(11)


def np_conv(x: np.ndarray, w: np.ndarray, pads: list[tuple[int, int]], dil: tuple[int, ...]) -> np.ndarray:
    """Stride-1 cross-correlation of ``x`` (N, C, *S) padded by ``pads`` with ``w`` (O, C, *K), in float64."""
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    ks = w.shape[2:]
    outs = [xp.shape[2 + i] - dil[i] * (ks[i] - 1) for i in range(len(ks))]
    out = np.zeros((x.shape[0], w.shape[0], *outs))
    for kk in np.ndindex(*ks):
        patch = xp[(slice(None), slice(None)) + tuple(slice(k * d, k * d + o) for k, d, o in zip(kk, dil, outs))]
        out += np.einsum("nc...,oc->no...", patch, w[(slice(None), slice(None)) + kk].astype(np.float64))
    return out


@pytest.mark.parametrize(
    "ks,dil", [((3, 3), (1, 1)), ((2, 2), (1, 1)), ((4, 1), (1, 1)), ((2, 3), (2, 1)), ((3, 2), (2, 3))]
)
def test_conv2d_same_keeps_the_size_and_pads_the_odd_cell_after(ks: tuple[int, int], dil: tuple[int, int]) -> None:
    x = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, *ks)).astype(np.float32)
    out = Tensor(x, device=DEV).conv2d(Tensor(w, device=DEV), padding="same", dilation=dil).numpy()
    assert out.shape == (2, 4, 7, 6)
    total = [d * (k - 1) for k, d in zip(ks, dil)]  # torch: floor(total / 2) before, the rest after
    want = np_conv(x, w, [(t // 2, t - t // 2) for t in total], dil)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_conv1d_same_and_valid() -> None:
    x = RNG.standard_normal((2, 2, 9)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    same = Tensor(x, device=DEV).conv1d(Tensor(w, device=DEV), padding="same").numpy()
    np.testing.assert_allclose(same, np_conv(x, w, [(1, 2)], (1,)), rtol=1e-4, atol=1e-4)
    valid = Tensor(x, device=DEV).conv1d(Tensor(w, device=DEV), padding="valid").numpy()
    assert valid.shape == (2, 3, 6)
    np.testing.assert_allclose(valid, np_conv(x, w, [(0, 0)], (1,)), rtol=1e-4, atol=1e-4)


def test_conv_same_gradient_matches_numpy() -> None:
    x = RNG.standard_normal((1, 2, 5, 5))
    w = RNG.standard_normal((3, 2, 2, 2))
    g = RNG.standard_normal((1, 3, 5, 5))
    tx, tw = Tensor(x, device=DEV, requires_grad=True), Tensor(w, device=DEV, requires_grad=True)
    gx, gw = (tx.conv2d(tw, padding="same") * Tensor(g, device=DEV)).sum().gradient(tx, tw)
    xp = np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 1)])  # 2x2 'same': nothing before, one cell after
    want_w = np.stack(
        [
            np.stack([np.einsum("nohw,nchw->oc", g, xp[:, :, i : i + 5, j : j + 5]) for j in range(2)], -1)
            for i in range(2)
        ],
        -2,
    )
    gxp = np.zeros_like(xp)
    for i in range(2):
        for j in range(2):
            gxp[:, :, i : i + 5, j : j + 5] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j])
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx.numpy(), gxp[:, :, :5, :5], rtol=1e-6, atol=1e-8)


def test_conv_named_padding_errors() -> None:
    x, w = Tensor.ones(1, 1, 6, 6, device=DEV), Tensor.ones(1, 1, 3, 3, device=DEV)
    with pytest.raises(ConvArgumentError, match="'same' needs stride 1"):
        x.conv2d(w, padding="same", stride=2)
    with pytest.raises(ConvArgumentError, match="'full'"):
        x.conv2d(w, padding="full")


def pool_ref(x: np.ndarray, k: int, s: int, p: int, ceil: bool, kind: str, include_pad: bool = True) -> np.ndarray:
    """torch's pooling of the last two dims by explicit windows, the output size by its documented formula."""
    h, w = x.shape[-2:]

    def size(n: int) -> int:
        span = n + 2 * p - k
        out = (math.ceil(span / s) if ceil else span // s) + 1
        return out - 1 if ceil and (out - 1) * s >= n + p else out

    oh, ow = size(h), size(w)
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s - p, j * s - p
            r1, c1 = min(r0 + k, h + p), min(c0 + k, w + p)  # a window ends at the padded input's edge
            cells = x[..., max(r0, 0) : min(r1, h), max(c0, 0) : min(c1, w)]
            if kind == "max":
                out[..., i, j] = cells.max((-2, -1))
            else:
                count = (r1 - r0) * (c1 - c0) if include_pad else cells.shape[-2] * cells.shape[-1]
                out[..., i, j] = cells.sum((-2, -1)) / count
    return out


@pytest.mark.parametrize("k,s,p,hw", [(2, 2, 0, (5, 7)), (3, 2, 1, (6, 5)), (3, 3, 0, (7, 8)), (2, 1, 1, (4, 4))])
def test_max_pool2d_ceil_mode(k: int, s: int, p: int, hw: tuple[int, int]) -> None:
    x = RNG.standard_normal((2, 3, *hw)).astype(np.float32)
    out = Tensor(x, device=DEV).max_pool2d(k, s, p, ceil_mode=True).numpy()
    np.testing.assert_array_equal(out, pool_ref(x, k, s, p, True, "max"))
    floor = Tensor(x, device=DEV).max_pool2d(k, s, p).numpy()
    np.testing.assert_array_equal(floor, pool_ref(x, k, s, p, False, "max"))


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("k,s,p,hw", [(2, 2, 0, (5, 7)), (3, 2, 1, (6, 5)), (3, 3, 1, (7, 8))])
def test_avg_pool2d_ceil_mode(k: int, s: int, p: int, hw: tuple[int, int], include_pad: bool) -> None:
    x = RNG.standard_normal((2, *hw)).astype(np.float32)
    out = Tensor(x, device=DEV).avg_pool2d(k, s, p, count_include_pad=include_pad, ceil_mode=True).numpy()
    np.testing.assert_allclose(out, pool_ref(x, k, s, p, True, "avg", include_pad), rtol=1e-5, atol=1e-6)


def test_max_pool2d_ceil_mode_gradient() -> None:
    x = RNG.permutation(25).reshape(1, 1, 5, 5).astype(np.float64)  # distinct values: one maximum per window
    t = Tensor(x, device=DEV, requires_grad=True)
    t.max_pool2d(2, ceil_mode=True).sum().backward()
    want = np.zeros_like(x)
    for i in range(0, 5, 2):
        for j in range(0, 5, 2):
            win = x[0, 0, i : i + 2, j : j + 2]
            r, c = np.unravel_index(np.argmax(win), win.shape)
            want[0, 0, i + r, j + c] += 1
    assert t.grad is not None
    np.testing.assert_array_equal(t.grad.numpy(), want)


def np_log_softmax(z: np.ndarray, axis: int) -> np.ndarray:
    m = z.max(axis, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis, keepdims=True))


@pytest.mark.parametrize("bad", [10, -1, 57])
def test_cross_entropy_names_a_label_outside_the_classes(bad: int) -> None:
    logits = Tensor(RNG.standard_normal((4, 10)).astype(np.float32), device=DEV)
    labels = np.array([1, 2, bad, 3], np.int32)
    with pytest.raises(LossArgumentError, match=rf"label {bad} at index \(2,\).*\[0, 10\)"):
        logits.cross_entropy(Tensor(labels, device=DEV))
    with pytest.raises(LossArgumentError, match=rf"label {bad} at index \(2,\)"):
        logits.log_softmax(1).nll_loss(Tensor(labels, device=DEV))
    with pytest.raises(LossArgumentError, match=rf"label {bad} at index \(2,\)"):
        logits.sparse_categorical_crossentropy(Tensor(labels, device=DEV), ignore_index=-7)


def test_labels_that_are_not_integers_are_refused() -> None:
    logits = Tensor(RNG.standard_normal((3, 4)).astype(np.float32), device=DEV)
    with pytest.raises(LossArgumentError, match="labels must be integer class indices of shape \\(3,\\), got float"):
        logits.cross_entropy(Tensor(np.array([0.0, 1.0, 2.0], np.float32), device=DEV))
    with pytest.raises(LossArgumentError, match="integer class indices"):
        logits.nll_loss(Tensor(np.array([True, False, True]), device=DEV))


def test_ignore_index_is_not_a_bad_label_and_counts_for_nothing() -> None:
    z = RNG.standard_normal((5, 4, 3)).astype(np.float32)  # (N, C, d1): classes on axis 1
    y = np.array([[0, 3, 1], [-100, 2, 2], [1, 1, -100], [3, 0, 0], [2, -100, 1]], np.int32)
    keep = y != -100
    logp = np_log_softmax(z.astype(np.float64), 1)
    picked = np.take_along_axis(logp, np.where(keep, y, 0)[:, None], 1)[:, 0]
    want_none = np.where(keep, -picked, 0.0)
    t, labels = Tensor(z, device=DEV), Tensor(y, device=DEV)
    np.testing.assert_allclose(t.cross_entropy(labels).numpy(), want_none.sum() / keep.sum(), rtol=1e-5)
    lp = Tensor(logp.astype(np.float32), device=DEV)
    np.testing.assert_allclose(lp.nll_loss(labels).numpy(), want_none.sum() / keep.sum(), rtol=1e-5)
    np.testing.assert_allclose(lp.nll_loss(labels, reduction="sum").numpy(), want_none.sum(), rtol=1e-5)
    np.testing.assert_allclose(lp.nll_loss(labels, reduction="none").numpy(), want_none, rtol=1e-5, atol=1e-6)
    y2 = np.where(keep, y, 7).astype(np.int32)
    np.testing.assert_allclose(
        lp.nll_loss(Tensor(y2, device=DEV), ignore_index=7).numpy(), want_none.sum() / keep.sum(), rtol=1e-5
    )


def test_nll_loss_keeps_minus_infinity_of_other_classes_out() -> None:
    with np.errstate(divide="ignore"):  # log(0) = -inf for a class not picked
        logp = np.log(np.array([[1.0, 0.0], [0.25, 0.75]], np.float32))
    out = Tensor(logp, device=DEV).nll_loss(Tensor(np.array([0, 1], np.int32), device=DEV)).numpy()
    np.testing.assert_allclose(out, -(logp[0, 0] + logp[1, 1]) / 2, rtol=1e-6)


def test_a_jit_capture_checks_labels_uploaded_from_numpy() -> None:
    w = Tensor(RNG.standard_normal((3, 4)).astype(np.float32), device=DEV).realize()

    @jit
    def loss(x: Tensor, y: Tensor) -> Tensor:
        return (x @ w).cross_entropy(y)

    x = Tensor(RNG.standard_normal((2, 3)).astype(np.float32), device=DEV)
    good = float(loss(x, Tensor(np.array([1, 2], np.int32), device=DEV)).item())
    assert math.isfinite(good)
    with pytest.raises(LossArgumentError, match="label 4 at index"):  # the call that captures
        loss(x, Tensor(np.array([1, 4], np.int32), device=DEV))


def np_conv_grads(
    x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: tuple[int, int], pads: list[tuple[int, int]], dil, groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """The gradients of a 2-D convolution by its definition: each output's gradient times the weight added back
    into the window it read (input), times the window summed (weight)."""
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    gxp, gw = np.zeros_like(xp), np.zeros_like(w)
    cout, cg, kh, kw = w.shape
    oh, ow = g.shape[2:]
    for o in range(cout):
        chans = slice(o // (cout // groups) * cg, (o // (cout // groups) + 1) * cg)
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dil[0], i * dil[0] + (oh - 1) * stride[0] + 1, stride[0])
                cols = slice(j * dil[1], j * dil[1] + (ow - 1) * stride[1] + 1, stride[1])
                gw[o, :, i, j] = np.einsum("nchw,nhw->c", xp[:, chans, rows, cols], g[:, o])
                gxp[:, chans, rows, cols] += np.einsum("nhw,c->nchw", g[:, o], w[o, :, i, j])
    h, wd = x.shape[2:]
    return gxp[:, :, pads[0][0] : pads[0][0] + h, pads[1][0] : pads[1][0] + wd], gw


@pytest.mark.parametrize(
    "cin,cout,groups,hw,ks,stride,pads,dil",
    [
        (3, 4, 1, (6, 6), (3, 3), (1, 1), [(1, 1), (1, 1)], (1, 1)),
        (4, 6, 2, (9, 7), (3, 2), (2, 1), [(1, 1), (0, 2)], (1, 2)),  # a stride leaving a row no window reads
        (2, 2, 2, (8, 8), (2, 3), (3, 2), [(2, 0), (1, 1)], (2, 1)),
        (3, 2, 1, (5, 6), (1, 1), (1, 2), [(0, 0), (0, 0)], (1, 1)),
        (2, 3, 1, (5, 5), (2, 2), (1, 1), [(2, 1), (0, 2)], (1, 1)),  # padding beyond the kernel's reach
    ],
)
def test_conv2d_gradients_match_numpy(cin, cout, groups, hw, ks, stride, pads, dil) -> None:
    x = RNG.standard_normal((2, cin, *hw))
    w = RNG.standard_normal((cout, cin // groups, *ks))
    tx, tw = Tensor(x, device=DEV, requires_grad=True), Tensor(w, device=DEV, requires_grad=True)
    y = tx.conv2d(tw, stride=stride, padding=pads, dilation=dil, groups=groups)
    g = RNG.standard_normal(y.shape)
    gx, gw = (y * Tensor(g, device=DEV)).sum().gradient(tx, tw)
    want_x, want_w = np_conv_grads(x, w, g, stride, pads, dil, groups)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-9, atol=1e-9)


def test_conv_gradient_through_a_model_and_a_cast() -> None:
    """The gradient of a float32 input flows through the conv's cast, and a second conv's input gradient
    (a computed value, not a leaf) reaches the first conv's weight."""
    x = RNG.standard_normal((2, 1, 6, 6)).astype(np.float32)
    w1 = RNG.standard_normal((3, 1, 3, 3))
    w2 = RNG.standard_normal((2, 3, 3, 3))
    t1, t2 = Tensor(w1, device=DEV, requires_grad=True), Tensor(w2, device=DEV, requires_grad=True)
    tx = Tensor(x, device=DEV, requires_grad=True)
    h = tx.conv2d(t1, padding=1)
    y = h.conv2d(t2)
    g = RNG.standard_normal(y.shape)
    gx, g1 = (y * Tensor(g, device=DEV)).sum().gradient(tx, t1)
    h_np = Tensor(x.astype(np.float64), device=DEV).conv2d(Tensor(w1, device=DEV), padding=1).numpy()
    gh, _ = np_conv_grads(h_np, w2, g, (1, 1), [(0, 0), (0, 0)], (1, 1), 1)
    want_x, want_1 = np_conv_grads(x.astype(np.float64), w1, gh, (1, 1), [(1, 1), (1, 1)], (1, 1), 1)
    assert gx.dtype == tx.dtype
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g1.numpy(), want_1, rtol=1e-6, atol=1e-6)


def test_conv_bias_gradient_matches_numpy() -> None:
    x = RNG.standard_normal((2, 3, 5, 5))
    w = RNG.standard_normal((4, 3, 3, 3))
    b = RNG.standard_normal(4)
    tw, tb = Tensor(w, device=DEV, requires_grad=True), Tensor(b, device=DEV, requires_grad=True)
    y = Tensor(x, device=DEV).conv2d(tw, tb, padding=1)
    g = RNG.standard_normal(y.shape)
    (y.relu() * Tensor(g, device=DEV)).sum().backward()
    ypre = np_conv(x, w, [(1, 1), (1, 1)], (1, 1)) + b[None, :, None, None]
    gy = g * (ypre > 0)
    assert tb.grad is not None and tw.grad is not None
    np.testing.assert_allclose(tb.grad.numpy(), gy.sum((0, 2, 3)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        tw.grad.numpy(), np_conv_grads(x, w, gy, (1, 1), [(1, 1), (1, 1)], (1, 1), 1)[1], rtol=1e-9
    )


@pytest.mark.parametrize(
    "cin,cout,groups,hw,ks,pads,dil",
    [
        (3, 4, 1, (6, 5), (3, 3), [(1, 1), (1, 1)], (1, 1)),
        (4, 6, 2, (7, 7), (3, 2), [(2, 0), (0, 1)], (2, 1)),
        (2, 3, 1, (5, 6), (1, 1), [(0, 0), (0, 0)], (1, 1)),
    ],
)
def test_the_flattened_conv_form_matches_numpy(monkeypatch, cin, cout, groups, hw, ks, pads, dil) -> None:
    """Small images take the 4-D form; here every stride-1 conv takes the flattened one (forward and gradients)."""
    from uops.frontend.tensor import conv

    monkeypatch.setattr(conv, "FLAT_MAX_WASTE", 1e9)
    x = RNG.standard_normal((2, cin, *hw))
    w = RNG.standard_normal((cout, cin // groups, *ks))
    tx, tw = Tensor(x, device=DEV, requires_grad=True), Tensor(w, device=DEV, requires_grad=True)
    y = tx.conv2d(tw, padding=pads, dilation=dil, groups=groups)
    flat = cout * 2 * (hw[0] + pads[0][0] + pads[0][1]) * (hw[1] + pads[1][0] + pads[1][1])  # every padded position
    assert any(k.ast is not None and len(k.bufs) == 3 and k.bufs[0].arg[1] == flat for k in y.schedule())
    g = RNG.standard_normal(y.shape)
    want_x, want_w = np_conv_grads(x, w, g, (1, 1), pads, dil, groups)
    tg = Tensor(g, device=DEV)
    gx, gw = (y * tg).sum().gradient(tx, tw)
    # the weight's gradient sums over the flattened positions: it reads the output's gradient copied as (positions,
    # channels), one value per padded position and no tail rows; the input's gradient reads its own padded copy
    assert any(k.bufs[0].arg[1] == w.size and any(b.arg[1] == flat for b in k.bufs[1:]) for k in gw.schedule())
    sched = gx.schedule(gw)
    copies = [k for k in sched if k.kind == "kernel" and len(k.bufs) == 2 and k.bufs[0].arg[1] >= flat]
    assert len(copies) == 2
    assert all(k.bufs[1] is tg.uop.src[0] for k in copies)  # the gradient (g times 1) is read, not written first
    per = cout // groups
    want_y = np.concatenate(
        [
            np_conv(x[:, i * (cin // groups) : (i + 1) * (cin // groups)], w[i * per : (i + 1) * per], pads, dil)
            for i in range(groups)
        ],
        1,
    )
    np.testing.assert_allclose(y.numpy(), want_y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-9, atol=1e-9)


def test_a_costly_output_gradient_is_computed_once_for_both_gradients(monkeypatch) -> None:
    """Through a relu the output's gradient reads the convolution's own output: written once, then both padded
    copies read that buffer; the gradients still match numpy's."""
    from uops.frontend.tensor import conv

    monkeypatch.setattr(conv, "FLAT_MAX_WASTE", 1e9)
    x, w = RNG.standard_normal((2, 3, 6, 5)), RNG.standard_normal((4, 3, 3, 3))
    g = RNG.standard_normal((2, 4, 6, 5))
    tx, tw = Tensor(x, device=DEV, requires_grad=True), Tensor(w, device=DEV, requires_grad=True)
    y = tx.conv2d(tw, padding=1)
    gx, gw = (y.relu() * Tensor(g, device=DEV)).sum().gradient(tx, tw)
    sched = gx.schedule(gw)
    gy_size = g.size
    written = [k for k in sched if k.kind == "kernel" and k.bufs[0].arg[1] == gy_size]
    assert len(written) >= 1
    readers = [k for k in sched if k.kind == "kernel" and any(b is written[-1].bufs[0] for b in k.bufs[1:])]
    assert len(readers) == 2
    yv = np_conv(x, w, [(1, 1), (1, 1)], (1, 1))
    want_x, want_w = np_conv_grads(x, w, g * (yv > 0), (1, 1), [(1, 1), (1, 1)], (1, 1), 1)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gw.numpy(), want_w, rtol=1e-9, atol=1e-9)
