"""Indexing by data against numpy: integer-tensor indexing, gather/scatter, cumsum, tril/triu, masked_fill, topk,
and the documented behaviour of out-of-range indices (host: IndexError; device: zeros, nothing written)."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.testing.kit.helpers import rnd

DEV = ["CPU", "PYTHON"]
RNG = np.random.default_rng(1)


@pytest.mark.parametrize("device", DEV)
def test_integer_tensor_indexing_matches_numpy(device: str) -> None:
    x = rnd(5, 4, 3)
    t = Tensor(x, device=device)
    i2 = np.array([[0, 3], [2, -1]])
    j = np.array([1, 0])
    cases = [
        (lambda a, I: a[I(i2)], lambda: x[i2]),  # noqa: E741
        (lambda a, I: a[1, I(i2), :], lambda: x[1, i2, :]),
        (lambda a, I: a[:, I(j), I(j)], lambda: x[:, j, j]),  # adjacent: in place
        (lambda a, I: a[I(j), :, I(j)], lambda: x[j, :, j]),  # separated by a slice: first
        (lambda a, I: a[I(j), 2], lambda: x[j, 2]),  # an int next to them counts as one
        (lambda a, I: a[..., I(np.array([[2], [0]]))], lambda: x[..., np.array([[2], [0]])]),
        (lambda a, I: a[None, I(j), ::-1], lambda: x[None, j, ::-1]),
        (lambda a, I: a[I(np.array([[0], [4]])), I(np.array([1, 2, 3]))], lambda: x[[[0], [4]], [1, 2, 3]]),
    ]
    for got, want in cases:
        np.testing.assert_array_equal(got(t, lambda a: Tensor(a.astype(np.int32), device=device)).numpy(), want())


@pytest.mark.parametrize("device", DEV)
def test_host_lists_and_masks(device: str) -> None:
    x = rnd(5, 4)
    t = Tensor(x, device=device)
    np.testing.assert_array_equal(t[[4, 0, -2]].numpy(), x[[4, 0, -2]])
    mask = np.array([True, False, True, False, True])
    np.testing.assert_array_equal(t[mask].numpy(), x[mask])  # a host mask: its positions are known
    m2 = x > 0
    np.testing.assert_array_equal(t[m2].numpy(), x[m2])
    with pytest.raises(TypeError, match="bool tensor gives a data-dependent shape"):
        t[Tensor(mask, device=device)]


def test_out_of_range_indices() -> None:
    t = Tensor(rnd(4, 3), device="CPU")
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        t[[0, 4]]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 0 with size 4"):
        t[np.array([-5])]
    # on the device an index outside [-n, n) matches no row: zeros, never memory outside the buffer
    got = t[Tensor([1, 4, -5, 100, -1], device="CPU")].numpy()
    np.testing.assert_array_equal(got[[1, 2, 3]], np.zeros((3, 3), np.float32))
    np.testing.assert_array_equal(got[[0, 4]], t.numpy()[[1, -1]])
    g = t.gather(0, Tensor([[7, 0, 3]], device="CPU")).numpy()
    np.testing.assert_array_equal(g, [[0.0, t.numpy()[0, 1], t.numpy()[3, 2]]])
    s = t.zeros_like().scatter_add(0, Tensor([[9, 0, 0]], device="CPU"), 1.0).numpy()
    assert s.sum() == 2.0  # the out-of-range one wrote nothing


@pytest.mark.parametrize("device", DEV)
def test_gather_and_take_along_axis(device: str) -> None:
    x = rnd(3, 5, 4)
    t = Tensor(x, device=device)
    idx = RNG.integers(-5, 5, size=(3, 2, 4)).astype(np.int32)
    want = np.take_along_axis(x, np.where(idx < 0, idx + 5, idx), axis=1)
    np.testing.assert_array_equal(t.gather(1, Tensor(idx, device=device)).numpy(), want)
    idx0 = RNG.integers(0, 3, size=(1, 5, 4)).astype(np.int32)
    np.testing.assert_array_equal(
        t.take_along_axis(Tensor(idx0, device=device), axis=0).numpy(), np.take_along_axis(x, idx0, axis=0)
    )
    ti = Tensor(np.arange(12, dtype=np.int32).reshape(3, 4), device=device)
    np.testing.assert_array_equal(ti.gather(1, Tensor([[3], [0], [1]], device=device)).numpy(), [[3], [4], [9]])


@pytest.mark.parametrize("device", DEV)
def test_scatter_and_scatter_add(device: str) -> None:
    base = rnd(4, 3)
    idx = np.array([[0, 3, 1], [3, 3, 2]], np.int32)
    src = rnd(2, 3)
    want = base.copy()
    np.add.at(want, (idx, np.arange(3)[None, :].repeat(2, 0)), src)
    got = Tensor(base, device=device).scatter_add(0, Tensor(idx, device=device), Tensor(src, device=device))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    uniq = np.array([[0, 3, 1], [2, 1, 2]], np.int32)  # no repeats in a column: torch's defined case
    want = base.copy()
    want[uniq, np.arange(3)[None, :].repeat(2, 0)] = src
    got = Tensor(base, device=device).scatter(0, Tensor(uniq, device=device), Tensor(src, device=device))
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="must equal the tensor's"):
        Tensor(base, device=device).scatter(0, Tensor(uniq[:, :2], device=device), 1.0)


@pytest.mark.parametrize("device", DEV)
def test_cumsum_tril_triu_masked_fill(device: str) -> None:
    x = rnd(3, 4, 5)
    t = Tensor(x, device=device)
    for ax in (0, 1, -1):
        np.testing.assert_allclose(t.cumsum(ax).numpy(), np.cumsum(x, axis=ax), rtol=1e-5, atol=1e-6)
    ti = Tensor(np.arange(6, dtype=np.int32), device=device)
    np.testing.assert_array_equal(ti.cumsum().numpy(), np.cumsum(np.arange(6)))
    for k in (-1, 0, 2):
        np.testing.assert_array_equal(t.tril(k).numpy(), np.tril(x, k))
        np.testing.assert_array_equal(t.triu(k).numpy(), np.triu(x, k))
    m = x > 0.5
    np.testing.assert_array_equal(t.masked_fill(Tensor(m, device=device), -9.0).numpy(), np.where(m, -9.0, x))
    row = Tensor(m[0, 0], device=device)  # broadcast over the leading dims
    np.testing.assert_array_equal(t.masked_fill(row, 0).numpy(), np.where(m[0, 0], 0.0, x))


@pytest.mark.parametrize("device", DEV)
def test_topk_and_argmax(device: str) -> None:
    x = RNG.permutation(40).reshape(4, 10).astype(np.float32)
    t = Tensor(x, device=device)
    vals, idx = t.topk(3)
    order = np.argsort(-x, axis=-1)[:, :3]
    np.testing.assert_array_equal(idx.numpy(), order)
    np.testing.assert_array_equal(vals.numpy(), np.take_along_axis(x, order, -1))
    assert idx.dtype == dtypes.int64
    vals, idx = t.topk(2, axis=0, largest=False)
    order = np.argsort(x, axis=0)[:2]
    np.testing.assert_array_equal(idx.numpy(), order)
    np.testing.assert_array_equal(vals.numpy(), np.take_along_axis(x, order, 0))
    np.testing.assert_array_equal(t.argmax(1).numpy(), x.argmax(1))
    with pytest.raises(ValueError, match="k=11 is out of range"):
        t.topk(11)


def test_indexing_is_kernels_not_a_host_round_trip() -> None:
    emb = Tensor(rnd(16, 8), device="CPU")
    idx = Tensor([3, 1], device="CPU") + 1  # a lazy index: fused into the gather
    out = emb[idx]
    assert len(out.schedule()) == 1
    np.testing.assert_array_equal(out.numpy(), emb.numpy()[[4, 2]])


@pytest.mark.parametrize("device", DEV)
def test_gather_from_computed_and_strided_sources(device: str) -> None:
    x = rnd(6, 4)
    t = Tensor(x, device=device)
    idx = np.array([5, 0, 2, 2], np.int32)
    I = Tensor(idx, device=device)  # noqa: E741
    np.testing.assert_allclose((t + t.sum(0)).__getitem__(I).numpy(), (x + x.sum(0))[idx], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(t.T[:, I].numpy(), x.T[:, idx])
    np.testing.assert_array_equal(t[::-2][Tensor([2, 0], device=device)].numpy(), x[::-2][[2, 0]])
    np.testing.assert_array_equal(t.reshape(4, 6).T[I].numpy(), x.reshape(4, 6).T[idx])
    b = Tensor(x > 0, device=device)
    np.testing.assert_array_equal(b[I].numpy(), (x > 0)[idx])


@pytest.mark.parametrize("device", DEV)
def test_setitem_with_a_bool_mask_matches_numpy(device: str) -> None:
    x = np.arange(24, dtype=np.int16).reshape(4, 6) - 7
    want = x.copy()
    t = Tensor(x.copy(), device=device)
    row = t[1]
    mask = x % 3 == 0
    t[Tensor(mask, device=device)] = 5
    want[mask] = 5
    lead = np.array([True, False, False, True])
    t[lead] = Tensor(np.array(-2, np.int16), device=device)  # a 0-d array value, a mask over the first dim
    want[lead] = -2
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal(row.numpy(), want[1])  # a view of the buffer sees the write
    lazy = Tensor(x, device=device) + 1
    lazy[Tensor(mask, device=device)] = 0
    np.testing.assert_array_equal(lazy.numpy(), np.where(mask, 0, x + 1))
    whole = Tensor(x.copy(), device=device)
    whole[Tensor(np.array(True), device=device)] = 3  # a 0-d mask selects everything, as in numpy
    np.testing.assert_array_equal(whole.numpy(), np.full_like(x, 3))
    with pytest.raises(ValueError, match="one value"):
        t[Tensor(mask, device=device)] = np.arange(int(mask.sum()), dtype=np.int16)
    with pytest.raises(IndexError, match="leading dims"):
        t[np.array([True, False])] = 1
