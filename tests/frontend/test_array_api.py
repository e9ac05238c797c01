"""uops.array_api: a smoke test of each family against numpy (the full standard suite runs from
bench/array_api.sh), the sorting kernels, and the new elementwise math."""

from __future__ import annotations

import math

import numpy as np
import pytest

import uops.array_api as xp
from uops import Tensor
from uops.dtypes import from_numpy


def test_namespace_and_version():
    t = xp.asarray([1.0, 2.0])
    assert t.__array_namespace__() is xp
    assert t.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="2099.12"):
        t.__array_namespace__(api_version="2099.12")
    assert xp.__array_api_version__ == "2024.12"
    info = xp.__array_namespace_info__()
    assert info.default_dtypes()["integral"] == xp.int64 == xp.asarray(1).dtype == xp.asarray([1, 2]).dtype
    assert xp.arange(3).dtype == xp.full(2, 7).dtype == xp.int64
    assert set(info.dtypes(kind="unsigned integer")) == {"uint8", "uint16", "uint32", "uint64"}


def test_dtype_functions():
    assert xp.isdtype(xp.int8, "signed integer") and not xp.isdtype(xp.uint8, "signed integer")
    assert xp.isdtype(xp.float32, ("bool", "real floating"))
    assert xp.finfo(xp.float32).eps == float(np.finfo(np.float32).eps)
    assert xp.iinfo(xp.int16).min == -32768 and xp.iinfo(xp.uint64).max == 2**64 - 1
    assert xp.result_type(xp.int8, xp.uint8) == xp.int16
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.int16, xp.int8)
    assert xp.astype(xp.asarray([1.7, -2.2]), xp.int32).tolist() == [1, -2]


def test_creation():
    np.testing.assert_array_equal(xp.eye(3, 4, k=1).numpy(), np.eye(3, 4, k=1))
    np.testing.assert_allclose(xp.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5))
    np.testing.assert_array_equal(xp.tril(xp.ones((3, 3))).numpy(), np.tril(np.ones((3, 3))))
    np.testing.assert_array_equal(xp.triu(xp.ones((3, 4)), k=1).numpy(), np.triu(np.ones((3, 4)), 1))
    a, b = xp.meshgrid(xp.arange(3), xp.arange(2))
    na, nb = np.meshgrid(np.arange(3), np.arange(2))
    np.testing.assert_array_equal(a.numpy(), na)
    np.testing.assert_array_equal(b.numpy(), nb)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)


def test_elementwise_math_matches_numpy():
    x = np.array([-3.0, -0.7, -0.0, 0.0, 0.2, 0.9, 2.5, 40.0], dtype=np.float64)
    t = xp.asarray(x)
    refs = {"atan": np.arctan, "asinh": np.arcsinh, "expm1": np.expm1, "sinh": np.sinh, "cosh": np.cosh}
    refs |= {"log1p": np.log1p, "round": np.round, "signbit": np.signbit}
    for name, ref in refs.items():
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(getattr(xp, name)(t).numpy(), ref(x), rtol=1e-12, err_msg=name)
    u = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    for name, ref in [("asin", np.arcsin), ("acos", np.arccos), ("atanh", np.arctanh)]:
        with np.errstate(divide="ignore"):
            np.testing.assert_allclose(getattr(xp, name)(xp.asarray(u)).numpy(), ref(u), rtol=1e-12, err_msg=name)
    y = np.array([1.0, -1.0, 0.0, -0.0, math.inf, 3.0])
    z = np.array([-0.0, 0.0, -1.0, -1.0, -math.inf, 4.0])
    np.testing.assert_allclose(xp.atan2(xp.asarray(y), xp.asarray(z)).numpy(), np.arctan2(y, z))
    np.testing.assert_allclose(xp.hypot(xp.asarray(y), xp.asarray(z)).numpy(), np.hypot(y, z))
    np.testing.assert_allclose(xp.logaddexp(xp.asarray(y), xp.asarray(z)).numpy(), np.logaddexp(y, z))
    np.testing.assert_array_equal(xp.nextafter(xp.asarray(y), xp.asarray(z)).numpy(), np.nextafter(y, z))


def test_shifts_and_scalars_on_either_side():
    a = np.array([-8, 5, 1, 100], dtype=np.int8)
    np.testing.assert_array_equal(xp.bitwise_right_shift(xp.asarray(a), 1).numpy(), a >> 1)
    np.testing.assert_array_equal(xp.bitwise_left_shift(xp.asarray(a), 2).numpy(), a << 2)
    np.testing.assert_array_equal(xp.subtract(10, xp.asarray(a)).numpy(), 10 - a)
    np.testing.assert_array_equal(xp.less(3, xp.asarray(a)).numpy(), 3 < a)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_are_stable_with_nans_last(descending):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 4, (3, 9)).astype(np.float32)
    x[0, 3] = np.nan
    t = xp.asarray(x)
    idx = xp.argsort(t, axis=-1, descending=descending).numpy()
    key = -x if descending else x
    ref = np.argsort(np.where(np.isnan(x), np.inf, key), axis=-1, kind="stable")
    ref[0] = np.argsort(np.where(np.isnan(x[0]), np.inf, key[0]), kind="stable")
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_array_equal(xp.sort(t, axis=0).numpy(), np.sort(x, axis=0))
    assert xp.argsort(t).dtype == xp.int64


