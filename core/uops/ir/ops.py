"""The operations of the IR and the groups passes reason about."""

from __future__ import annotations

from enum import Enum, IntEnum, auto
from typing import Final


class Ops(IntEnum):
    # parameters and storage
    DEFINE_GLOBAL = auto()  # arg: buffer index; dtype: global pointer
    DEFINE_VAR = auto()  # arg: (name, min, max); a scalar integer parameter of the kernel
    DEFINE_LOCAL = auto()  # arg: name; dtype: local pointer with size
    DEFINE_REG = auto()  # arg: name; dtype: register pointer with size
    # constants
    CONST = auto()
    VCONST = auto()  # arg: tuple of values; dtype: vector
    # memory
    INDEX = auto()  # src: (buffer, index[, gate]) -> pointer to one element
    LOAD = auto()  # src: (index[, alt]) alt is the value when the INDEX gate is false
    STORE = auto()  # src: (index, value)
    # structure
    RANGE = auto()  # src: (end,); arg: (axis id, AxisType); counts 0..end-1
    END = auto()  # src: (value_or_store, *ranges) closes ranges after value
    REDUCE = auto()  # src: (value, *ranges); arg: the reduce Op (ADD, MAX, MUL)
    BARRIER = auto()
    SINK = auto()
    AFTER = auto()  # src: (value, *deps): value, ordered after deps (accumulators, loop-carried state)
    SPECIAL = auto()  # src: (size,); arg: name like "gidx0" or "lidx1"
    # vectors
    VECTORIZE = auto()
    GEP = auto()  # arg: tuple of lane indices
    # unary ALU
    NEG = auto()
    EXP2 = auto()
    LOG2 = auto()
    SIN = auto()
    SQRT = auto()
    RECIPROCAL = auto()
    TRUNC = auto()
    CAST = auto()
    BITCAST = auto()
    # binary ALU
    ADD = auto()
    SUB = auto()
    MUL = auto()
    IDIV = auto()
    FDIV = auto()
    MOD = auto()
    MAX = auto()
    CMPLT = auto()
    CMPNE = auto()
    CMPEQ = auto()
    AND = auto()
    OR = auto()
    XOR = auto()
    SHL = auto()
    SHR = auto()
    POW = auto()
    # ternary ALU
    WHERE = auto()
    MULACC = auto()
    # compiler path
    PROGRAM = auto()
    LINEAR = auto()
    SOURCE = auto()  # arg: source text
    BINARY = auto()  # arg: compiled bytes
    # tensor level (front end)
    BUFFER = auto()  # arg: (device, size, id)
    VIEW = auto()  # src: (base,); arg: a View (movement ops folded)
    REDUCE_AXIS = auto()  # arg: (Op, axes)
    CONTIGUOUS = auto()
    COPY = auto()  # src: (value,); arg: target device
    BIND = auto()  # src: (DEFINE_VAR, CONST): a variable with its value; kernels see the DEFINE_VAR, launches the value
    # warp level (lowered kernels of renderers with ``shuffle_width``)
    SHUFFLE = auto()  # src: (value,); arg: xor mask; value of the work-item whose lane in the warp differs by the mask

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    __str__ = __repr__


class AxisType(Enum):
    GLOBAL = auto()  # parallel output axis: a launch index on GPU-style targets, a loop on CPU
    LOCAL = auto()  # workgroup axis
    LOOP = auto()  # sequential loop over an output axis
    REDUCE = auto()  # reduction axis
    UPCAST = auto()  # unrolled into vector lanes
    UNROLL = auto()  # unrolled reduction
    THREAD = auto()  # output axis split across CPU cores
    GROUP_REDUCE = auto()  # reduction axis split across the threads of a workgroup
    INNER = auto()  # output axis walked by a loop inside the reductions (accumulators in an array)
    PACK = auto()  # loop that copies part of an input into a kernel-local buffer (the PACK opt)


class GroupOp:
    Unary = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIPROCAL, Ops.TRUNC})
    Binary = frozenset(
        {
            Ops.ADD,
            Ops.SUB,
            Ops.MUL,
            Ops.IDIV,
            Ops.FDIV,
            Ops.MOD,
            Ops.MAX,
            Ops.CMPLT,
            Ops.CMPNE,
            Ops.CMPEQ,
            Ops.AND,
            Ops.OR,
            Ops.XOR,
            Ops.SHL,
            Ops.SHR,
            Ops.POW,
        }
    )
    Ternary = frozenset({Ops.WHERE, Ops.MULACC})
    ALU = Unary | Binary | Ternary
    Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
    Comparison = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})


# The members symbolic's rules test, as module constants (``from uops.ir.ops import ADD``) for hot paths: reading
# ``Ops.X`` at run time goes through EnumType's __getattr__ hook (Python 3.11), which costs more than the test.
ADD: Final = Ops.ADD
AND: Final = Ops.AND
BITCAST: Final = Ops.BITCAST
CAST: Final = Ops.CAST
CMPEQ: Final = Ops.CMPEQ
CMPLT: Final = Ops.CMPLT
CMPNE: Final = Ops.CMPNE
CONST: Final = Ops.CONST
IDIV: Final = Ops.IDIV
MAX: Final = Ops.MAX
MOD: Final = Ops.MOD
MUL: Final = Ops.MUL
NEG: Final = Ops.NEG
OR: Final = Ops.OR
SUB: Final = Ops.SUB
WHERE: Final = Ops.WHERE
XOR: Final = Ops.XOR
