"""``t[index] = v`` with integer tensors, lists, arrays and bool masks, against numpy: broadcasting of the value,
negative indices, repeated indices (the last value lands), out-of-range indices (host: IndexError; device:
nothing written), the value's dtype cast to the tensor's, a right side reading the tensor it writes, and the
JIT replaying such a write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import uops
import uops.frontend.realize as realize_mod
from uops import Tensor, dtypes
from uops.dtypes import from_numpy
from uops.frontend import autograd
from uops.testing.kit.helpers import rnd

I32 = np.int32


def _cases() -> list[tuple[Callable[[Callable[[np.ndarray], Any]], Any], Any]]:
    """(index built with a converter for its arrays, value): each applied to numpy and to a Tensor."""
    return [
        (lambda c: c(np.array([3, 0, -1], I32)), rnd(3, 4, 3)),
        (lambda c: c(np.array([[1], [-2]], I32)), rnd(1, 4, 3)),  # 2-D index, the value broadcast
        (lambda c: (c(np.array([2, 4], I32)), slice(1, 3)), rnd(2, 2, 3)),  # mixed with a slice
        (lambda c: (slice(None), c(np.array([3, 1], I32))), rnd(3)),  # a trailing row for every element
        (lambda c: (c(np.array([0, 4], I32)), slice(None), c(np.array([2, 0], I32))), rnd(2, 4)),  # index dims first
        (lambda c: (Ellipsis, c(np.array([[2], [0]], I32))), rnd(5, 4, 2, 1)),
        (lambda c: (c(np.array([1, 3], I32)), 2), rnd(2, 3)),  # an int next to an index counts as one
        (lambda c: (c(np.array([[0], [4]], I32)), c(np.array([1, 2, 3], I32))), rnd(2, 3, 3)),
        (lambda c: (slice(None, None, -2), c(np.array([0, 3], I32))), 2.5),  # through a strided view
        (lambda c: [4, 0, -5], rnd(3, 4, 3)),  # a host list
    ]


def test_integer_index_assignment_matches_numpy(device: str) -> None:
    ref = rnd(5, 4, 3)
    t = Tensor(ref.copy(), device=device)
    cases = _cases()
    if device.endswith("_EMU"):  # each kernel compiles through a shim: the kinds of placement, not every case
        cases = [cases[0], cases[2], cases[4]]
    for index, value in cases:
        ref[index(lambda a: a)] = value
        t[index(lambda a: Tensor(a, device=device))] = (
            value if isinstance(value, float) else Tensor(value, device=device)
        )
        np.testing.assert_array_equal(t.numpy(), ref)


def test_the_sorted_lowering_of_a_large_index_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autograd, "SORT_INDEX_ABOVE", 0)  # what an index of thousands into thousands takes
    ref = rnd(5, 4, 3)
    t = Tensor(ref.copy(), device="CPU")
    cases = _cases()
    for index, value in [
        cases[0],
        cases[2],
        cases[4],
        (lambda c: c(np.array([2, 0, 2, 9, 2, -5, 0], I32)), rnd(7, 4, 3)),
    ]:
        want = ref.copy()
        idx = index(lambda a: a)
        if isinstance(idx, np.ndarray) and idx.max() >= 5:  # a device index out of range writes nothing
            keep = (idx >= -5) & (idx < 5)
            want[idx[keep]] = value[keep]
        else:
            want[idx] = value
        ref = want
        t[index(lambda a: Tensor(a))] = value if isinstance(value, float) else Tensor(value)
        np.testing.assert_array_equal(t.numpy(), ref)


def test_repeated_indices_land_the_last_value_as_numpy() -> None:
    ref = np.zeros((4, 2), np.float32)
    idx = np.array([2, 0, 2, 2, 0], I32)
    val = np.array([[9, 9], [1, 1], [5, 5], [3, 3], [7, 7]], np.float32)  # not the largest last
    t = Tensor(ref.copy(), device="CPU")
    t[Tensor(idx, device="CPU")] = Tensor(val, device="CPU")
    ref[idx] = val
    np.testing.assert_array_equal(t.numpy(), ref)
    np.testing.assert_array_equal(t.numpy()[[0, 2]], [[7, 7], [3, 3]])
    # scatter (torch's, whose order for repeats is undefined) keeps the largest instead: documented, different
    s = Tensor(np.zeros((4, 2), np.float32), device="CPU").scatter(0, Tensor(idx[:, None].repeat(2, 1)), Tensor(val))
    np.testing.assert_array_equal(s.numpy()[[0, 2]], [[7, 7], [9, 9]])


def test_out_of_range_indices() -> None:
    t = Tensor(np.zeros((3, 4), np.float32), device="CPU")
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        t[[0, 3]] = 1.0
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        t[:, np.array([1, -5])] = 1.0
    with pytest.raises(IndexError, match="index 4 is out of range for axis 1 with size 4"):
        t[Tensor([0], device="CPU"), 4] = 1.0
    np.testing.assert_array_equal(t.numpy(), np.zeros((3, 4)))  # nothing ran before the errors
    # a device index is not read back to check it: outside [-n, n) it writes nothing (as a gather reads zero)
    t[Tensor(np.array([5, -1, -4, 1], I32), device="CPU")] = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
    want = np.zeros((3, 4), np.float32)
    want[2], want[1] = np.arange(4, 8), np.arange(12, 16)
    np.testing.assert_array_equal(t.numpy(), want)


def test_the_value_takes_the_tensors_dtype_as_numpy_casts() -> None:
    idx = np.array([0, 2], I32)
    for dt, value in [
        (np.int32, np.array([2.7, -1.9])),  # float to int: truncated toward zero
        (np.int16, Tensor(np.array([[40000.0], [3.0]], np.float32)).cast(dtypes.int32)),
        (np.float32, np.array([True, False])),
        (np.uint8, 7),
        (np.bool_, Tensor(np.array([0.0, 2.0], np.float32))),
    ]:
        ref = np.ones((3, 2), dt)
        t = Tensor(ref.copy(), device="CPU")
        t[Tensor(idx)] = value
        ref[idx] = value.numpy() if isinstance(value, Tensor) else value
        assert t.dtype == from_numpy(np.dtype(dt))
        np.testing.assert_array_equal(t.numpy(), ref)


def test_bool_masks_match_numpy(device: str) -> None:
    ref = rnd(4, 3)
    t = Tensor(ref.copy(), device=device)
    lead = np.array([True, False, True, True])
    ref[lead] = np.arange(9, dtype=np.float32).reshape(3, 3)  # a host mask: one row per selected element
    t[lead] = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(t.numpy(), ref)
    ref[ref > 3] = np.float32(-1)
    t[list(np.asarray(t.numpy() > 3))] = -1.0
    np.testing.assert_array_equal(t.numpy(), ref)
    row = rnd(3)
    ref[lead] = row  # a device mask with a value that does not depend on how many it selects
    t[Tensor(lead, device=device)] = Tensor(row, device=device)
    np.testing.assert_array_equal(t.numpy(), ref)
    with pytest.raises(ValueError, match="one value for every selected element"):
        t[Tensor(lead, device=device)] = Tensor(rnd(3, 3), device=device)


def test_right_side_reading_the_target_and_pending_readers() -> None:
    ref = rnd(6, 3)
    t = Tensor(ref.copy(), device="CPU")
    pending = t * 1  # built before the write: keeps the old value
    row = t[2]  # a view of the buffer: sees the write
    src, dst = np.array([5, 2, 0], I32), np.array([2, 0, 5], I32)
    t[Tensor(dst)] = t[Tensor(src)] * 2 + t.sum(0)  # reads rows the write replaces
    old = ref.copy()
    ref[dst] = old[src] * 2 + old.sum(0)
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(pending.numpy(), old)
    np.testing.assert_allclose(row.numpy(), ref[2], rtol=1e-6, atol=1e-6)
    lazy = Tensor(old, device="CPU") + 1  # a lazy target gets a buffer of its own first
    lazy[Tensor(np.array([1], I32))] = 0.0
    want = old + 1
    want[1] = 0
    np.testing.assert_allclose(lazy.numpy(), want, rtol=1e-6)


def test_a_write_is_done_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Any] = []
    orig = realize_mod.run_item
    monkeypatch.setattr(realize_mod, "run_item", lambda item: (ran.append(item), orig(item)))
    t = Tensor(np.zeros((64, 8), np.float32), device="CPU").realize()
    idx, v = Tensor(np.array([3, 60, 3], I32)).realize(), Tensor(rnd(3, 8)).realize()
    ran.clear()
    t[idx] = v
    # which index element lands where (an integer reduction), then the write: no temporary, no copy
    assert [i.kind for i in ran] == ["kernel", "kernel"]
    assert ran[-1].bufs[0] is not None and ran[-1].bufs[0].arg[1] == 64 * 8
    np.testing.assert_array_equal(t.numpy()[[3, 60]], v.numpy()[[2, 1]])


def test_the_jit_replays_an_indexed_write() -> None:
    cache = Tensor(np.zeros((8, 4), np.float32), device="CPU").realize()
    ref = np.zeros((8, 4), np.float32)

    @uops.jit
    def step(pos: Tensor, row: Tensor) -> Tensor:
        cache[pos] = row
        return (cache * 1).sum(0)

    for k in range(5):
        row = np.full((1, 4), k + 1, np.float32)
        out = step(Tensor(np.array([7 - k], I32)), Tensor(row))
        ref[7 - k] = row
        np.testing.assert_array_equal(out.numpy(), ref.sum(0))
    np.testing.assert_array_equal(cache.numpy(), ref)
    assert step.replays == 3


def test_views_index_dtypes_and_empty_indices() -> None:
    ref = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = Tensor(ref.copy()).realize()
    t.T[Tensor(np.array([4, 0], I32))] = -1.0  # through a permuted view: writes the base, as in numpy
    ref.T[[4, 0]] = -1
    col = t[:, 1]
    col[Tensor(np.array([2], I32))] = 99.0
    ref[2, 1] = 99
    t[Tensor(np.array(3, I32))] = 5.0  # a 0-d index: one row
    ref[3] = 5
    t[Tensor(np.zeros(0, I32))] = 1.0  # selects nothing
    for dt in (np.uint8, np.int16, np.int64, np.uint32):
        t[Tensor(np.array([1, 2], dt)), 4] = float(np.dtype(dt).itemsize)
        ref[[1, 2], 4] = np.dtype(dt).itemsize
    np.testing.assert_array_equal(t.numpy(), ref)
    np.testing.assert_array_equal(col.numpy(), ref[:, 1])
    wide = Tensor(np.arange(5, dtype=np.float32)).reshape(1, 5).expand(3, 5)  # a broadcast view: copied first
    wide[Tensor(np.array([0], I32)), Tensor(np.array([2], I32))] = -3.0
    want = np.broadcast_to(np.arange(5, dtype=np.float32), (3, 5)).copy()
    want[0, 2] = -3
    np.testing.assert_array_equal(wide.numpy(), want)


def test_bad_values_and_indices() -> None:
    t = Tensor(np.zeros((3, 4), np.float32), device="CPU")
    idx = Tensor(np.array([0, 2], I32))
    with pytest.raises(ValueError, match=r"setitem: a value of shape \(3, 4\) does not fit a tensor of shape \(2, 4\)"):
        t[idx] = Tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(TypeError, match="indices must be an integer tensor, got float"):
        t[Tensor(np.array([0.0], np.float32))] = 1.0
    with pytest.raises(TypeError, match="data-dependent shape"):
        t[Tensor(np.array([True, False, True])), 0] = 1.0
