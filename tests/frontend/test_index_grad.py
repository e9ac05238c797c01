"""The gradient of a gather (``x[idx]``, ``gather``, an embedding), by both of its rules (the sort used for large
embeddings, the pairwise compare): repeated indices add up, an index out of range gets nothing; against central
finite differences in float64 and against numpy's ``np.add.at``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uops import Tensor
from uops.frontend import autograd
from uops.nn import Embedding

EPS = 1e-6
RNG = np.random.default_rng(7)


def _idx(a: np.ndarray, device: str) -> Tensor:
    return Tensor(a.astype(np.int32), device=device)


CASES: dict[str, tuple[Callable[[Tensor], Tensor], tuple[int, ...]]] = {
    "rows, repeated and negative": (lambda w: w[_idx(np.array([3, 0, 3, -1]), w.device)], (9, 3)),
    "a 2-d index": (lambda w: w[_idx(np.array([[1, 4], [4, 4]]), w.device)], (6, 2)),
    "a middle axis": (lambda w: w[:, _idx(np.array([5, 1, 5]), w.device)], (2, 7, 3)),
    "gather along the last axis": (lambda w: w.gather(1, _idx(np.array([[4, 0], [2, 2], [1, 4]]), w.device)), (3, 5)),
    "gather along the first axis": (lambda w: w.gather(0, _idx(np.array([[5, 1], [0, 5], [5, 5]]), w.device)), (6, 2)),
    "one position": (lambda w: w.gather(1, _idx(np.array([[3], [0]]), w.device)), (2, 4)),
    "one index broadcast along the axis": (
        lambda w: w.gather(1, _idx(np.array([[3], [0]]), w.device).expand(2, 3)),
        (2, 5),
    ),
    "many repeats": (lambda w: w[_idx(np.array([2, 2, 7, 2, 0, 7, 2, 2, 1, 2, 7]), w.device)], (12, 2)),
}


@pytest.fixture(params=["sorted", "compared"])
def rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both gradient rules of a gather, whatever the size: the sort (embeddings) and the pairwise compare."""
    monkeypatch.setattr(autograd, "SORT_INDEX_ABOVE", 0 if request.param == "sorted" else 1 << 62)
    return str(request.param)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_gradient_matches_finite_differences(name: str, rule: str) -> None:
    fn, shape = CASES[name]
    x = RNG.standard_normal(shape)
    probe = fn(Tensor(x, device="CPU", dtype="float64"))
    weight = Tensor(RNG.standard_normal(probe.shape), device="CPU", dtype="float64")

    def loss(a: np.ndarray) -> Tensor:
        return (fn(Tensor(a, device="CPU", dtype="float64")) * weight).sum()

    t = Tensor(x, device="CPU", dtype="float64", requires_grad=True)
    (g,) = (fn(t) * weight).sum().gradient(t)
    grad = g.numpy()
    for _ in range(2):
        v = RNG.standard_normal(shape)
        num = (loss(x + EPS * v).item() - loss(x - EPS * v).item()) / (2 * EPS)
        assert float((grad * v).sum()) == pytest.approx(num, rel=1e-6, abs=1e-8)


def test_embedding_gradient_matches_numpy(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if device in ("AMD_EMU", "METAL_EMU"):
        pytest.skip("one emulated GPU dialect is enough here: each kernel of the sort compiles through a shim")
    monkeypatch.setattr(autograd, "SORT_INDEX_ABOVE", 0)
    vocab, dim = 40, 6
    tokens = np.array([[3, 17, 3, 39], [0, 3, 21, 17]])
    emb = Embedding(vocab, dim, device=device)
    table = RNG.standard_normal((vocab, dim)).astype(np.float32)
    emb.weight = Tensor(table, device=device, requires_grad=True)
    up = RNG.standard_normal((2, 4, dim)).astype(np.float32)
    (emb(_idx(tokens, device)) * Tensor(up, device=device)).sum().backward()
    want = np.zeros_like(table)
    np.add.at(want, tokens, up)
    assert emb.weight.grad is not None
    np.testing.assert_allclose(emb.weight.grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_an_index_out_of_range_gets_no_gradient(rule: str) -> None:
    w = Tensor(RNG.standard_normal((8, 2)), device="CPU", requires_grad=True)
    (w[_idx(np.array([9, 2, -9, 2]), "CPU")] * 3.0).sum().backward()  # device indices: 9 and -9 read zeros
    assert w.grad is not None
    want = np.zeros((8, 2))
    want[2] = 6.0
    np.testing.assert_array_equal(w.grad.numpy(), want)
