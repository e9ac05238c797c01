"""Scalar, vector and pointer types; promotion; the mapping to numpy.

bfloat16 has no numpy equivalent: host buffers of bfloat16 hold the raw 16 bits as uint16
(``to_numpy`` returns ``np.uint16``); values are converted with ``bf16_to_f32``/``f32_to_bf16``.
"""

from __future__ import annotations

import _thread
import builtins
from enum import IntEnum

TYPE_CHECKING = False  # typing is not imported at run time: `import uops` stays a few milliseconds
if TYPE_CHECKING:  # numpy is imported on first use, for the same reason
    from typing import Any, Final

    import numpy as np


_INF = float("inf")


class AddrSpace(IntEnum):
    GLOBAL = 0
    LOCAL = 1
    REG = 2


class DType:
    """A scalar or vector type. ``count`` > 1 makes a vector of ``count`` scalars.

    Immutable, compared and hashed by value, like a frozen dataclass; written by hand because the
    ``dataclasses`` module (and the ``inspect`` it imports) costs more than the rest of ``import uops``.
    """

    __slots__ = ("priority", "itemsize", "name", "fmt", "kind", "count", "_key", "_hash", "_tok", "_ibounds")
    priority: int  # orders promotion inside a kind
    itemsize: int  # bytes of one scalar
    name: str
    fmt: str | None  # struct/numpy character, None for bfloat16
    kind: str  # 'b' bool, 'i' signed, 'u' unsigned, 'f' float
    count: int
    _key: tuple[Any, ...]
    _hash: int
    # what the IR's hot paths read instead of hashing the dtype or looking it up by id(): a small int that
    # equal dtypes share (the UOp cache key's stand-in for the dtype), and (min, max) of a scalar integer
    # dtype, None for every other (vectors, pointers, bool, floats)
    _tok: int
    _ibounds: tuple[int, int] | None

    def __init__(self, priority: int, itemsize: int, name: str, fmt: str | None, kind: str, count: int = 1) -> None:
        _init_fields(self, (priority, itemsize, name, fmt, kind, count))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")

    def __eq__(self, other: object) -> builtins.bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        # dtypes are hashed on every UOp-cache lookup and dtype-filtered rule: hashed once, when made
        return self._hash

    def __reduce__(self) -> tuple[type[DType], tuple[Any, ...]]:
        return type(self), self._key

    def vec(self, n: int) -> DType:
        if self.count != 1:
            raise ValueError(f"cannot make a vector of the vector type {self}")
        if n == 1:
            return self
        if n < 1:
            raise ValueError(f"vector width must be >= 1, got {n}")
        return DType(self.priority, self.itemsize, self.name, self.fmt, self.kind, n)

    def ptr(self, size: int = -1, addrspace: AddrSpace = AddrSpace.GLOBAL) -> PtrDType:
        return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.kind, 1, self, addrspace, size)

    def scalar(self) -> DType:
        return self if self.count == 1 else DType(self.priority, self.itemsize, self.name, self.fmt, self.kind)

    @property
    def nbytes(self) -> int:
        return self.itemsize * self.count

    def __repr__(self) -> str:
        return f"dtypes.{self.name}" + (f".vec({self.count})" if self.count > 1 else "")


class PtrDType(DType):
    """A pointer to ``base`` in ``addrspace``; ``size`` elements, -1 when unknown (global buffers)."""

    __slots__ = ("base", "addrspace", "size")
    base: DType
    addrspace: AddrSpace
    size: int

    def __init__(
        self, priority: int, itemsize: int, name: str, fmt: str | None, kind: str, count: int = 1,
        base: DType = None, addrspace: AddrSpace = AddrSpace.GLOBAL, size: int = -1,  # type: ignore[assignment]
    ) -> None:  # fmt: skip
        _init_fields(self, (priority, itemsize, name, fmt, kind, count, base, addrspace, size))

    def vec(self, n: int) -> DType:
        raise ValueError("pointer types have no vector form; vectorise the base type")

    def scalar(self) -> DType:
        return self

    def __repr__(self) -> str:
        return f"{self.base!r}.ptr({self.size}, {self.addrspace.name})"


