"""Argument checking for the Tensor API: dtypes, devices, shapes, axes and Python scalars.

Every public entry point normalises its arguments here, so a wrong argument gets one clear error
(naming the argument and what is allowed) wherever it is passed.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from uops.dtypes import DType, dtype_from_name, dtypes, from_numpy, least_upper_dtype, promote_for, to_numpy, truncate
from uops.errors import UopsError
from uops.plugins import Device, canonical_device

Scalar = bool | int | float


class AxisError(UopsError, ValueError, IndexError):
    """An axis argument out of range (a ValueError and an IndexError, like numpy's AxisError)."""


def to_dtype(dtype: DType | str | type | np.dtype | None) -> DType | None:
    """A uops DType from a DType, a name, a Python type (bool/int/float) or a numpy dtype."""
    if dtype is None or isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return dtype_from_name(dtype)
    if dtype is bool:
        return dtypes.bool
    if dtype is int:
        return dtypes.default_int
    if dtype is float:
        return dtypes.default_float
    return from_numpy(dtype)


_known_devices: set[str] = set()


def device_arg(device: str | None) -> str:
    """The canonical device name (the default device for None); an unknown device fails here, not at realize()."""
    if device is None:
        return Device.DEFAULT
    if not isinstance(device, str):
        raise TypeError(f"device must be a string like 'CPU' or 'PYTHON', got {type(device).__name__}")
    name = canonical_device(device)
    if name not in _known_devices:
        Device[name]  # raises naming the installed devices
        _known_devices.add(name)
    return name


def int_arg(value: Any, what: str) -> int:
    """``value`` as an int; bools, floats and other types are refused (numpy refuses them too)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def shape_arg(shape: tuple[Any, ...], what: str = "shape") -> tuple[int, ...]:
    """A shape given as ``f(2, 3)`` or ``f((2, 3))``; sizes must be non-negative integers."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    out = tuple(int_arg(s, f"{what} size") for s in shape)
    if any(s < 0 for s in out):
        raise ValueError(f"negative dimension in {what} {out}")
    return out


def axis_arg(axis: Any, shape: tuple[int, ...], what: str = "axis", ndim: int | None = None) -> int:
    """One axis in ``[-ndim, ndim)`` as a non-negative int (``ndim`` defaults to ``len(shape)``)."""
    n = len(shape) if ndim is None else ndim
    a = int_arg(axis, what)
    if n == 0:
        raise AxisError(f"{what} {a} is out of range for a 0-d tensor, which has no axes (use {what}=None)")
    if not -n <= a < n:
        raise AxisError(
            f"{what} {a} is out of range for a tensor of shape {shape} ({n} dimensions: allowed are -{n}..{n - 1})"
        )
    return a % n


def axes_arg(axis: Any, shape: tuple[int, ...], what: str = "axis") -> tuple[int, ...]:
    """Reduction axes: None (all), one int, or a sequence of distinct ints; sorted and non-negative."""
    if axis is None:
        return tuple(range(len(shape)))
    ax = tuple(axis_arg(a, shape, what) for a in (axis if isinstance(axis, (list, tuple)) else (axis,)))
    out = tuple(sorted(set(ax)))
    if len(out) != len(ax):
        raise ValueError(f"repeated {what} in {axis} for shape {shape}")
    return out


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of shapes; a clear error names all shapes when they do not broadcast."""
    n = max(len(s) for s in shapes)
    padded = [(1,) * (n - len(s)) + s for s in shapes]
    out = []
    for d in range(n):
        sizes = {p[d] for p in padded if p[d] != 1}
        if len(sizes) > 1:
            raise ValueError(
                f"shapes {' and '.join(str(s) for s in shapes)} do not broadcast: "
                f"sizes {sorted(sizes)} at dimension {d - n}"
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def result_dtype(device: str, *ds: DType) -> DType:
    """The dtype tensors of ``ds`` on ``device`` promote to: numpy 2's table, with float32 where numpy's
    float64 would come from an integer meeting a float on a device without float64 (``promote_for``)."""
    dt = least_upper_dtype(*ds)
    if dt != dtypes.float64 or any(d.scalar() == dtypes.float64 for d in ds):
        return dt  # the common case asks nothing of the device (its renderer may not be loaded yet)
    if (unsupported := _UNSUPPORTED.get(device)) is None:
        unsupported = _UNSUPPORTED[device] = frozenset(getattr(Device[device].renderer, "unsupported_dtypes", ()))
    return promote_for(unsupported, *ds)


_UNSUPPORTED: dict[str, frozenset[DType]] = {}


def dtype_name(dt: DType) -> str:
    """The name a user knows a dtype by (numpy's: int8, not C's char)."""
    return "bfloat16" if dt == dtypes.bfloat16 else to_numpy(dt).name


def fits(value: int, dt: DType) -> bool:
    """Whether a Python int is representable in an integer dtype."""
    return dtypes.min(dt) <= value <= dtypes.max(dt)


def scalar_dtype(value: Scalar) -> DType:
    """The dtype a Python scalar gets on its own: the defaults, widened (like numpy) when the value does not fit."""
    if isinstance(value, (bool, np.bool_)):
        return dtypes.bool
    if isinstance(value, (int, np.integer)):
        for dt in (dtypes.default_int, dtypes.int64, dtypes.uint64):
            if fits(int(value), dt):
                return dt
        raise OverflowError(f"Python integer {value} does not fit any integer dtype (int64 or uint64)")
    if math.isfinite(value) and not math.isfinite(truncate(value, dtypes.default_float)):
        return dtypes.float64
    return dtypes.default_float


def check_scalar(value: Scalar, dt: DType) -> Scalar:
    """``value`` as a constant of ``dt``, with numpy 2's rules for Python scalars.

    An int that does not fit an integer dtype raises OverflowError (numpy's message); a finite
    float that overflows a float dtype becomes inf with numpy's RuntimeWarning.
    """
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and dtypes.is_int(dt):
        if not fits(int(value), dt):
            raise OverflowError(f"Python integer {value} out of bounds for {dtype_name(dt)}")
    elif dtypes.is_float(dt) and not isinstance(value, (bool, np.bool_)):
        f = _big_float(value)
        if (math.isfinite(value) if isinstance(value, float) else True) and not math.isfinite(truncate(f, dt)):
            warnings.warn("overflow encountered in cast", RuntimeWarning, stacklevel=3)
            return f if math.isinf(f) else math.copysign(math.inf, f)
    return value


def _big_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.copysign(math.inf, value)
