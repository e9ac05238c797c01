"""uops' result dtypes against numpy 2: the promotion table over every pair of dtypes, weak Python scalars,
and each reduction's dtype and value. The deliberate differences are ``uops.dtypes.NUMPY_DIFFERENCES``,
shown in docs/dtypes.md: each row is checked here against numpy, and the docs' table against the dict."""

from __future__ import annotations

import numpy as np
import pytest

import uops.array_api as xp
from tests import REPO
from uops import Tensor
from uops.dtypes import NUMPY_DIFFERENCES, SCALARS, DType, dtypes, from_numpy, least_upper_dtype, promote_for, to_numpy
from uops.renderer import DTypeNotSupportedError
from uops.testing import devices_from_env

DEVICE = "CPU"
# the dtypes numpy has (all but bfloat16), as uops and as numpy dtypes
NUMPY_DTYPES = [d for d in SCALARS if d != dtypes.bfloat16]
INTS_AND_BOOL = [d for d in NUMPY_DTYPES if not dtypes.is_float(d)]

# the rows of NUMPY_DIFFERENCES, by the short name each test below checks
ROWS = {
    "ints": "a Tensor from Python ints (`Tensor([1, 2])`, `Tensor.arange(3)`)",
    "floats": "a Tensor from Python floats (`Tensor([0.5])`)",
    "bool_with_int": "a bool tensor with a Python int (`b + 1`)",
    "numpy_scalars": "a numpy scalar with a tensor (`x / np.sqrt(d)`, `np.float64`)",
    "int_with_float": "an integer or bool tensor with a Python float (`i * 0.5`)",
    "int_division_and_stats": "`/` of integers or bools; `mean`, `var`, `std` of integers or bools",
    "int_float_math": "float math (`sqrt`, `exp`, `sin`, ...) of integers or bools",
    "bfloat16": "bfloat16 with any dtype",
    "no_float64": "an integer with a float where numpy gives float64, on a device without float64 (Metal)",
}


def _name(d: DType | np.dtype) -> str:
    return "bfloat16" if d == dtypes.bfloat16 else (to_numpy(d) if isinstance(d, DType) else np.dtype(d)).name


def _row(short: str) -> tuple[str, str]:
    """(numpy's dtype, uops') as the row's cells name them first."""
    numpy_cell, uops_cell, _ = NUMPY_DIFFERENCES[ROWS[short]]
    return numpy_cell.split()[0], uops_cell.split()[0]


def _data(d: DType, shape: tuple[int, ...] = (3, 4)) -> np.ndarray:
    rng = np.random.default_rng(d.priority)
    if dtypes.is_bool(d):
        return rng.random(shape) < 0.5
    lo = 0 if dtypes.is_unsigned(d) else -3
    return rng.integers(lo, 4, shape).astype(to_numpy(d))


# ----- the table in the docs is the core's -----
def test_docs_table_is_the_core_table() -> None:
    text = (REPO / "docs" / "dtypes.md").read_text()
    section = text.split("## Where uops differs from numpy", 1)[1]
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in section.splitlines()]
    rows = [r for r in rows if len(r) == 4 and r[0] not in ("case", "---")]
    assert rows == [[case, *cells] for case, cells in NUMPY_DIFFERENCES.items()]
    assert "docs/dtypes.md" in (REPO / "README.md").read_text()


def test_every_difference_is_checked_here() -> None:
    assert set(ROWS.values()) == set(NUMPY_DIFFERENCES)


# ----- promotion -----
def test_promotion_of_every_pair_is_numpys() -> None:
    for a in NUMPY_DTYPES:
        for b in NUMPY_DTYPES:
            want = np.result_type(to_numpy(a), to_numpy(b))
            assert _name(least_upper_dtype(a, b)) == want.name, (a, b)
            ta, tb = Tensor(np.zeros(2, to_numpy(a)), device=DEVICE), Tensor(np.zeros(2, to_numpy(b)), device=DEVICE)
            assert _name((ta + tb).dtype) == _name(ta.where(ta, tb).dtype) == want.name, (a, b)