def test_statistics_and_search():
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    t = xp.asarray(x)
    np.testing.assert_allclose(xp.std(t, axis=1, correction=1).numpy(), np.std(x, axis=1, ddof=1), rtol=1e-6)
    np.testing.assert_array_equal(xp.cumulative_sum(t, axis=1).numpy(), np.cumsum(x, axis=1))
    np.testing.assert_array_equal(
        xp.cumulative_sum(t, axis=0, include_initial=True).numpy(), np.concatenate([np.zeros((1, 4)), np.cumsum(x, 0)])
    )
    np.testing.assert_array_equal(xp.cumulative_prod(t[:, :2], axis=0).numpy(), np.cumprod(x[:, :2], axis=0))
    np.testing.assert_array_equal(xp.argmax(t, axis=0).numpy(), np.argmax(x, axis=0))
    np.testing.assert_array_equal(xp.count_nonzero(t).numpy(), np.count_nonzero(x))
    s = np.array([1.0, 2.0, 2.0, 5.0])
    q = np.array([2.0, 0.0, 9.0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(
            xp.searchsorted(xp.asarray(s), xp.asarray(q), side=side).numpy(), np.searchsorted(s, q, side=side)
        )
    np.testing.assert_array_equal(xp.diff(t, axis=1).numpy(), np.diff(x, axis=1))
    np.testing.assert_array_equal(xp.nonzero(t > 3)[1].numpy(), np.nonzero(x > 3)[1])


def test_sets_treat_each_nan_as_distinct():
    x = np.array([3.0, 1.0, np.nan, 3.0, np.nan])
    r = xp.unique_all(xp.asarray(x))
    np.testing.assert_array_equal(r.values.numpy(), [1.0, 3.0, np.nan, np.nan])
    np.testing.assert_array_equal(r.counts.numpy(), [1, 2, 1, 1])
    np.testing.assert_array_equal(r.values.numpy()[r.inverse_indices.numpy()], x)


def test_manipulation_and_linalg():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = xp.asarray(x)
    np.testing.assert_array_equal(xp.roll(t, 2, axis=2).numpy(), np.roll(x, 2, axis=2))
    np.testing.assert_array_equal(xp.roll(t, -1).numpy(), np.roll(x, -1))
    np.testing.assert_array_equal(xp.moveaxis(t, 0, -1).numpy(), np.moveaxis(x, 0, -1))
    np.testing.assert_array_equal(xp.repeat(t, 2, axis=1).numpy(), np.repeat(x, 2, axis=1))
    np.testing.assert_array_equal(xp.tile(t, (2, 1, 1)).numpy(), np.tile(x, (2, 1, 1)))
    np.testing.assert_array_equal(xp.unstack(t, axis=1)[2].numpy(), x[:, 2])
    np.testing.assert_allclose(xp.tensordot(t, t, axes=([1, 2], [1, 2])).numpy(), np.tensordot(x, x, ([1, 2], [1, 2])))
    np.testing.assert_allclose(xp.vecdot(t, t).numpy(), np.sum(x * x, -1))
    np.testing.assert_array_equal(xp.matrix_transpose(t).numpy(), np.swapaxes(x, -1, -2))
    np.testing.assert_allclose(xp.linalg.trace(t[0]).numpy(), np.trace(x[0]))
    assert t.size == 24 and t.mT.shape == (2, 4, 3)


def test_tensor_methods_added_for_the_standard():
    t = Tensor([2.0])
    assert int(t) == 2 and float(t) == 2.0 and +t is t
    with pytest.raises(TypeError, match="integer"):
        [0, 1, 2][Tensor(1.0)]
    assert [0, 1, 2][Tensor(1)] == 1


def test_signed_zero_and_power_special_cases_follow_ieee():
    z = np.array([-0.0, 0.0, -2.0])
    np.testing.assert_array_equal(np.signbit(xp.abs(xp.asarray(z)).numpy()), np.signbit(np.abs(z)))
    np.testing.assert_array_equal(np.signbit(xp.tanh(xp.asarray(z)).numpy()), np.signbit(np.tanh(z)))
    a = np.array([-0.0, -0.0, -np.inf, -np.inf, 1.0, -1.0, -1.0, 2.0, -2.0, 0.0, -3.0])
    b = np.array([3.0, -3.0, 0.5, 3.0, np.nan, np.inf, -np.inf, 0.5, 2.0, -1.0, 3.0])
    with np.errstate(all="ignore"):
        ref = a**b
    out = (xp.asarray(a) ** xp.asarray(b)).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-14)  # through exp2/log2: a few roundings
    np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


def test_all_and_any_over_no_elements():
    e = xp.zeros((2, 0))
    assert xp.all(e).item() is True and xp.any(e).item() is False
    np.testing.assert_array_equal(xp.all(e, axis=1).numpy(), [True, True])


def test_subtracting_a_negative_zero_constant_compiles():
    """``a - -0.0`` once rendered as C's ``a--0.0`` (a syntax error): sinh near 0 builds exactly that."""
    x = np.array([1.5, -2.0, 0.0])
    t = Tensor(x, device="CPU")
    np.testing.assert_array_equal(((t * 3) - Tensor(-0.0, dtype="float64")).numpy(), x * 3)
    np.testing.assert_allclose((t * 3).sinh().numpy(), np.sinh(x * 3), rtol=1e-12)


def test_a_nans_sign_survives_constants():
    """A NaN constant keeps its sign bit (numpy's signbit sees it), also after a positive NaN was built."""
    plus = xp.signbit(xp.asarray(math.nan, dtype=xp.float64)).item()
    minus = xp.signbit(xp.asarray(-math.nan, dtype=xp.float64)).item()
    assert (plus, minus) == (False, True)
    assert np.signbit(xp.asarray(-math.nan, dtype=xp.float32).numpy())


def test_take_and_triangles_through_tensor_methods():
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    t = xp.asarray(x)
    idx = np.array([3, 0, 0, 1])
    np.testing.assert_array_equal(xp.take(t, xp.asarray(idx), axis=2).numpy(), np.take(x, idx, axis=2))
    np.testing.assert_array_equal(xp.take(xp.asarray(x[0, 0]), xp.asarray(idx)).numpy(), np.take(x[0, 0], idx))
    along = np.array([[[1], [0], [2]]])
    np.testing.assert_array_equal(
        xp.take_along_axis(t, xp.asarray(along), axis=1).numpy(), np.take_along_axis(x, along, axis=1)
    )
    with pytest.raises(ValueError, match="axis="):
        xp.take(t, xp.asarray(idx))
    np.testing.assert_array_equal(xp.tril(t, k=-1).numpy(), np.tril(x, -1))
    np.testing.assert_array_equal(xp.triu(t, k=2).numpy(), np.triu(x, 2))
    c = xp.cumulative_sum(t, axis=-1, include_initial=True)
    assert c.dtype == xp.int64  # numpy's cumsum of int16
    np.testing.assert_array_equal(c.numpy(), np.concatenate([np.zeros((2, 3, 1)), np.cumsum(x, -1)], -1))
    p = xp.cumulative_prod(t, axis=1, include_initial=True, dtype=xp.int64)
    np.testing.assert_array_equal(p.numpy(), np.concatenate([np.ones((2, 1, 4)), np.cumprod(x, 1, dtype=np.int64)], 1))


@pytest.mark.parametrize("dt", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float32"])
def test_accumulation_dtypes_are_numpys(dt: str):
    a = (np.arange(1, 7) % 3).astype(dt).reshape(2, 3)
    t = xp.asarray(a)
    for ours, theirs in ((xp.sum, np.sum), (xp.prod, np.prod), (xp.cumulative_sum, np.cumulative_sum)):
        got, want = ours(t, axis=1), theirs(a, axis=1)
        assert got.dtype == from_numpy(want.dtype), (ours.__name__, dt)
        np.testing.assert_array_equal(got.numpy(), want)
        exact = ours(t, axis=1, dtype=xp.float64 if dt == "float32" else xp.int64 if dt != "uint32" else xp.uint64)
        np.testing.assert_array_equal(exact.numpy(), want)
    assert xp.argmax(t, axis=1).dtype == xp.int64 and np.argmax(a, axis=1).dtype == np.int64


def test_int32_sum_past_two_to_the_31_is_exact():
    a = np.full(3, 2**30, dtype=np.int32)
    np.testing.assert_array_equal(xp.sum(xp.asarray(a)).numpy(), np.sum(a))
    np.testing.assert_array_equal(xp.sum(xp.asarray(a), dtype=xp.int64).numpy(), np.sum(a))  # 3221225472


def test_linalg_cross_matrix_power_and_matrix_norm_match_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.random((2, 3), dtype=np.float32), rng.random((1, 3), dtype=np.float32)
    np.testing.assert_allclose(xp.linalg.cross(xp.asarray(a), xp.asarray(b)).numpy(), np.cross(a, b), atol=1e-6)
    m = rng.random((2, 3, 3), dtype=np.float32)
    for n in (0, 1, 2, 5):
        got = xp.linalg.matrix_power(xp.asarray(m), n).numpy()
        np.testing.assert_allclose(got, np.linalg.matrix_power(m, n), rtol=1e-5)
    for order in ("fro", 1, -1, math.inf, -math.inf):
        want = np.linalg.norm(m, ord=order, axis=(-2, -1), keepdims=True)
        got = xp.linalg.matrix_norm(xp.asarray(m), ord=order, keepdims=True).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError, match="SVD"):
        xp.linalg.matrix_norm(xp.asarray(m), ord=2)
    with pytest.raises(ValueError, match="inverse"):
        xp.linalg.matrix_power(xp.asarray(m), -1)
