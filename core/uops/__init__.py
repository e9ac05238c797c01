"""uops: a slim tensor-compiler core. Backends are separate packages found through entry points.

``import uops`` loads only the dtypes and the version; every other public name is imported the
first time it is used (PEP 562), so a script that only asks for a device pays for the plugins
layer alone, not for the IR, the front end or the code generator.
"""

from uops._lazy import lazy_attributes
from uops.dtypes import DType, PtrDType, dtypes
from uops.errors import UopsError
from uops.version import __version__

TYPE_CHECKING = False  # typing is not imported at run time: see the module docstring
if TYPE_CHECKING:
    from uops.frontend.autograd import no_grad
    from uops.frontend.jit import Jit, JitError, jit
    from uops.frontend.load import load_program
    from uops.frontend.tensor import Tensor, from_dlpack
    from uops.frontend.tensor.variable import Variable
    from uops.ir.ops import AxisType, GroupOp, Ops
    from uops.ir.rewrite import PatternMatcher, UPat, graph_rewrite
    from uops.ir.uop import UOp
    from uops.plugins import Device

#: public name -> the module that defines it, imported on first use
_LAZY = {
    "AxisType": "uops.ir.ops",
    "GroupOp": "uops.ir.ops",
    "Ops": "uops.ir.ops",
    "PatternMatcher": "uops.ir.rewrite",
    "UPat": "uops.ir.rewrite",
    "graph_rewrite": "uops.ir.rewrite",
    "UOp": "uops.ir.uop",
    "Device": "uops.plugins",
    "Tensor": "uops.frontend.tensor",
    "no_grad": "uops.frontend.autograd",
    "load_program": "uops.frontend.load",  # the checked loader of saved ProgramSpecs
    "jit": "uops.frontend.jit",  # capture a function's kernels, replay them on new inputs
    "Jit": "uops.frontend.jit",
    "JitError": "uops.frontend.jit",
    "Variable": "uops.frontend.tensor.variable",
    "from_dlpack": "uops.frontend.tensor",  # a Tensor over any DLPack producer's memory
}


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "AxisType", "DType", "Device", "GroupOp", "Jit", "JitError", "Ops", "PatternMatcher", "PtrDType", "Tensor", "UOp",
    "UPat", "UopsError", "Variable", "__version__", "dtypes", "from_dlpack", "graph_rewrite", "jit", "load_program",
    "no_grad",
]  # fmt: skip
