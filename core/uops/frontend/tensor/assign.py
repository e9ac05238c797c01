"""In-place updates: ``t.assign(v)`` and ``t[index] = v``, written into the tensor's own buffer.

The write itself (ordering, snapshots for readers of the old value) is the frontend's ``inplace``
module; here the arguments are checked and the target view is found.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from uops.dtypes import dtypes
from uops.ir.ops import Ops

from ..inplace import InplaceError, buffer_of, own, renamed, writable, write
from ..realize import realize
from .args import Scalar

if TYPE_CHECKING:
    from . import Tensor

__all__ = ["InplaceError", "assign", "setitem"]


def _value(self: Tensor, value: Tensor | np.ndarray | Scalar, shape: tuple[int, ...], what: str) -> Tensor:
    """``value`` as a tensor of ``shape`` and this tensor's dtype on its device (numpy broadcasting)."""
    cls = type(self)
    v = value if isinstance(value, cls) else cls(value, device=self.device, dtype=self.dtype)
    if v.device != self.device:
        raise InplaceError(f"{what}: the value is on {v.device}, the tensor on {self.device}; move it with .to()")
    if v.shape != shape:
        try:
            v = v.broadcast_to(shape)
        except ValueError:
            raise ValueError(f"{what}: a value of shape {v.shape} does not fit a tensor of shape {shape}") from None
    return v.cast(self.dtype)


def _in_place(self: Tensor) -> bool:
    """Whether this tensor is a view of a buffer that can be written element by element."""
    u = self.uop
    return buffer_of(u) is not None and (u.op is not Ops.VIEW or writable(u.arg))


def assign(self: Tensor, value: Tensor | np.ndarray | Scalar) -> Tensor:
    """Give this tensor a new value of its own shape and dtype (numpy broadcasting from ``value``).

    Why a method and not rebinding a name: every holder of this Tensor (an optimizer, a model's
    state, a cache) sees the new value. A realized tensor is written in its own buffer, so views of
    it see the new value too; a lazy one (no buffer yet) takes the new value as its graph.
    """
    v = _value(self, value, self.shape, "assign")
    if not _in_place(self):
        self.uop = v.uop
        return self
    write(self.uop, v.uop, self.device)
    self.uop = renamed(self.uop)
    return self


def setitem(self: Tensor, index: Any, value: Tensor | np.ndarray | Scalar) -> None:
    """``self[index] = value`` in place (basic indexing: ints, slices, None, ...; or a bool mask over the leading
    dims with one value for every selected element); the right side is evaluated before the write, as in numpy.
    A lazy tensor is first given a buffer of its own."""
    from .indexing import is_basic

    mask = _mask_of(self, index)
    if mask is not None:
        _masked_set(self, mask, value)
        return
    if not is_basic(index):
        raise TypeError("assigning through integer-tensor indices is not supported; use scatter, masked_fill or where")
    region = self[index]  # checks the index (range, count) before anything runs
    v = _value(self, value, region.shape, "setitem")
    if not _in_place(self):
        c = self.contiguous().uop
        (fresh,) = realize([c], self.device)
        self.uop = own(c, fresh, self.device)
        region = self[index]
    write(region.uop, v.uop, self.device)
    self.uop = renamed(self.uop)


def _mask_of(self: Tensor, index: Any) -> Tensor | None:
    """A bool mask index (a tensor or a numpy array, alone or as a 1-tuple) as a tensor, else None."""
    it = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    cls = type(self)
    if isinstance(it, np.ndarray) and it.dtype == np.bool_:
        it = cls(it, device=self.device)
    if not isinstance(it, cls) or it.dtype != dtypes.bool:
        return None
    if it.shape != self.shape[: it.ndim]:
        raise IndexError(f"setitem: a bool mask of shape {it.shape} must match the leading dims of {self.shape}")
    return it


def _masked_set(self: Tensor, mask: Tensor, value: Tensor | np.ndarray | Scalar) -> None:
    """``self[mask] = value`` as ``where(mask, value, self)``: no data-dependent shape, since one value
    (a scalar or a single-element array) fills every selected element."""
    v = _value(self, value, np.shape(value) if not isinstance(value, type(self)) else value.shape, "setitem")
    if math.prod(v.shape) != 1:
        raise ValueError(
            f"setitem: a bool mask takes one value (a scalar or a single-element array), got shape {v.shape}; "
            "the number of selected elements depends on the data"
        )
    m = mask.reshape(mask.shape + (1,) * (self.ndim - mask.ndim))
    assign(self, m.where(v.reshape(()), self).cast(self.dtype))
