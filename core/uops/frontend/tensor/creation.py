"""Creation: constants, ranges, identity, random tensors and the ``*_like`` family.

Attached to ``Tensor`` as classmethods (the ``*_like`` ones as methods); a constant takes no
memory until it is realized.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from uops.dtypes import DType, dtypes, to_numpy
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from .. import dlpack, rng
from ..schedule import const_view, new_buffer
from ..view import ShapeTracker
from .args import Scalar, check_scalar, device_arg, scalar_dtype, shape_arg, to_dtype

if TYPE_CHECKING:
    from . import Tensor


def full(
    cls: type[Tensor],
    shape: tuple[int, ...] | int,
    fill_value: Scalar,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of one value (no memory until realized; a leaf requiring grad gets its buffer now)."""
    shp = shape_arg(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,))
    dt = to_dtype(dtype) or scalar_dtype(fill_value)
    return cls(const_view(check_scalar(fill_value, dt), dt, shp), device=device, requires_grad=requires_grad)


def zeros(
    cls: type[Tensor],
    *shape: Any,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _filled(cls, shape, 0, dtype, device, requires_grad)


def ones(
    cls: type[Tensor],
    *shape: Any,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _filled(cls, shape, 1, dtype, device, requires_grad)


def _filled(
    cls: type[Tensor], shape: tuple[Any, ...], value: int, dtype: DType | str | None, device: str | None, grad: bool
) -> Tensor:
    """``zeros`` / ``ones``: the default float unless a dtype is given."""
    dt = to_dtype(dtype) or dtypes.default_float
    return cls.full(shape_arg(shape), value, dtype=dt, device=device, requires_grad=grad)


def empty(cls: type[Tensor], *shape: Any, dtype: DType | str | None = None, device: str | None = None) -> Tensor:
    """Uninitialised memory (zeroed on the host allocators)."""
    shp = shape_arg(shape)
    dev = device_arg(device)
    dt = to_dtype(dtype) or dtypes.default_float
    buf = new_buffer(dev, math.prod(shp), dt)
    return cls(UOp(Ops.VIEW, dt, (buf,), ShapeTracker.from_shape(shp)), device=dev)


def arange(
    cls: type[Tensor],
    start: Scalar,
    stop: Scalar | None = None,
    step: Scalar = 1,
    dtype: DType | str | None = None,
    device: str | None = None,
) -> Tensor:
    """``[start, stop)`` in steps of ``step``, like numpy (an int range that needs it is int64)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    dt = to_dtype(dtype)
    if dt is None:
        if any(isinstance(v, float) for v in (start, stop, step)):
            dt = dtypes.default_float
        else:
            ends = (start, stop - step)
            dt = max((scalar_dtype(int(v)) for v in ends), key=lambda d: d.itemsize)
    n = max(0, math.ceil((stop - start) / step))
    arr = (start + np.arange(n, dtype=np.float64) * step) if dtypes.is_float(dt) else np.arange(start, stop, step)
    return cls(arr.astype(to_numpy(dt)) if dt != dtypes.bfloat16 else arr, device=device, dtype=dt)


def eye(
    cls: type[Tensor], n: int, m: int | None = None, dtype: DType | str | None = None, device: str | None = None
) -> Tensor:
    dt = to_dtype(dtype) or dtypes.default_float
    return cls(np.eye(n, m, dtype=np.float32), device=device).cast(dt)


def manual_seed(cls: type[Tensor], seed: int = 0) -> None:
    """Seed rand/randn: the same seed gives the same numbers on every device."""
    rng.manual_seed(seed)


def rand(
    cls: type[Tensor],
    *shape: Any,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform in [0, 1)."""
    return _drawn(cls, rng.generator().random(shape_arg(shape), dtype=np.float32), dtype, device, requires_grad)


def randn(
    cls: type[Tensor],
    *shape: Any,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal."""
    arr = rng.generator().standard_normal(shape_arg(shape), dtype=np.float32)
    return _drawn(cls, arr, dtype, device, requires_grad)


def _drawn(
    cls: type[Tensor], arr: np.ndarray, dtype: DType | str | None, device: str | None, requires_grad: bool
) -> Tensor:
    """A tensor of host-drawn float32 samples in ``dtype`` (the default float when None)."""
    dt = to_dtype(dtype) or dtypes.default_float
    return cls(arr, device=device).cast(dt).requires_grad_(requires_grad)


def uniform(
    cls: type[Tensor],
    *shape: Any,
    low: float = 0.0,
    high: float = 1.0,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    out = cls.rand(*shape, dtype=dtype, device=device) * (high - low) + low
    return out.requires_grad_(requires_grad)


def from_dlpack(cls: type[Tensor], x: Any, device: str | None = None, copy: bool | None = None) -> Tensor:
    """A Tensor over the memory of any DLPack producer (numpy, torch, jax, cupy, another Tensor).

    CPU memory is aliased, not copied, when it lands on a host-memory device (CPU, PYTHON) and
    ``copy`` is not True; a read-only producer is copied (``copy=False`` then raises). Memory on
    another device, or for another target device, is copied when ``copy`` allows it.
    """
    dev = device_arg(device)
    return cls(dlpack.import_dlpack(x, dev, copy), device=dev)


def full_like(self: Tensor, fill_value: Scalar, dtype: DType | str | None = None) -> Tensor:
    return type(self).full(self.shape, fill_value, dtype=to_dtype(dtype) or self.dtype, device=self.device)


def zeros_like(self: Tensor, dtype: DType | str | None = None) -> Tensor:
    return self.full_like(0, dtype)


def ones_like(self: Tensor, dtype: DType | str | None = None) -> Tensor:
    return self.full_like(1, dtype)


def empty_like(self: Tensor, dtype: DType | str | None = None) -> Tensor:
    return type(self).empty(*self.shape, dtype=to_dtype(dtype) or self.dtype, device=self.device)


def rand_like(self: Tensor, dtype: DType | str | None = None) -> Tensor:
    return type(self).rand(*self.shape, dtype=to_dtype(dtype) or self.dtype, device=self.device)


def randn_like(self: Tensor, dtype: DType | str | None = None) -> Tensor:
    return type(self).randn(*self.shape, dtype=to_dtype(dtype) or self.dtype, device=self.device)
