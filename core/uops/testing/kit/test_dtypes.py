"""Every scalar dtype on ``device``: the ones its renderer declares compute like numpy at their edge
values (wraparound included); the ones in ``unsupported_dtypes`` raise DTypeNotSupportedError."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.dtypes import SCALARS, DType, to_numpy
from uops.renderer import DTypeNotSupportedError
from uops.testing.kit.helpers import supports_dtype

NAMES = [d.name for d in SCALARS]
BY_NAME = {d.name: d for d in SCALARS}


def edge_values(dt: DType) -> tuple[np.ndarray, np.ndarray]:
    """Two operands of ``dt`` (float32 for bfloat16, which numpy lacks): the extremes, zero, one, odd sizes (7)."""
    if dt == dtypes.bool:
        return np.array([True, False, True, False, True, True, False]), np.array(
            [True, True, False, False, True, False, True]
        )
    if dtypes.is_int(dt):
        lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
        npdt = to_numpy(dt)
        a = np.array([lo, lo + 1, 0, 1, 2, hi - 1, hi], dtype=npdt)
        b = np.array([1, hi, 1, lo, 3, 2, 1], dtype=npdt)
        return a, b
    fdt = np.dtype(np.float32) if dt == dtypes.bfloat16 else to_numpy(dt)
    a = np.array([-3.5, -1.0, -0.0, 0.0, 0.5, 2.0, 96.0], dtype=fdt)
    b = np.array([2.0, 0.25, 1.0, -4.0, 0.5, -2.5, 0.125], dtype=fdt)
    return a, b


@pytest.mark.parametrize("name", NAMES)
def test_every_dtype(device: str, name: str) -> None:
    dt = BY_NAME[name]
    if not supports_dtype(device, dt):
        t = Tensor(np.ones(5, np.float32), device=device).cast(dt) + 1
        with pytest.raises(DTypeNotSupportedError, match=f"device {device} does not support dtype {dt.name}"):
            t.realize()
        return
    a, b = edge_values(dt)
    ta, tb = Tensor(a, device=device, dtype=dt), Tensor(b, device=device, dtype=dt)
    assert ta.dtype == dt
    np.testing.assert_array_equal(ta.numpy(), a, err_msg=f"{name} does not round-trip through {device}")
    # one kernel per dtype (compiling is the cost): every pair a[i], b[j], combined, then reduced over j
    A, B = a[:, None], b[None, :]
    ea, eb = ta.reshape(7, 1), tb.reshape(1, 7)
    if dt == dtypes.bool:
        np.testing.assert_array_equal(((ea & eb) | ~ea).max(axis=1).numpy(), ((A & B) | ~A).max(axis=1))
        return
    with np.errstate(over="ignore"):
        want = np.where(A < B, A + B, A * B).max(axis=1)
    got = (ea < eb).where(ea + eb, ea * eb).max(axis=1).numpy()
    assert got.dtype == want.dtype or dt == dtypes.bfloat16, (got.dtype, want.dtype)
    if dtypes.is_float(dt):
        tol = 1e-2 if dt in (dtypes.float16, dtypes.bfloat16) else 1e-6
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: (a<b ? a+b : a*b).max(1) differs from numpy")
