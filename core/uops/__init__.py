"""uops: a slim tensor-compiler core. Backends are separate packages found through entry points."""

from typing import TYPE_CHECKING

from uops.dtypes import DType, PtrDType, dtypes
from uops.ir.ops import AxisType, GroupOp, Ops
from uops.ir.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.ir.uop import UOp
from uops.version import __version__

if TYPE_CHECKING:
    from uops.frontend.load import load_program
    from uops.frontend.tensor import Tensor
    from uops.plugins import Device


def __getattr__(name: str) -> object:
    # `Device` is resolved on first use so `import uops` reads no plugin metadata and imports no plugin.
    if name == "Device":
        from uops.plugins import Device

        return Device
    if name == "Tensor":  # the front end, imported on first use to keep `import uops` light
        from uops.frontend.tensor import Tensor

        return Tensor
    if name == "load_program":  # the checked loader of saved ProgramSpecs
        from uops.frontend.load import load_program

        return load_program
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
    "__version__",
    "UPat",
    "dtypes",
    "graph_rewrite",
    "load_program",
]
