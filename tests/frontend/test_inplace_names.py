"""A view made before an in-place write and used after it: the write renames the written tensor's memory,
and what is built later from an older view must read the new value, while what was pending keeps the old."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor


def test_a_view_made_before_a_write_reads_the_new_value_after_it() -> None:
    a = Tensor(np.arange(4, dtype=np.float32)).realize()
    b = a.reshape(2, 2)
    pending = b * 2
    a[0:2] = 10.0
    after = b * 2
    np.testing.assert_array_equal(after.numpy().ravel(), [20, 20, 4, 6])
    np.testing.assert_array_equal(pending.numpy().ravel(), [0, 2, 4, 6])


def test_assign_through_one_name_then_reduce_through_an_older_slice() -> None:
    a = Tensor(np.arange(4, dtype=np.float32)).realize()
    c = a[1:3]
    before = c.sum()
    a.assign(Tensor(np.full(4, 5, np.float32)))
    assert c.sum().item() == 10.0 and before.item() == 3.0


def test_writes_through_two_names_of_one_memory_chain() -> None:
    a = Tensor(np.zeros(4, np.float32)).realize()
    v = a[0:4]  # a second tensor over the same memory
    mid = a + 0
    v[1] = 7.0  # written through the older name
    a[2] = 9.0  # then through the written tensor's own name
    np.testing.assert_array_equal((v + 1).numpy(), [1, 8, 10, 1])
    np.testing.assert_array_equal((a * 1).numpy(), [0, 7, 9, 0])
    np.testing.assert_array_equal(mid.numpy(), [0, 0, 0, 0])


def test_an_in_place_write_autograd_would_have_to_see_through_is_refused() -> None:
    from uops.frontend.autograd import AutogradError

    x = Tensor(np.ones(4, np.float32), requires_grad=True)
    y = (x * 2).realize()
    with pytest.raises(AutogradError, match="setitem: an in-place write where the tensor written requires grad"):
        y[1:3] = 0.0
    z = Tensor(np.zeros(4, np.float32)).realize()
    with pytest.raises(AutogradError, match="the value written requires grad"):
        z[0:4] = x
    with pytest.raises(AutogradError, match="assign"):
        x.assign(np.zeros(4, np.float32))
    with Tensor.no_grad():  # what an optimizer step does
        x.assign(x - 1)
    assert x.requires_grad and np.array_equal(x.numpy(), np.zeros(4))
    lazy = x * 3  # a lazy non-leaf takes the value's graph, and what it requires with it
    lazy.assign(Tensor(np.ones(4, np.float32)))
    assert not lazy.requires_grad