def test_int32_with_float16_is_float64_and_exact() -> None:
    i = Tensor(np.array([70000, -3], np.int32), device=DEVICE)
    h = Tensor(np.array([0.5, 1.0], np.float16), device=DEVICE)
    want = np.array([70000, -3], np.int32) + np.array([0.5, 1.0], np.float16)
    got = i + h
    assert got.dtype == from_numpy(want.dtype) == dtypes.float64
    np.testing.assert_array_equal(got.numpy(), want)


def test_bfloat16_ranks_as_float16() -> None:
    numpy_cell, _ = _row("bfloat16")
    assert numpy_cell == "no" and not hasattr(np, "bfloat16")
    for d in SCALARS:
        like_f16 = least_upper_dtype(dtypes.float16, d if d != dtypes.bfloat16 else dtypes.float16)
        want = dtypes.float32 if d == dtypes.float16 else dtypes.bfloat16 if like_f16 == dtypes.float16 else like_f16
        assert least_upper_dtype(dtypes.bfloat16, d) == least_upper_dtype(d, dtypes.bfloat16) == want, d


def test_no_float64_device_promotes_mixed_kinds_to_float32() -> None:
    metal = pytest.importorskip("uops_metal.renderer")
    unsupported = metal.MetalRenderer().unsupported_dtypes
    assert dtypes.float64 in unsupported
    numpy_cell, uops_cell = _row("no_float64")
    seen = 0
    for i in INTS_AND_BOOL:
        for f in (dtypes.float16, dtypes.float32):
            if least_upper_dtype(i, f) == dtypes.float64:
                assert (numpy_cell, uops_cell) == ("float64", _name(promote_for(unsupported, i, f)))
                seen += 1
            else:
                assert promote_for(unsupported, i, f) == least_upper_dtype(i, f)
        assert promote_for(unsupported, i, dtypes.float64) == dtypes.float64  # asked for: the device's error
    assert seen == 8  # int32, uint32, int64 and uint64 with float16 and with float32
    assert promote_for(frozenset(), dtypes.int32, dtypes.float32) == dtypes.float64


@pytest.mark.skipif("METAL_EMU" not in devices_from_env(), reason="the Metal emulation is not available here")
def test_no_float64_device_runs_mixed_kinds_in_float32() -> None:
    """On the emulated Metal device (no float64, like the real one) numpy's float64 becomes float32 and runs;
    an explicit float64 is refused naming the dtype and the device."""
    i = Tensor(np.array([70000, -3], np.int32), device="METAL_EMU")
    f = Tensor(np.array([0.5, 1.0], np.float32), device="METAL_EMU")
    for got in (i + f, i.where(i > 0, f), Tensor.cat(i, f)):
        assert got.dtype == dtypes.float32
    np.testing.assert_array_equal((i + f).numpy(), np.array([70000.5, -2.0], np.float32))
    assert i.sum().dtype == dtypes.int64  # int64 is there: sums still do not wrap
    with pytest.raises(DTypeNotSupportedError, match="METAL_EMU"):
        (Tensor(np.array([1.0]), device="METAL_EMU") * 2).numpy()


# ----- Python scalars are weak (NEP 50) -----
@pytest.mark.parametrize("scalar", [True, 2, 1.5])
def test_weak_python_scalars(scalar: bool | int | float) -> None:
    for d in NUMPY_DTYPES:
        t = Tensor(np.ones(2, to_numpy(d)), device=DEVICE)
        want = np.result_type(to_numpy(d), scalar).name
        got = {_name((t + scalar).dtype), _name((scalar * t).dtype)}
        assert len(got) == 1, (d, scalar)
        if isinstance(scalar, float) and not dtypes.is_float(d):
            assert (want, *got) == _row("int_with_float"), d
        elif type(scalar) is int and dtypes.is_bool(d):
            assert (want, *got) == _row("bool_with_int")
        else:
            assert got == {want}, (d, scalar)
    with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
        Tensor(np.ones(2, np.uint8), device=DEVICE) + 300  # numpy 2 raises too


