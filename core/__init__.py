"""uops: a slim tensor-compiler core. Backends are separate packages found through entry points."""

from uops.dtypes import DType, PtrDType, dtypes
from uops.ops import AxisType, GroupOp, Ops
from uops.rewrite import PatternMatcher, UPat, graph_rewrite
from uops.uop import UOp

__version__ = "0.1.0"

__all__ = ["AxisType", "DType", "GroupOp", "Ops", "PatternMatcher", "PtrDType", "UOp", "UPat", "dtypes", "graph_rewrite"]
