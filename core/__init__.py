"""uops: a slim tensor-compiler core. Backends are separate packages found through entry points."""

from typing import TYPE_CHECKING

from uops.dtypes import DType, PtrDType, dtypes
from uops.ops import AxisType, GroupOp, Ops
from uops.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.uop import UOp

if TYPE_CHECKING:
    from uops.frontend.tensor import Tensor
    from uops.plugins import Device

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # `Device` is resolved on first use so `import uops` reads no plugin metadata and imports no plugin.
    if name == "Device":
        from uops.plugins import Device

        return Device
    if name == "Tensor":  # the front end, imported on first use to keep `import uops` light
        from uops.frontend.tensor import Tensor

        return Tensor
    raise AttributeError(f"module 'uops' has no attribute {name!r}")


__all__ = [
    "AxisType",
    "DType",
    "Device",
    "GroupOp",
    "Ops",
    "PatternMatcher",
    "PtrDType",
    "Tensor",
    "UOp",
    "UPat",
    "dtypes",
    "graph_rewrite",
]