def test_numpy_scalars_are_weak_like_python_scalars() -> None:
    numpy_cell, uops_cell = NUMPY_DIFFERENCES[ROWS["numpy_scalars"]][:2]
    assert numpy_cell.startswith("its dtype") and uops_cell.startswith("weak")
    differs = set()
    for d in NUMPY_DTYPES:
        t = Tensor(np.ones(2, to_numpy(d)), device=DEVICE)
        for s in (np.float64(1.5), np.float32(0.5), np.int64(2), np.int8(1), np.bool_(True)):
            assert (t + s).dtype == (t + s.item()).dtype, (d, s)
            if np.result_type(to_numpy(d), s) != np.result_type(to_numpy(d), s.item()):
                differs.add((d, type(s)))
    assert (dtypes.float32, np.float64) in differs  # numpy 2: float32 array * np.float64 scalar is float64


def test_creation_defaults() -> None:
    assert (np.asarray([1, 2]).dtype.name, _name(Tensor([1, 2]).dtype)) == _row("ints")
    assert (np.arange(3).dtype.name, _name(Tensor.arange(3).dtype)) == _row("ints")
    assert Tensor([2**40]).dtype == dtypes.int64  # "when a value needs it"
    assert (np.asarray([0.5]).dtype.name, _name(Tensor([0.5]).dtype)) == _row("floats")
    assert xp.asarray([1, 2]).dtype == xp.arange(3).dtype == xp.int64  # the Array API namespace: numpy's


# ----- integers becoming floats -----
def test_int_division_and_stats_give_the_default_float() -> None:
    for d in INTS_AND_BOOL:
        a = _data(d)
        t = Tensor(a, device=DEVICE)
        div = np.full(a.shape, 3, to_numpy(d))  # True for bool
        for got, want in ((t / Tensor(div, device=DEVICE), a / div), (t / 3, a / 3)):
            assert (want.dtype.name, _name(got.dtype)) == _row("int_division_and_stats"), d
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        for name in ("mean", "var", "std"):
            got, want = getattr(t, name)(1), getattr(np, name)(a, axis=1)
            assert (want.dtype.name, _name(got.dtype)) == _row("int_division_and_stats"), (d, name)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_mean_of_large_ints_sums_exactly() -> None:
    a = np.array([2**24 + 1, 2**24 + 3, 2**30], np.int32)  # float32 cannot hold the sum of the first two
    got = Tensor(a, device=DEVICE).mean()
    assert got.dtype == dtypes.float32
    assert got.item() == np.float32(np.mean(a))


def test_float_math_of_ints() -> None:
    numpy_cell = NUMPY_DIFFERENCES[ROWS["int_float_math"]][0]
    for d in INTS_AND_BOOL:
        a = np.abs(_data(d)) if not dtypes.is_bool(d) else _data(d)
        t = Tensor(a, device=DEVICE)
        want = np.sqrt(a).dtype.name
        bits = 8 * d.itemsize
        described = "float16" if bits == 8 else "float32" if bits == 16 else "float64"
        assert want == described and f"{described} for" in numpy_cell, d
        assert _name(t.sqrt().dtype) == _name(t.exp().dtype) == _row("int_float_math")[1]
        np.testing.assert_allclose(t.sqrt().numpy(), np.sqrt(a.astype(np.float64)), rtol=1e-6)


# ----- reductions -----
_SAME_AS_NUMPY = ("sum", "prod", "cumsum", "max", "min", "any", "all", "argmax", "argmin")


