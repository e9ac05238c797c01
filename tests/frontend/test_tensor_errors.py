"""Tensor-level hardening, on every device: Python scalars that do not fit (numpy 2's rules), truth
values, the spellings of ``cat``/``stack``, named errors for axis and size arguments, reductions of
constants that fold, and the numpy array protocol."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.frontend.tensor import AxisError


def same(t: Tensor, ref: np.ndarray | list | float | int) -> None:
    got = t.numpy()
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"shape {got.shape} != numpy's {ref.shape}"
    np.testing.assert_array_equal(got, ref)


# ----- finding 4: Python scalars that do not fit -----


def test_big_python_ints_get_a_dtype_that_fits(device):
    t = Tensor([2**40, 1], device=device)
    assert t.dtype == dtypes.int64
    same(t, np.array([2**40, 1]))
    s = Tensor(2**40, device=device)
    assert s.dtype == dtypes.int64 and s.item() == 2**40
    u = Tensor([2**63], device=device)
    assert u.dtype == dtypes.uint64
    same(u, np.array([2**63]))
    assert Tensor([-(2**40)], device=device).dtype == dtypes.int64
    assert Tensor([1, 2], device=device).dtype == dtypes.default_int  # small ints keep the default
    same(Tensor.full(3, 2**40, device=device), np.full(3, 2**40))
    same(Tensor.arange(2**40, 2**40 + 3, device=device), np.arange(2**40, 2**40 + 3))


def test_ints_beyond_64_bits_raise(device):
    with pytest.raises(OverflowError, match=str(2**64)):
        Tensor([2**64], device=device)
    with pytest.raises(OverflowError, match=str(2**70)):
        Tensor(2**70, device=device)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: Tensor([300], device=d, dtype="int8"),
        lambda d: Tensor(300, device=d, dtype="int8"),
        lambda d: Tensor.full(3, 300, dtype="int8", device=d),
        lambda d: Tensor([1, 2], device=d, dtype="int8") + 300,
        lambda d: 300 + Tensor([1, 2], device=d, dtype="int8"),
        lambda d: Tensor([1, 2], device=d, dtype="int8").maximum(300),
        lambda d: Tensor([1, 2], device=d, dtype="int8") ** 300,
    ],
)
def test_an_int_that_does_not_fit_the_dtype_raises_like_numpy(device, make):
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for int8"):
        make(device)


def test_in_range_scalars_keep_the_tensor_dtype_and_wrap_like_numpy(device):
    a = np.array([100, -100], dtype=np.int8)
    t = Tensor(a, device=device)
    with np.errstate(over="ignore"):
        ref = a + np.int8(100)
    out = t + 100
    assert out.dtype == dtypes.int8
    same(out, ref)
    with pytest.raises(OverflowError, match="Python integer -1 out of bounds for uint8"):
        Tensor(np.array([1], np.uint8), device=device) + (-1)


def test_comparisons_with_out_of_range_ints_are_exact_like_numpy(device):
    a = np.array([-128, 0, 127], dtype=np.int8)
    t = Tensor(a, device=device)
    for y in (300, -300, 2**70):
        same(t < y, a < y)
        same(t > y, a > y)
        same(t <= y, a <= y)
        same(t >= y, a >= y)
        same(t == y, a == y)
        same(t != y, a != y)
    u = np.array([0, 255], dtype=np.uint8)
    same(Tensor(u, device=device) == -1, u == -1)
    same(Tensor(u, device=device) > -1, u > -1)


def test_float_overflow_is_inf_with_numpy_warning(device):
    with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
        t = Tensor([1e300], device=device, dtype=dtypes.float32)
    same(t, np.array([np.inf], np.float32))
    with pytest.warns(RuntimeWarning, match="overflow encountered in cast"):
        s = Tensor(np.ones(2, np.float32), device=device) + 1e300
    same(s, np.full(2, np.inf, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = Tensor([1e300], device=device)  # no dtype: float64 holds it, as numpy does
    assert big.dtype == dtypes.float64
    same(big, np.array([1e300]))


# ----- finding 7: truth values -----


def test_truth_value_like_numpy(device):
    assert not bool(Tensor([0.0], device=device))
    assert bool(Tensor([2.0], device=device))
    assert not Tensor(np.float32(3), device=device) > 5
    assert Tensor([[7]], device=device) > 5
    t = Tensor([1.0, 9.0], device=device)
    with pytest.raises(ValueError, match="truth value of a tensor with more than one element is ambiguous"):
        if t > 5:
            pass
    with pytest.raises(ValueError, match="truth value of an empty tensor is ambiguous"):
        bool(Tensor(np.zeros(0, np.float32), device=device))
    same(t.any(), np.True_)
    same((t > 5).all(), np.False_)


# ----- finding 8: spellings of cat and stack -----


def test_cat_and_stack_spellings_mean_the_same(device):
    a, b, c = (np.arange(6, dtype=np.float32).reshape(2, 3) + k for k in (0, 10, 20))
    x, y, z = (Tensor(v, device=device) for v in (a, b, c))
    ref = np.concatenate([a, b])
    for out in (x.cat(y), x.cat(y, dim=0), Tensor.cat(x, y), Tensor.cat([x, y]), Tensor.cat((x, y), dim=0)):
        same(out, ref)
    same(x.cat([y, z], dim=1), np.concatenate([a, b, c], axis=1))
    same(x.cat_with(y, dim=-1), np.concatenate([a, b], axis=-1))
    for out in (x.stack(y), Tensor.stack(x, y), Tensor.stack([x, y])):
        same(out, np.stack([a, b]))
    same(x.stack(y, dim=-1), np.stack([a, b], axis=-1))
    with pytest.raises(TypeError, match="cat takes tensors"):
        Tensor.cat(x, 5)
    with pytest.raises(ValueError, match="cat needs at least one tensor"):
        Tensor.cat([])


def test_constructors_reached_through_an_instance_are_the_same_constructors(device):
    # classmethods: an instance adds nothing and drops nothing (no tensor argument is lost)
    x = Tensor([1.0], device=device)
    same(x.full((2,), 3.0, device=device), np.full(2, 3.0, np.float32))
    same(x.arange(3, device=device), np.arange(3, dtype=np.int32))


# ----- finding 10: named errors for axis and size arguments -----


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.sum(0),
        lambda t: t.max(0),
        lambda t: t.min(-1),
        lambda t: t.mean(0),
        lambda t: t.argmax(0),
        lambda t: t.softmax(),
        lambda t: t.log_softmax(0),
        lambda t: t.sum((0,)),
    ],
)
def test_axis_on_a_0d_tensor_is_named(device, call):
    t = Tensor(np.float32(3), device=device)
    with pytest.raises(AxisError, match=r"axis -?\d is out of range for a 0-d tensor, which has no axes"):
        call(t)


def test_whole_reductions_of_a_0d_tensor_work(device):
    t = Tensor(np.float32(3), device=device)
    same(t.sum(), np.float32(3))
    same(t.max(), np.float32(3))
    same(t.mean(), np.float32(3))
    same(t.argmax(), np.int32(0))


@pytest.mark.parametrize("axis", [1.0, True, np.bool_(False), "0", [0, 1.5]])
def test_axis_must_be_an_integer(device, axis):
    t = Tensor(np.ones((2, 3), np.float32), device=device)
    with pytest.raises(TypeError, match="axis must be an integer, got"):
        t.sum(axis)


def test_axis_out_of_range_names_the_allowed_range(device):
    t = Tensor(np.ones((2, 3), np.float32), device=device)
    with pytest.raises(AxisError, match=r"axis 2 is out of range for a tensor of shape \(2, 3\) .*-2\.\.1"):
        t.max(2)
    with pytest.raises(IndexError):  # numpy's AxisError is both
        t.argmax(-3)


@pytest.mark.parametrize(
    "call, what",
    [
        (lambda t: t.reshape(3.5, 2), "reshape size"),
        (lambda t: t.reshape((3, 2.0)), "reshape size"),
        (lambda t: t.reshape(True, 6), "reshape size"),
        (lambda t: t.expand(6.0), "expand size"),
        (lambda t: Tensor.zeros(2.5), "shape size"),
        (lambda t: t.pad([(0.5, 0)]), "pad amount"),
    ],
)
def test_sizes_must_be_integers(device, call, what):
    t = Tensor(np.ones(6, np.float32), device=device)
    with pytest.raises(TypeError, match=f"{what} must be an integer, got"):
        call(t)


# ----- finding 11: reductions of a constant fold -----


def test_a_constants_reduction_folds_to_size_times_value(device):
    big = Tensor.ones(2**40, device=device)
    s = big.sum()
    assert len(s.schedule()) == 1  # one kernel storing one value, no loop over 2**40 elements
    assert s.item() == 2.0**40
    assert big.mean().item() == 1.0
    assert (big * 3).sum().item() == 3 * 2.0**40
    assert Tensor.full(2**40, 7, device=device).max().item() == 7
    assert Tensor.full(2**40, -7, device=device).min().item() == -7
    same(Tensor.full((3, 2**33), 1, dtype=dtypes.int64, device=device).sum(1), np.full(3, 2**33))
    same(Tensor.full(100, 2, dtype=dtypes.int64, device=device).prod(), np.full(100, 2, np.int64).prod())
    same(Tensor.full((2, 3), 0.25, device=device).sum(0, keepdim=True), np.full((1, 3), 0.5, np.float32))
    same(Tensor.ones(2**40, dtype=dtypes.int8, device=device).cast(dtypes.int64).sum(), np.int64(2**40))


# ----- finding 12: the numpy array protocol -----


def test_numpy_defers_to_tensor_and_reads_its_values(device):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a, device=device)
    for out, ref in ((a + t, a + a), (a * t, a * a), (a - t, a - a), (a < t + 1, a < a + 1), (a @ t.T, a @ a.T)):
        assert isinstance(out, Tensor)
        np.testing.assert_allclose(out.numpy(), ref)
    got = np.asarray(t)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(np.array(t, dtype=np.float64), a.astype(np.float64))
    np.testing.assert_array_equal(
        np.array([Tensor([1, 2], device=device), Tensor([3, 4], device=device)]), [[1, 2], [3, 4]]
    )
    with pytest.raises(ValueError, match="copy"):
        np.asarray(t, copy=False)