_FIELDS = ("priority", "itemsize", "name", "fmt", "kind", "count", "base", "addrspace", "size")
_set = object.__setattr__


# equal dtypes -> their shared token. Tokens are handed out under the lock, so two threads making new
# dtypes at once cannot take the same one; a dtype already known is found without it.
_TOKENS: dict[tuple[Any, ...], int] = {}
_tokens_lock = _thread.allocate_lock()


def _init_fields(dt: DType, values: tuple[Any, ...]) -> None:
    for field, value in zip(_FIELDS, values):
        _set(dt, field, value)
    _set(dt, "_key", values)
    ident = (type(dt), *values)
    _set(dt, "_hash", hash(ident))
    if (tok := _TOKENS.get(ident)) is None:
        with _tokens_lock:
            tok = _TOKENS.setdefault(ident, len(_TOKENS))
    _set(dt, "_tok", tok)
    scalar_int = type(dt) is DType and dt.count == 1 and (dt.kind == "i" or dt.kind == "u")
    _set(dt, "_ibounds", _int_range(dt.kind, dt.itemsize) if scalar_int else None)


def _value_range(dt: DType) -> tuple[int | float, int | float]:
    """The least and greatest value ``dt`` holds; a float's are the infinities."""
    if dt.kind == "b":
        return False, True
    if dt.kind == "u" or dt.kind == "i":
        return _int_range(dt.kind, dt.itemsize)
    return -_INF, _INF


def _int_range(kind: str, itemsize: int) -> tuple[int, int]:
    """(min, max) of the signed ('i') or unsigned ('u') integers of ``itemsize`` bytes."""
    bits = 8 * itemsize
    return (0, (1 << bits) - 1) if kind == "u" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


class dtypes:
    bool: Final = DType(0, 1, "bool", "?", "b")
    int8: Final = DType(1, 1, "char", "b", "i")
    uint8: Final = DType(2, 1, "uchar", "B", "u")
    int16: Final = DType(3, 2, "short", "h", "i")
    uint16: Final = DType(4, 2, "ushort", "H", "u")
    int32: Final = DType(5, 4, "int", "i", "i")
    uint32: Final = DType(6, 4, "uint", "I", "u")
    int64: Final = DType(7, 8, "long", "q", "i")
    uint64: Final = DType(8, 8, "ulong", "Q", "u")
    float16: Final = DType(9, 2, "half", "e", "f")
    bfloat16: Final = DType(10, 2, "bfloat16", None, "f")
    float32: Final = DType(11, 4, "float", "f", "f")
    float64: Final = DType(12, 8, "double", "d", "f")
    void: Final = DType(-1, 0, "void", None, "v")

    default_float: DType = float32
    default_int: DType = int32
    # the dtype index arithmetic is built in: wide enough for any size; lowering narrows it to int32
    # wherever the value ranges prove it fits (codegen.lowerer.narrow_index)
    index: Final = int64

    @staticmethod
    def is_float(dt: DType) -> builtins.bool:
        return dt.kind == "f"

    @staticmethod
    def is_int(dt: DType) -> builtins.bool:
        return dt.kind in "iu"

    @staticmethod
    def is_unsigned(dt: DType) -> builtins.bool:
        return dt.kind == "u"

    @staticmethod
    def is_bool(dt: DType) -> builtins.bool:
        return dt.kind == "b"

    @staticmethod
    def min(dt: DType) -> builtins.int | builtins.float:
        return _value_range(dt)[0]

    @staticmethod
    def max(dt: DType) -> builtins.int | builtins.float:
        return _value_range(dt)[1]