@pytest.mark.parametrize("d", NUMPY_DTYPES, ids=_name)
def test_reductions_match_numpy(d: DType) -> None:
    a = _data(d) if not dtypes.is_float(d) else np.random.default_rng(0).uniform(-2, 2, (3, 4)).astype(to_numpy(d))
    t = Tensor(a, device=DEVICE)
    for name in (*_SAME_AS_NUMPY, "mean", "var", "std"):
        for axis in (None, 1):
            if name == "cumsum" and axis is None:
                continue
            got = getattr(t, name)(axis)
            want = np.asarray(getattr(np, name)(a, axis=axis))
            if name in _SAME_AS_NUMPY or dtypes.is_float(d):
                assert _name(got.dtype) == want.dtype.name, (name, axis)
            else:
                assert (want.dtype.name, _name(got.dtype)) == _row("int_division_and_stats"), (name, axis)
            tol = 2e-3 if d == dtypes.float16 else 1e-5
            np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_sums_do_not_wrap_where_numpy_does_not() -> None:
    cases = [
        np.full(3, 2**30, np.int32),  # 3221225472: wraps in int32
        np.full(300, 100, np.int8),
        np.full(300, 250, np.uint8),
        np.full(70000, 1, np.uint16),
        np.ones(300, bool),
        np.full(3, 2**31, np.uint32),
    ]
    for a in cases:
        t = Tensor(a, device=DEVICE)
        pairs = [(t.sum(), np.sum(a))] + ([(t.cumsum(0), np.cumsum(a))] if a.size <= 300 else [])  # cumsum: n*n work
        for got, want in pairs:
            assert got.dtype == from_numpy(want.dtype), a.dtype
            np.testing.assert_array_equal(got.numpy(), want)
    a = np.array([2**20, 2**20, 3], np.int32)
    assert Tensor(a, device=DEVICE).prod().item() == np.prod(a) == 3 * 2**40


def test_float16_mean_var_std_compute_in_float32() -> None:
    """numpy's mean of float16 sums in float32; its var and std sum squares in float16 and overflow here
    (inf); uops computes all three in float32 and rounds once, so they stay finite."""
    a = np.full(100_000, 1.5, np.float16)  # the sum, 150000, is past float16's 65504
    a[::2] = 0.5
    t = Tensor(a, device=DEVICE)
    wide = a.astype(np.float64)
    for name in ("mean", "var", "std"):
        got = getattr(t, name)()
        assert got.dtype == dtypes.float16 and getattr(np, name)(a[:10]).dtype == np.float16
        np.testing.assert_allclose(float(got.item()), getattr(np, name)(wide), rtol=1e-3)
    assert float(t.mean().item()) == float(np.mean(a))


def test_index_results_are_int64() -> None:
    t = Tensor(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], np.float32), device=DEVICE)
    for got in (t.argmax(1), t.argmin(), t.argsort(1), t.topk(2)[1]):
        assert got.dtype == dtypes.int64
    np.testing.assert_array_equal(t.argsort(1).numpy(), np.argsort(t.numpy(), 1))


# ----- the Array API namespace -----
def test_array_api_follows_the_standard_and_numpy() -> None:
    """Within a kind the standard's table is numpy's; the namespace's default int64 makes its
    accumulation rule numpy's too."""
    for a in NUMPY_DTYPES:
        for b in NUMPY_DTYPES:
            assert _name(xp.result_type(a, b)) == np.result_type(to_numpy(a), to_numpy(b)).name, (a, b)
    assert xp.__array_namespace_info__().default_dtypes()["integral"] == xp.int64
    for d in INTS_AND_BOOL:
        x = xp.asarray(_data(d))
        for ours, theirs in ((xp.sum, np.sum), (xp.prod, np.prod)):
            assert _name(ours(x).dtype) == theirs(_data(d)).dtype.name, d
        assert _name(xp.cumulative_sum(xp.reshape(x, (-1,))).dtype) == np.cumulative_sum(_data(d).ravel()).dtype.name
    big = np.full(3, 2**30, np.int32)
    assert xp.sum(xp.asarray(big)).numpy() == np.sum(big)
