"""In-place updates: ``t.assign(v)`` and ``t[index] = v``, written into the tensor's own buffer.

The write itself (ordering, snapshots for readers of the old value) is the frontend's ``inplace``
module; here the arguments are checked and the target view is found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from uops.dtypes import dtypes
from uops.ir.ops import Ops

from ..inplace import InplaceError, buffer_of, own, renamed, writable, write
from ..realize import realize
from .args import Scalar, broadcast_shape

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


def _untracked(self: Tensor, v: Tensor, what: str) -> None:
    """Refuse an in-place write autograd would have to see through: the written buffer forgets the graph its
    old value came from, so a gradient taken later would be silently wrong."""
    from ..autograd import GRAD_ENABLED, AutogradError

    if GRAD_ENABLED[0] and (self.requires_grad or v.requires_grad):
        which = "the tensor written" if self.requires_grad else "the value written"
        raise AutogradError(
            f"{what}: an in-place write where {which} requires grad is not differentiable in uops; write under "
            "Tensor.no_grad() (as optimizers do), or build the new value out of place (where, masked_fill, "
            "scatter, cat) and use it instead"
        )


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
    if not _in_place(self):  # a new graph: what it requires follows the value, except on a leaf (a parameter)
        from . import _is_leaf

        if _is_leaf(self):
            _untracked(self, v, "assign")
        else:
            self._requires_grad = v.requires_grad
        self.uop = v.uop
        return self
    _untracked(self, v, "assign")
    write(self.uop, v.uop, self.device)
    self.uop = renamed(self.uop)
    return self


def setitem(self: Tensor, index: Any, value: Tensor | np.ndarray | Scalar) -> None:
    """``self[index] = value`` in place, with numpy's indexing: basic (ints, slices, None, ...), integer tensors,
    lists or arrays, alone or mixed with slices, and bool masks. The right side is evaluated before the write,
    as in numpy; a lazy tensor is first given a buffer of its own.

    Integer indices: ``value`` broadcasts to the shape of ``self[index]`` and is scattered into the indexed
    view (repeated positions: the last value lands, as in numpy; a device index out of range writes nothing,
    a host one raises IndexError). A bool mask selects a data-dependent number of elements, so it takes a
    value that does not depend on that number (one broadcasting over the masked dims); a host (numpy) mask
    also takes one value per selected element."""
    from .indexing import IndexPlan, is_basic, resolve

    mask = _mask_of(self, index)
    if mask is not None and _masked_set(self, mask, value, host=not isinstance(_single(index), type(self))):
        return
    if is_basic(index):
        region = self[index]  # checks the index (range, count) before anything runs
        v = _value(self, value, region.shape, "setitem")
        _write_region(self, index, v, None)
        return
    basic, adv = resolve(self, index)  # checks host indices before anything runs
    plan = IndexPlan(self[basic], adv)
    v = _value(self, value, plan.result_shape(), "setitem")
    _write_region(self, basic, v, plan)


def _write_region(self: Tensor, basic: Any, v: Tensor, plan: Any) -> None:
    """Write ``v`` into the view ``self[basic]`` (through ``plan``'s scatter when there is one), in place."""
    _untracked(self, v, "setitem")
    if not _in_place(self):
        c = self.contiguous().uop
        (fresh,) = realize([c], self.device)
        self.uop = own(c, fresh, self.device)
    region = self[basic]
    write(region.uop, (v if plan is None else plan.put(region, v)).uop, self.device)
    self.uop = renamed(self.uop)


def _single(index: Any) -> Any:
    return index[0] if isinstance(index, tuple) and len(index) == 1 else index


def _mask_of(self: Tensor, index: Any) -> Tensor | None:
    """A bool mask index (a tensor, a numpy array or a list of bools, alone or as a 1-tuple) as a tensor, else None."""
    it = _single(index)
    cls = type(self)
    if isinstance(it, list) and it and all(isinstance(b, (bool, np.bool_)) for b in np.ravel(it)):
        it = np.asarray(it)
    if isinstance(it, np.ndarray) and it.dtype == np.bool_:
        it = cls(it, device=self.device)
    if not isinstance(it, cls) or it.dtype != dtypes.bool:
        return None
    if it.shape != self.shape[: it.ndim]:
        raise IndexError(f"setitem: a bool mask of shape {it.shape} must match the leading dims of {self.shape}")
    return it


def _masked_set(self: Tensor, mask: Tensor, value: Tensor | np.ndarray | Scalar, host: bool) -> bool:
    """``self[mask] = value`` as ``where(mask, value, self)`` when ``value`` does not depend on how many elements
    the mask selects (it broadcasts to ``(1, *the dims after the mask)``); False for a host mask whose value
    has one row per selected element (the integer-index path takes it), an error for a device mask."""
    rest = self.shape[mask.ndim :]
    v = _value(self, value, np.shape(value) if not isinstance(value, type(self)) else value.shape, "setitem")
    try:
        fits = broadcast_shape(v.shape, (1, *rest)) == (1, *rest)
    except ValueError:
        fits = False
    if not fits:
        if host:
            return False
        raise ValueError(
            f"setitem: a bool tensor mask takes one value for every selected element (a value broadcasting to "
            f"{rest}), got shape {v.shape}; the number of selected elements depends on the data"
        )
    one = v.broadcast_to((1, *rest)).reshape(rest)
    m = mask.reshape(mask.shape + (1,) * len(rest))
    assign(self, m.where(one, self).cast(self.dtype))
    return True