SCALARS: tuple[DType, ...] = (
    dtypes.bool,
    dtypes.int8,
    dtypes.uint8,
    dtypes.int16,
    dtypes.uint16,
    dtypes.int32,
    dtypes.uint32,
    dtypes.int64,
    dtypes.uint64,
    dtypes.float16,
    dtypes.bfloat16,
    dtypes.float32,
    dtypes.float64,
)
_BY_NAME = {d.name: d for d in SCALARS} | {
    "float32": dtypes.float32,
    "float64": dtypes.float64,
    "float16": dtypes.float16,
    "int8": dtypes.int8,
    "int16": dtypes.int16,
    "int32": dtypes.int32,
    "int64": dtypes.int64,
    "uint8": dtypes.uint8,
    "uint16": dtypes.uint16,
    "uint32": dtypes.uint32,
    "uint64": dtypes.uint64,
}


def dtype_from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {sorted(_BY_NAME)}") from None


def to_numpy(dt: DType) -> np.dtype:
    """The numpy dtype that holds ``dt`` on the host (bfloat16 is stored as its raw uint16 bits)."""
    import numpy as np

    if dt == dtypes.bfloat16:
        return np.dtype(np.uint16)
    if dt.fmt is None:
        raise ValueError(f"{dt} has no numpy equivalent")
    return np.dtype(dt.fmt)


def from_numpy(npdt: np.dtype | type) -> DType:
    import numpy as np

    npdt = np.dtype(npdt)
    for d in SCALARS:
        if d.fmt is not None and np.dtype(d.fmt) == npdt:
            return d
    raise TypeError(f"numpy dtype {npdt} has no uops equivalent; cast it to one of {[d.name for d in SCALARS]}")


def _cast_int(x: int, dt: DType) -> int:
    bits = 8 * dt.itemsize
    x &= (1 << bits) - 1
    if dt.kind == "i" and x >= 1 << (bits - 1):
        x -= 1 << bits
    return x


def truncate(x: object, dt: DType) -> bool | int | float:
    """A Python value as the given scalar dtype would hold it (wraparound for ints, rounding for floats)."""
    if dt.kind == "b":
        return bool(x)
    if dt.kind in "iu":
        if isinstance(x, float):
            if x != x or abs(x) == _INF:  # nan or infinite
                return 0  # undefined in C; pick a deterministic value
            x = int(x)  # C truncation toward zero
        return _cast_int(int(x), dt)  # type: ignore[call-overload]
    xf = float(x)  # type: ignore[arg-type]
    if dt == dtypes.float64:
        return xf
    import struct  # here, not at the top: choosing a device never needs it

    if dt == dtypes.bfloat16:
        if xf != xf:  # nan
            return xf
        bits = struct.unpack("<I", struct.pack("<f", _to_f32(xf)))[0]
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return float(struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0])
    if dt == dtypes.float16:
        try:
            return float(struct.unpack("<e", struct.pack("<e", xf))[0])
        except OverflowError:
            return _INF if xf > 0 else -_INF
    return _to_f32(xf)


def _to_f32(x: float) -> float:
    import struct

    try:
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    except OverflowError:  # beyond float32's range: rounds to infinity, as a C cast does
        return _INF if x > 0 else -_INF


def f32_to_bf16(x: np.ndarray | np.floating) -> np.ndarray:
    """Round-to-nearest-even float32 -> raw bfloat16 bits (uint16)."""
    import numpy as np

    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, 0x7FC0, rounded).astype(np.uint16)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    import numpy as np

    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _int_promotion(a: DType, b: DType) -> DType:
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    s, u = (a, b) if a.kind == "i" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    # signed with unsigned of at least its width: the signed type twice as wide, float64 past int64 (numpy)
    return {1: dtypes.int16, 2: dtypes.int32, 4: dtypes.int64}.get(u.itemsize, dtypes.float64)


def _float_promotion(a: DType, b: DType) -> DType:
    if a == b:
        return a
    if a.itemsize == b.itemsize == 2:  # float16 with bfloat16: neither holds the other
        return dtypes.float32
    return a if a.itemsize > b.itemsize else b


