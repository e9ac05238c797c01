"""In-place updates: ``assign`` and ``t[index] = v`` write the tensor's own buffer; numpy's semantics for
the right side and for lazy readers of the old value (write-after-read, read-after-write, write-after-write)."""

from __future__ import annotations

import numpy as np
import pytest

import uops.frontend.realize as realize_mod
from uops import Tensor, UopsError, dtypes
from uops.testing.kit.helpers import rnd

DEV = ["CPU", "PYTHON"]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every kernel or copy run, in order."""
    ran: list[object] = []
    orig = realize_mod.run_item

    def run(item: object) -> None:
        ran.append(item)
        orig(item)  # type: ignore[arg-type]

    monkeypatch.setattr(realize_mod, "run_item", run)
    return ran


@pytest.mark.parametrize("device", DEV)
def test_setitem_matches_numpy(device: str) -> None:
    ref = rnd(4, 5, 3)
    t = Tensor(ref, device=device)
    cases = [
        ((1,), 7.0),
        ((slice(1, 3), slice(None), 0), rnd(2, 5)),
        ((slice(None, None, 2), 2), rnd(3)),  # broadcast over the first axis
        ((slice(None, None, -1), slice(4, 0, -2)), rnd(4, 2, 3)),
        ((Ellipsis, 1), rnd(5)),
        ((None, 2, 3), rnd(1, 3)),
    ]
    for idx, val in cases:
        ref[idx] = val
        t[idx] = val if isinstance(val, float) else Tensor(val, device=device)
        np.testing.assert_array_equal(t.numpy(), ref)


@pytest.mark.parametrize("device", DEV)
def test_right_side_reading_the_target_is_evaluated_first(device: str) -> None:
    ref = rnd(6, 4)
    t = Tensor(ref, device=device)
    ref[1:] = ref[:-1] * 2  # overlapping, shifted: numpy reads the old values
    t[1:] = t[:-1] * 2
    np.testing.assert_array_equal(t.numpy(), ref)
    ref[:, ::-1] = ref + ref.sum(0)  # each element reads others, through a reduction too
    t[:, ::-1] = t + t.sum(0)
    np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)
    ref = ref.T @ ref
    t2 = Tensor(np.ascontiguousarray(ref.T @ ref * 0), device=device)
    t2.assign(t.T @ t)
    np.testing.assert_allclose(t2.numpy(), ref, rtol=1e-5)


def test_an_update_reading_only_its_own_elements_is_one_kernel(launches: list[object]) -> None:
    t = Tensor(rnd(3, 4), device="CPU").realize()
    want = t.numpy() * 2 + 1
    launches.clear()
    t.assign(t * 2 + 1)
    assert len(launches) == 1  # straight into the buffer: no temporary, no snapshot
    np.testing.assert_array_equal(t.numpy(), want)


def test_every_holder_and_view_sees_the_write() -> None:
    t = Tensor(np.zeros((3, 4), np.float32), device="CPU")
    holder = {"t": t}
    row = t[1]  # a view of t's buffer, taken before the write
    t[1, 1:3] = 5.0
    np.testing.assert_array_equal(row.numpy(), [0, 5, 5, 0])
    np.testing.assert_array_equal(holder["t"].numpy()[1], [0, 5, 5, 0])
    col = t[:, 2]
    col[0] = 9.0  # writing through a view writes the base, as in numpy
    assert t.numpy()[0, 2] == 9.0
    t.T[3] = 1.0  # through a permuted view
    np.testing.assert_array_equal(t.numpy()[:, 3], [1, 1, 1])


@pytest.mark.parametrize("device", DEV)
def test_write_after_read_pending_reader_keeps_the_old_value(device: str) -> None:
    a = rnd(3, 4)
    t = Tensor(a, device=device)
    doubled = t * 2  # lazy: not computed yet
    total = (t + 1).sum(axis=1)  # another pending reader, through a reduction
    t[0] = 100.0
    t.assign(t - 1)
    np.testing.assert_array_equal(doubled.numpy(), a * 2)
    np.testing.assert_allclose(total.numpy(), (a + 1).sum(axis=1), rtol=1e-6)
    b = a.copy()
    b[0] = 100.0
    np.testing.assert_array_equal(t.numpy(), b - 1)


def test_write_after_read_a_held_right_side_keeps_its_value() -> None:
    t = Tensor(rnd(5), device="CPU")
    old = t.numpy()
    v = t * 3
    t.assign(v)
    t[0] = -1.0  # v was the value written; a later write to t must not change it
    np.testing.assert_array_equal(v.numpy(), old * 3)


@pytest.mark.parametrize("device", DEV)
def test_read_after_write(device: str) -> None:
    t = Tensor(np.zeros(4, np.float32), device=device)
    t[2] = 3.0
    after = t * 2  # built after the write: sees it
    np.testing.assert_array_equal(after.numpy(), [0, 0, 6, 0])


@pytest.mark.parametrize("device", DEV)
def test_two_writes_to_one_buffer_land_in_order(device: str) -> None:
    t = Tensor(np.zeros(4, np.float32), device=device)
    between = t + 0
    t[1:3] = 1.0
    t[2:] = 2.0
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2, 2])
    np.testing.assert_array_equal(between.numpy(), [0, 0, 0, 0])


def test_a_lazy_tensor_gets_a_buffer_of_its_own() -> None:
    k = Tensor.zeros(2, 3, device="CPU")
    v = Tensor.zeros(2, 3, device="CPU")  # the same lazy graph as k: one node
    k.realize()
    v.realize()
    k[0] = 1.0  # a KV cache spelled this way must not write v
    np.testing.assert_array_equal(v.numpy(), np.zeros((2, 3)))
    lazy = Tensor(rnd(2, 3), device="CPU") + 1
    before = lazy[0]  # a view of a lazy tensor is a value
    old = before.numpy().copy()
    lazy[0] = 0.0
    np.testing.assert_array_equal(lazy.numpy()[0], [0, 0, 0])
    np.testing.assert_array_equal(before.numpy(), old)


def test_kv_cache_pattern() -> None:
    cache = Tensor.zeros(2, 8, 4, device="CPU").contiguous().realize()
    ref = np.zeros((2, 8, 4), np.float32)
    for pos in range(3):
        kv = rnd(2, 1, 4)
        cache[:, pos : pos + 1] = Tensor(kv, device="CPU")
        ref[:, pos : pos + 1] = kv
        q = rnd(4)
        got = (cache[:, : pos + 1] * Tensor(q, device="CPU")).sum(-1)
        np.testing.assert_allclose(got.numpy(), (ref[:, : pos + 1] * q).sum(-1), rtol=1e-5, atol=1e-6)


def test_assign_keeps_its_checks() -> None:
    t = Tensor(np.zeros((2, 3), np.float32), device="CPU")
    t.assign(np.arange(3))  # broadcast, cast to the tensor's dtype
    assert t.dtype == dtypes.float32
    np.testing.assert_array_equal(t.numpy(), np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    with pytest.raises(ValueError, match=r"shape \(4,\) does not fit a tensor of shape \(2, 3\)"):
        t.assign(Tensor(np.zeros(4, np.float32), device="CPU"))
    with pytest.raises(ValueError, match=r"setitem: a value of shape \(2,\) does not fit a tensor of shape \(3,\)"):
        t[0] = Tensor(np.zeros(2, np.float32), device="CPU")
    with pytest.raises(UopsError, match="the value is on PYTHON, the tensor on CPU"):
        t[0] = Tensor(np.zeros(3, np.float32), device="PYTHON")
    with pytest.raises(IndexError, match="index 5 is out of range for axis 1 with size 3"):
        t[0, 5] = 1.0
    base = Tensor(np.zeros(3, np.float32), device="CPU")
    b = base.expand(2, 3)  # a broadcast view has no element of its own: it takes the value as its graph
    b.assign(np.ones((2, 3), np.float32))
    b[1, 0] = 2.0  # and a setitem gives it a buffer of its own first
    np.testing.assert_array_equal(b.numpy(), [[1, 1, 1], [2, 1, 1]])
    np.testing.assert_array_equal(base.numpy(), [0, 0, 0])


@pytest.mark.parametrize("device", DEV)
def test_a_written_right_side_read_by_a_later_write_keeps_what_was_written(device: str) -> None:
    # a momentum step: b's new value is read by p's update, whose other terms read p, the next target
    p0, g0, b0 = rnd(5), rnd(5), rnd(5)
    p, b = Tensor(p0, device=device), Tensor(b0, device=device).contiguous().realize()
    g = Tensor(g0, device=device) + 0.1 * p
    new_b = 0.5 * b + g
    update = p - 0.1 * (g + 0.5 * new_b)
    b.assign(new_b)
    p.assign(update)
    g_np = g0 + 0.1 * p0
    b_np = 0.5 * b0 + g_np
    np.testing.assert_allclose(b.numpy(), b_np, rtol=1e-5)
    np.testing.assert_allclose(p.numpy(), p0 - 0.1 * (g_np + 0.5 * b_np), rtol=1e-5)


@pytest.mark.parametrize("device", DEV)
def test_a_graph_rebuilt_after_a_write_reads_the_new_value(device: str) -> None:
    # nodes are hash-consed: the same expression built again after a write must not be the pending reader's node
    w0 = rnd(4)
    w = Tensor(w0, device=device).contiguous().realize()
    before = (w * 2).sum()
    w.assign(w + 1)
    after = (w * 2).sum()
    np.testing.assert_allclose(before.numpy(), (w0 * 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(after.numpy(), ((w0 + 1) * 2).sum(), rtol=1e-5)
