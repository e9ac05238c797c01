"""``Variable``: a named integer that kernels take as an argument instead of a constant.

Why: a decode step at position 7 and one at position 8 differ only in that number. Bound to a value,
a variable is a 0-d int32 tensor whose kernels read the variable, not the value; every value shares
one compiled kernel and one cached schedule, and the JIT replays a captured step with a new value.
"""

from __future__ import annotations

from uops.dtypes import dtypes
from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.uop import UOp

from . import Tensor


class VariableRangeError(UopsError, ValueError):
    """A variable was bound to a value outside its declared range."""


class Variable:
    """An integer named ``name`` in ``[min_val, max_val]`` (the range lets index math be simplified and checked)."""

    __slots__ = ("uop",)

    def __init__(self, name: str, min_val: int, max_val: int):
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a variable's name must be an identifier, got {name!r}")
        self.uop = UOp.variable(name, int(min_val), int(max_val), dtypes.int32)
        if min_val < dtypes.min(dtypes.int32) or max_val > dtypes.max(dtypes.int32):
            raise VariableRangeError(f"variable {name!r}: the range [{min_val}, {max_val}] does not fit int32")

    @property
    def name(self) -> str:
        return str(self.uop.arg[0])

    @property
    def min(self) -> int:
        return int(self.uop.arg[1])

    @property
    def max(self) -> int:
        return int(self.uop.arg[2])

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, {self.min}, {self.max})"

    def bind(self, value: int, device: str | None = None) -> Tensor:
        """This variable with ``value``: a 0-d int32 Tensor on ``device`` (the default device if None)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"variable {self.name!r} takes a Python int, got {type(value).__name__}")
        if not self.min <= value <= self.max:
            raise VariableRangeError(
                f"variable {self.name!r}={value} is outside its declared range [{self.min}, {self.max}]"
            )
        return Tensor(UOp(Ops.BIND, dtypes.int32, (self.uop, UOp.const(dtypes.int32, value))), device=device)


def bound_variable(t: Tensor) -> tuple[UOp, int] | None:
    """(the DEFINE_VAR, its value) when ``t`` is a bound variable as ``bind`` makes it, else None."""
    u = t.uop
    if u.op is Ops.BIND:
        return u.src[0], int(u.src[1].arg)
    return None