def _pair_promotion(a: DType, b: DType) -> DType:
    """numpy 2's ``result_type`` of two arrays (no values, no Python scalars), bfloat16 ranked as float16."""
    if a.kind == "b" or b.kind == "b":
        return b if a.kind == "b" else a
    if a.kind != "f" and b.kind != "f":
        return _int_promotion(a, b)
    if a.kind == "f" and b.kind == "f":
        return _float_promotion(a, b)
    f, i = (a, b) if a.kind == "f" else (b, a)
    # an integer meets a float: the smallest float at least as wide as ``f`` that holds every value of the
    # integer type exactly (8 bits: any float; 16: float32; 32 and 64: float64), as numpy does
    holder = {1: f, 2: dtypes.float32}.get(i.itemsize, dtypes.float64)
    return _float_promotion(f, holder)


# every pair of scalar dtypes, built once: promotion runs for every binary op a program builds
_PROMOTION: dict[tuple[DType, DType], DType] = {(a, b): _pair_promotion(a, b) for a in SCALARS for b in SCALARS}


def least_upper_dtype(*ds: DType) -> DType:
    """The dtype several arrays promote to, numpy 2's table (``np.result_type``) over uops' dtypes.

    Within a kind it is also the Array API standard's table; across kinds (which the standard leaves
    open) an integer with a float gives the smallest float that holds the integer's values, so
    ``int32 + float16`` is float64 as in numpy. bfloat16, which numpy lacks, ranks as float16 does, and
    float16 with bfloat16 gives float32. ``docs/dtypes.md`` lists where uops differs from numpy.
    """
    if not ds:
        raise ValueError("least_upper_dtype needs at least one dtype")
    out = ds[0].scalar()
    for d in ds[1:]:
        out = _PROMOTION[out, d.scalar()]
    return out


def promote_for(unsupported: frozenset[DType], *ds: DType) -> DType:
    """``least_upper_dtype`` for a device that lacks the dtypes in ``unsupported``: where an integer meets a
    float and numpy's answer is float64 that the device has no float64 for (Metal), float32 instead. An
    explicit float64 operand keeps float64, and the device's own error names it."""
    dt = least_upper_dtype(*ds)
    if dt == dtypes.float64 and dt in unsupported and not any(d.scalar() == dtypes.float64 for d in ds):
        return dtypes.float32
    return dt


#: Every place where uops' result dtype differs from numpy 2's on purpose: case -> (numpy 2, uops, why).
#: docs/dtypes.md shows this table and tests/test_dtype_promotion.py checks both against numpy.
NUMPY_DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "a Tensor from Python ints (`Tensor([1, 2])`, `Tensor.arange(3)`)": (
        "int64",
        "int32 (int64 when a value needs it)",
        "int32 is every GPU's native integer; `uops.array_api` makes int64, as numpy",
    ),
    "a Tensor from Python floats (`Tensor([0.5])`)": (
        "float64",
        "float32",
        "float32 is the default float (GPUs run float64 slowly or not at all), as in torch and JAX",
    ),
    "a bool tensor with a Python int (`b + 1`)": ("int64", "int32", "the default integer, as above"),
    "a numpy scalar with a tensor (`x / np.sqrt(d)`, `np.float64`)": (
        "its dtype takes part, as an array's would",
        "weak, as the same Python scalar",
        "keeps float32 models float32 (as torch does); pass a 0-d array or cast to promote",
    ),
    "an integer or bool tensor with a Python float (`i * 0.5`)": ("float64", "float32", "the default float"),
    "`/` of integers or bools; `mean`, `var`, `std` of integers or bools": (
        "float64",
        "float32 (sums of integers are exact int64 first)",
        "the default float",
    ),
    "float math (`sqrt`, `exp`, `sin`, ...) of integers or bools": (
        "float16 for bool and 8-bit, float32 for 16-bit, float64 for wider integers",
        "float32",
        "the default float",
    ),
    "bfloat16 with any dtype": (
        "no bfloat16",
        "ranks as float16: bool and 8-bit integers keep bfloat16; 16-bit integers and float16 give float32; "
        "wider integers float64",
        "the smallest float that holds both, as numpy's rule for float16",
    ),
    "an integer with a float where numpy gives float64, on a device without float64 (Metal)": (
        "float64",
        "float32",
        "numpy's answer cannot run there; an explicit float64 raises DTypeNotSupportedError naming dtype and device",
    ),
}
