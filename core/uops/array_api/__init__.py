"""The Python Array API standard (revision 2024.12) over ``Tensor``: ``import uops.array_api as xp``.

A thin layer: every function here spells a Tensor method the standard's way (positional-only
arrays, keyword-only options, Python scalars beside arrays) and computes nothing of its own.
What the standard leaves to the implementation, uops answers so:

- Arrays are lazy ``Tensor`` s; reading a value (``bool()``, ``float()``, ``item``) realizes them.
- Default dtypes: ``int64`` (numpy's and torch's; ``Tensor`` itself makes ``int32`` from Python ints) and
  ``float32`` (``uops.dtypes.default_float``). No complex dtypes. With an int64 default the standard's
  accumulation rule is numpy 2's: sums and products of bool and signed integers are int64, of unsigned
  integers uint64, so no sum wraps where numpy's would not.
- Promotion is ``uops.dtypes.least_upper_dtype``: the standard's table within a kind and numpy 2's across
  kinds (which the standard leaves open: ``int32`` with ``float32`` is ``float64``). ``docs/dtypes.md`` lists
  every place where uops differs from numpy.
- Set functions (``unique_*``) and ``nonzero`` have shapes that depend on the data: they realize their
  input and finish on the host (the sizes of the results cannot be known while building the graph).
- ``sort``/``argsort`` are kernels (compare-count ranks, see ``frontend/tensor/sort.py``), always stable.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from uops.dtypes import DType, dtypes, least_upper_dtype, to_numpy
from uops.errors import UopsError
from uops.frontend.tensor import Tensor, from_dlpack
from uops.frontend.tensor.args import device_arg

from . import linalg
from ._info import __array_namespace_info__ as __array_namespace_info__

__array_api_version__ = "2024.12"
_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

Array = Tensor
bool = dtypes.bool  # noqa: A001
int8, int16, int32, int64 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64
uint8, uint16, uint32, uint64 = dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64
float32, float64 = dtypes.float32, dtypes.float64
#: the namespace's default integer (and its index dtype)
_DEFAULT_INT = dtypes.int64
e, inf, nan, pi, newaxis = math.e, math.inf, math.nan, math.pi, None


class ArrayAPIError(UopsError, ValueError):
    """An argument the standard forbids (``copy=False`` that would need a copy, an unknown version)."""


def namespace(api_version: str | None = None) -> Any:
    """This module, for ``Tensor.__array_namespace__``; an unknown revision is refused by name."""
    if api_version is not None and api_version not in _VERSIONS:
        raise ArrayAPIError(f"uops.array_api implements the Array API {', '.join(_VERSIONS)}; got {api_version!r}")
    import sys

    return sys.modules[__name__]


# ----- helpers -----
def _dev(device: Any) -> str | None:
    return None if device is None else device_arg(str(device))


def _t(x: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return Tensor(x, device=like.device if like is not None else None)


def _pair(x1: Tensor | complex, x2: Tensor | complex) -> tuple[Tensor, Any, builtins.bool]:
    """(the array operand, the other operand, whether they were swapped): Python scalars may sit on either side."""
    if isinstance(x1, Tensor):
        return x1, x2, False
    if isinstance(x2, Tensor):
        return x2, x1, True
    raise TypeError("at least one argument must be an array")


def _scalar_t(x: Any, like: Tensor) -> Tensor:
    """A Python scalar as a 0-d tensor of the array's dtype where it fits the kind (the standard's rule)."""
    if isinstance(x, Tensor):
        return x
    dt = like.dtype
    if isinstance(x, float) and not dtypes.is_float(dt):
        dt = dtypes.default_float
    if isinstance(x, builtins.bool) and not dtypes.is_bool(dt):
        dt = dtypes.bool
    return Tensor(x, device=like.device, dtype=dt)


# ----- creation -----
def asarray(
    obj: Any, /, *, dtype: DType | None = None, device: Any = None, copy: builtins.bool | None = None
) -> Tensor:
    dev = _dev(device)
    if isinstance(obj, Tensor):
        out = obj if dev is None else obj.to(dev)
        if dtype is not None and out.dtype != dtype:
            if copy is False:
                raise ArrayAPIError(f"asarray: casting {obj.dtype.name} to {dtype.name} needs a copy (copy=False)")
            out = out.cast(dtype)
        if copy:
            out = _copy(out)
        return out
    if copy is False and not hasattr(obj, "__dlpack__"):
        raise ArrayAPIError(f"asarray: a {type(obj).__name__} cannot be shared without a copy (copy=False)")
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (list, tuple)):
        if copy is not True and dtype is None:
            try:
                return from_dlpack(obj, device=dev, copy=copy)
            except BufferError:
                if copy is False:
                    raise
        return Tensor(np.asarray(obj), device=dev, dtype=dtype)
    if isinstance(obj, (builtins.bool, int, float)):
        if dtype is not None and dtypes.is_int(dtype) and isinstance(obj, float):
            raise TypeError(f"asarray: a Python float cannot become {dtype.name}")
        return Tensor(obj, device=dev, dtype=dtype if dtype is not None else _int_default(obj))
    if isinstance(obj, (list, tuple)):
        plain = _plain(obj)
        if dtype is None and (ints := np.asarray(plain)).dtype.kind in "iu":
            return Tensor(ints, device=dev)  # int64 (uint64 past it), as numpy
        return Tensor(plain, device=dev, dtype=dtype)
    if hasattr(obj, "__buffer__") or isinstance(obj, (bytes, bytearray, memoryview)):
        return Tensor(np.asarray(memoryview(obj)), device=dev, dtype=dtype)
    raise TypeError(f"asarray: cannot make an array from {type(obj).__name__}")


def _int_default(value: Any) -> DType | None:
    """The namespace's default integer for a Python int that fits it; None (Tensor's choice) otherwise."""
    if isinstance(value, int) and not isinstance(value, builtins.bool) and dtypes.min(_DEFAULT_INT) <= value:
        return _DEFAULT_INT if value <= dtypes.max(_DEFAULT_INT) else None
    return None


def _plain(obj: Any) -> Any:
    """Nested sequences with 0-d arrays replaced by their Python values."""
    if isinstance(obj, Tensor):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        return [_plain(o) for o in obj]
    return obj


def _copy(x: Tensor) -> Tensor:
    """A tensor with its own buffer (``copy=True``): the value is computed into new memory."""
    from uops.ir.ops import Ops
    from uops.ir.uop import UOp

    return x._new(UOp(Ops.CONTIGUOUS, x.dtype, (x.uop,)))


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def zeros(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return Tensor.zeros(*_shape(shape), dtype=dtype, device=_dev(device))


def ones(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return Tensor.ones(*_shape(shape), dtype=dtype, device=_dev(device))


def empty(shape: int | Sequence[int], *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return Tensor.empty(*_shape(shape), dtype=dtype, device=_dev(device))


def full(shape: int | Sequence[int], fill_value: complex, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None and isinstance(fill_value, float):
        dtype = dtypes.default_float
    if dtype is None:
        dtype = _int_default(fill_value)
    return Tensor.full(_shape(shape), fill_value, dtype=dtype, device=_dev(device))  # type: ignore[arg-type]


def zeros_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return zeros(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def ones_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return ones(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def empty_like(x: Tensor, /, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return empty(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def full_like(x: Tensor, /, fill_value: complex, *, dtype: DType | None = None, device: Any = None) -> Tensor:
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or x.device)


def arange(
    start: int | float,
    /,
    stop: int | float | None = None,
    step: int | float = 1,
    *,
    dtype: DType | None = None,
    device: Any = None,
) -> Tensor:
    if dtype is None and builtins.all(isinstance(v, int) for v in (start, stop, step) if v is not None):
        dtype = _DEFAULT_INT
    return Tensor.arange(start, stop, step, dtype=dtype, device=_dev(device))


def eye(
    n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: DType | None = None, device: Any = None
) -> Tensor:
    m = n_rows if n_cols is None else n_cols
    i = Tensor.arange(n_rows, dtype=dtypes.int32, device=_dev(device)).unsqueeze(-1)
    j = Tensor.arange(m, dtype=dtypes.int32, device=_dev(device)).unsqueeze(0)
    return ((j - i) == k).cast(dtype or dtypes.default_float)


def linspace(
    start: float,
    stop: float,
    /,
    num: int,
    *,
    dtype: DType | None = None,
    device: Any = None,
    endpoint: builtins.bool = True,
) -> Tensor:
    dt = dtype or dtypes.default_float
    div = (num - 1) if endpoint else num
    if num == 0:
        return zeros((0,), dtype=dt, device=device)
    i = Tensor.arange(num, dtype=dtypes.float64 if dt == dtypes.float64 else dtypes.float32, device=_dev(device))
    step = (stop - start) / div if div > 0 else 0.0
    out = i * step + start
    if endpoint and num > 1:
        out = (i == num - 1).where(float(stop), out)
    return out.cast(dt)


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        d = i if indexing == "ij" or len(arrays) < 2 else (1 - i if i < 2 else i)
        s = [1] * len(arrays)
        s[d] = a.shape[0]
        out.append(a.reshape(s).expand(tuple(shape)))
    return out


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    return x.tril(k)


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    return x.triu(k)


# ----- data types -----
def astype(x: Tensor, dtype: DType, /, *, copy: builtins.bool = True, device: Any = None) -> Tensor:
    out = x if device is None else x.to(_dev(device) or x.device)
    if out.dtype == dtype:
        return _copy(out) if copy else out
    return out.cast(dtype)


def can_cast(from_: DType | Tensor, to: DType, /) -> builtins.bool:
    f = from_.dtype if isinstance(from_, Tensor) else from_
    if f == to:
        return True
    if dtypes.is_bool(f):
        return True
    if dtypes.is_bool(to):
        return False
    if dtypes.is_float(f):
        return dtypes.is_float(to) and to.itemsize >= f.itemsize
    if dtypes.is_float(to):
        return False  # mixed kinds are outside the standard's table
    return least_upper_dtype(f, to) == to


class finfo_object(NamedTuple):
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DType


class iinfo_object(NamedTuple):
    bits: int
    max: int
    min: int
    dtype: DType


def finfo(type: DType | Tensor, /) -> finfo_object:  # noqa: A002
    dt = type.dtype if isinstance(type, Tensor) else type
    if not dtypes.is_float(dt):
        raise ValueError(f"finfo needs a floating-point dtype, got {dt.name}")
    f = np.finfo(np.float32 if dt == dtypes.bfloat16 else to_numpy(dt))
    return finfo_object(f.bits, float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), dt)


def iinfo(type: DType | Tensor, /) -> iinfo_object:  # noqa: A002
    dt = type.dtype if isinstance(type, Tensor) else type
    if not dtypes.is_int(dt):
        raise ValueError(f"iinfo needs an integer dtype, got {dt.name}")
    return iinfo_object(8 * dt.itemsize, int(dtypes.max(dt)), int(dtypes.min(dt)), dt)


_KINDS = {
    "bool": lambda d: dtypes.is_bool(d),
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: dtypes.is_int(d),
    "real floating": lambda d: dtypes.is_float(d),
    "complex floating": lambda d: False,
    "numeric": lambda d: not dtypes.is_bool(d),
}


def isdtype(dtype: DType, kind: DType | str | tuple[DType | str, ...]) -> builtins.bool:
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, DType):
        return dtype == kind
    if kind not in _KINDS:
        raise ValueError(f"isdtype: unknown kind {kind!r}; known: {sorted(_KINDS)}")
    return _KINDS[kind](dtype)


def result_type(*arrays_and_dtypes: Tensor | DType | complex) -> DType:
    ds = [a.dtype if isinstance(a, Tensor) else a for a in arrays_and_dtypes if isinstance(a, (Tensor, DType))]
    scalars = [a for a in arrays_and_dtypes if not isinstance(a, (Tensor, DType))]
    if not ds:
        raise ValueError("result_type needs at least one array or dtype")
    dt = least_upper_dtype(*ds)
    for s in scalars:
        if isinstance(s, float) and not dtypes.is_float(dt):
            dt = dtypes.default_float
        elif isinstance(s, int) and not isinstance(s, builtins.bool) and dtypes.is_bool(dt):
            dt = _DEFAULT_INT
    return dt


# ----- elementwise -----
def _unary(name: str, method: str | None = None) -> Any:
    m = method or name

    def fn(x: Tensor, /) -> Tensor:
        return getattr(x, m)()

    fn.__name__ = name
    fn.__doc__ = f"The standard's ``{name}``: ``Tensor.{m}``."
    return fn


abs = _unary("abs")  # noqa: A001
acos, acosh, asin, asinh = _unary("acos"), _unary("acosh"), _unary("asin"), _unary("asinh")
atan, atanh = _unary("atan"), _unary("atanh")
ceil, floor, trunc = _unary("ceil"), _unary("floor"), _unary("trunc")
cos, cosh, sin, sinh, tan = _unary("cos"), _unary("cosh"), _unary("sin"), _unary("sinh"), _unary("tan")
exp, expm1, log, log1p, log2, log10 = (_unary(n) for n in ("exp", "expm1", "log", "log1p", "log2", "log10"))
isfinite, isinf, isnan, signbit = _unary("isfinite"), _unary("isinf"), _unary("isnan"), _unary("signbit")
sqrt, square, sign, reciprocal = _unary("sqrt"), _unary("square"), _unary("sign"), _unary("reciprocal")
negative, bitwise_invert = _unary("negative", "__neg__"), _unary("bitwise_invert", "__invert__")
round = _unary("round", "round_half_even")  # noqa: A001


def tanh(x: Tensor, /) -> Tensor:
    return x.tanh()


def logical_not(x: Tensor, /) -> Tensor:
    return x.logical_not()


def positive(x: Tensor, /) -> Tensor:
    return x


def conj(x: Tensor, /) -> Tensor:
    return x


def real(x: Tensor, /) -> Tensor:
    return x


def imag(x: Tensor, /) -> Tensor:
    return x.zeros_like()


def _binary(name: str, method: str, reflected: str | None = None) -> Any:
    def fn(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
        a, b, swapped = _pair(x1, x2)
        if not swapped:
            return getattr(a, method)(b)
        if reflected is not None:
            return getattr(a, reflected)(b)
        return getattr(_scalar_t(b, a), method)(a)

    fn.__name__ = name
    fn.__doc__ = f"The standard's ``{name}``: ``Tensor.{method}``."
    return fn


add = _binary("add", "__add__", "__radd__")
subtract = _binary("subtract", "__sub__", "__rsub__")
multiply = _binary("multiply", "__mul__", "__rmul__")
divide = _binary("divide", "__truediv__", "__rtruediv__")
floor_divide = _binary("floor_divide", "__floordiv__", "__rfloordiv__")
remainder = _binary("remainder", "__mod__", "__rmod__")
pow = _binary("pow", "__pow__", "__rpow__")  # noqa: A001
bitwise_and = _binary("bitwise_and", "__and__", "__rand__")
bitwise_or = _binary("bitwise_or", "__or__", "__ror__")
bitwise_xor = _binary("bitwise_xor", "__xor__", "__rxor__")
bitwise_left_shift = _binary("bitwise_left_shift", "left_shift")
bitwise_right_shift = _binary("bitwise_right_shift", "right_shift")
equal = _binary("equal", "__eq__", "__eq__")
not_equal = _binary("not_equal", "__ne__", "__ne__")
less = _binary("less", "__lt__", "__gt__")
less_equal = _binary("less_equal", "__le__", "__ge__")
greater = _binary("greater", "__gt__", "__lt__")
greater_equal = _binary("greater_equal", "__ge__", "__le__")
maximum = _binary("maximum", "maximum", "maximum")
minimum = _binary("minimum", "minimum", "minimum")
atan2 = _binary("atan2", "atan2")
hypot = _binary("hypot", "hypot", "hypot")
copysign = _binary("copysign", "copysign")
logaddexp = _binary("logaddexp", "logaddexp", "logaddexp")


def logical_and(x1: Tensor | builtins.bool, x2: Tensor | builtins.bool, /) -> Tensor:
    a, b, _ = _pair(x1, x2)
    return a.cast(dtypes.bool) & (b.cast(dtypes.bool) if isinstance(b, Tensor) else builtins.bool(b))


def logical_or(x1: Tensor | builtins.bool, x2: Tensor | builtins.bool, /) -> Tensor:
    a, b, _ = _pair(x1, x2)
    return a.cast(dtypes.bool) | (b.cast(dtypes.bool) if isinstance(b, Tensor) else builtins.bool(b))


def logical_xor(x1: Tensor | builtins.bool, x2: Tensor | builtins.bool, /) -> Tensor:
    a, b, _ = _pair(x1, x2)
    return a.cast(dtypes.bool) ^ (b.cast(dtypes.bool) if isinstance(b, Tensor) else builtins.bool(b))


def clip(x: Tensor, /, min: Tensor | float | None = None, max: Tensor | float | None = None) -> Tensor:  # noqa: A002
    out = x
    if min is not None:
        out = out.maximum(min if isinstance(min, Tensor) else _scalar_t(min, x).cast(x.dtype))
    if max is not None:
        out = out.minimum(max if isinstance(max, Tensor) else _scalar_t(max, x).cast(x.dtype))
    return out.cast(x.dtype)


def nextafter(x1: Tensor, x2: Tensor, /) -> Tensor:
    a, b, _ = _pair(x1, x2)
    a, b = a._operands(b)
    idt = {4: dtypes.int32, 8: dtypes.int64}[a.dtype.itemsize]
    from uops.ir.ops import Ops

    bits = a._alu(Ops.BITCAST, dtype=idt)
    toward_up = (b > a) != a.signbit()
    step = (b == a).where(0, toward_up.where(1, -1))
    stepped = (bits + step.cast(idt))._alu(Ops.BITCAST, dtype=a.dtype)
    tiny = a._new(Tensor(1, dtype=idt).uop)._alu(Ops.BITCAST, dtype=a.dtype)
    zero_step = (a == 0) & (b != a)
    stepped = zero_step.where(b.signbit().where(-tiny, tiny), stepped)
    return ((a != a) | (b != b)).where(math.nan, (a == b).where(b, stepped))


# ----- statistical and utility -----
def _axis(axis: int | Sequence[int] | None) -> Any:
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def sum(  # noqa: A001
    x: Tensor,
    /,
    *,
    axis: int | Sequence[int] | None = None,
    dtype: DType | None = None,
    keepdims: builtins.bool = False,
) -> Tensor:
    out = (x if dtype is None else x.cast(dtype)).sum(_axis(axis), keepdims)
    return out if dtype is None else out.cast(dtype)


def prod(
    x: Tensor,
    /,
    *,
    axis: int | Sequence[int] | None = None,
    dtype: DType | None = None,
    keepdims: builtins.bool = False,
) -> Tensor:
    out = (x if dtype is None else x.cast(dtype)).prod(_axis(axis), keepdims)
    return out if dtype is None else out.cast(dtype)


def max(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return x.max(_axis(axis), keepdims)


def min(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return x.min(_axis(axis), keepdims)


def mean(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:
    return x.mean(_axis(axis), keepdims).cast(x.dtype)


def var(
    x: Tensor,
    /,
    *,
    axis: int | Sequence[int] | None = None,
    correction: int | float = 0.0,
    keepdims: builtins.bool = False,
) -> Tensor:
    return x.var(_axis(axis), keepdims, ddof=correction).cast(x.dtype)  # type: ignore[arg-type]


def std(
    x: Tensor,
    /,
    *,
    axis: int | Sequence[int] | None = None,
    correction: int | float = 0.0,
    keepdims: builtins.bool = False,
) -> Tensor:
    return x.std(_axis(axis), keepdims, ddof=correction).cast(x.dtype)  # type: ignore[arg-type]


def all(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return x.all(_axis(axis), keepdims)


def any(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return x.any(_axis(axis), keepdims)


def _cumulative_axis(x: Tensor, axis: int | None) -> int:
    if x.ndim == 0:
        raise ValueError("cumulative functions need at least a 1-d array")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"cumulative functions need axis= for a {x.ndim}-d array")
        return 0
    return x._axis(axis)


def _with_initial(out: Tensor, axis: int, value: int) -> Tensor:
    """``value`` prepended along ``axis``: the standard's ``include_initial=True``."""
    first = out.shrink(tuple((0, 1) if d == axis else None for d in range(out.ndim)))
    return Tensor.full(first.shape, value, dtype=out.dtype, device=out.device).cat(out, dim=axis)


def cumulative_sum(
    x: Tensor, /, *, axis: int | None = None, dtype: DType | None = None, include_initial: builtins.bool = False
) -> Tensor:
    ax = _cumulative_axis(x, axis)
    acc = x.cast(dtype if dtype is not None else x._acc_dtype())
    out = acc.cumsum(ax).cast(acc.dtype)
    return _with_initial(out, ax, 0) if include_initial else out


def cumulative_prod(
    x: Tensor, /, *, axis: int | None = None, dtype: DType | None = None, include_initial: builtins.bool = False
) -> Tensor:
    """No Tensor method yet: a masked product reduction (position j contributes to k when j <= k)."""
    ax = _cumulative_axis(x, axis)
    acc = x.cast(dtype if dtype is not None else x._acc_dtype())
    t = acc.transpose(ax, -1)
    i = Tensor.arange(t.shape[-1], dtype=dtypes.int32, device=x.device)
    upto = i.unsqueeze(0) <= i.unsqueeze(-1)
    out = upto.where(t.unsqueeze(-2), 1).prod(-1).cast(acc.dtype).transpose(ax, -1)
    return _with_initial(out, ax, 1) if include_initial else out


def diff(
    x: Tensor, /, *, axis: int = -1, n: int = 1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    parts = [p for p in (prepend, x, append) if p is not None]
    out = concat(parts, axis=axis) if len(parts) > 1 else x
    ax = out._axis(axis)
    for _ in range(n):
        m = out.shape[ax]
        hi = tuple((1, m) if d == ax else None for d in range(out.ndim))
        lo = tuple((0, m - 1) if d == ax else None for d in range(out.ndim))
        a, b = out.shrink(hi), out.shrink(lo)
        out = (a != b) if dtypes.is_bool(out.dtype) else a - b
    return out


# ----- indexing -----
def take(x: Tensor, indices: Tensor, /, *, axis: int | None = None) -> Tensor:
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take needs axis= for a {x.ndim}-d array")
        axis = 0
    ax = x._axis(axis)
    return x[(slice(None),) * ax + (indices,)]


def take_along_axis(x: Tensor, indices: Tensor, /, *, axis: int = -1) -> Tensor:
    return x.take_along_axis(indices, axis)


# ----- searching -----
def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Tensor:
    return x.argmax(axis, keepdims).cast(dtypes.int64)


def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Tensor:
    return x.argmin(axis, keepdims).cast(dtypes.int64)


def where(condition: Tensor, x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
    if not isinstance(x1, Tensor) and isinstance(x2, Tensor):
        x1 = _scalar_t(x1, x2)
    elif isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        x2 = _scalar_t(x2, x1)
    return condition.where(x1, x2)  # type: ignore[arg-type]


def count_nonzero(x: Tensor, /, *, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False) -> Tensor:
    return (x != 0).sum(_axis(axis), keepdims)  # a bool sum counts in int64, the default integer


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """Data-dependent shape: the input is realized and the indices found on the host."""
    if x.ndim == 0:
        raise ValueError("nonzero of a 0-d array is not defined; use x[None]")
    return tuple(Tensor(i.astype(np.int64), device=x.device) for i in np.nonzero(x.numpy()))


def searchsorted(x1: Tensor, x2: Tensor | complex, /, *, side: str = "left", sorter: Tensor | None = None) -> Tensor:
    """Counts of sorted values below each query: one broadcast comparison and a sum (a kernel)."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        x1 = Tensor(x1.numpy()[sorter.numpy()], device=x1.device)
    v = x2 if isinstance(x2, Tensor) else _scalar_t(x2, x1)
    a, q = x1.unsqueeze(-1).expand(x1.shape + (1,)), v.reshape(v.shape + (1,)) if False else v
    before = (x1 < q.unsqueeze(-1)) if side == "left" else (x1 <= q.unsqueeze(-1))
    if dtypes.is_float(x1.dtype):  # NaN queries go last, after every number
        before = before | ((q.unsqueeze(-1) != q.unsqueeze(-1)) & (x1 == x1))
    del a
    return before.cast(dtypes.int64).sum(-1)


# ----- sorting -----
def argsort(x: Tensor, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Tensor:
    return x.argsort(axis, descending).cast(dtypes.int64)


def sort(x: Tensor, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True) -> Tensor:
    return x.sort(axis, descending)


# ----- sets (data-dependent shapes: realized, finished on the host) -----
class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def _unique(x: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """numpy's unique, except that each NaN is its own value (the standard's rule)."""
    a = x.numpy().reshape(-1)
    nan_mask = a != a
    vals, idx, inv, cnt = np.unique(a[~nan_mask], return_index=True, return_inverse=True, return_counts=True)
    where = np.nonzero(~nan_mask)[0]
    idx = where[idx] if where.size else idx
    nans = np.nonzero(nan_mask)[0]
    full_inv = np.empty(a.size, dtype=np.int64)
    full_inv[~nan_mask] = inv.reshape(-1)
    full_inv[nans] = vals.size + np.arange(nans.size)
    vals = np.concatenate([vals, a[nans]])
    idx = np.concatenate([idx, nans]).astype(np.int64)
    cnt = np.concatenate([cnt, np.ones(nans.size, dtype=cnt.dtype)]).astype(np.int64)
    return vals, idx, full_inv.reshape(x.shape), cnt


def unique_all(x: Tensor, /) -> UniqueAllResult:
    v, i, inv, c = _unique(x)
    d = x.device
    return UniqueAllResult(
        Tensor(v, device=d, dtype=x.dtype), Tensor(i, device=d), Tensor(inv, device=d), Tensor(c, device=d)
    )


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    v, _, _, c = _unique(x)
    return UniqueCountsResult(Tensor(v, device=x.device, dtype=x.dtype), Tensor(c, device=x.device))


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    v, _, inv, _ = _unique(x)
    return UniqueInverseResult(Tensor(v, device=x.device, dtype=x.dtype), Tensor(inv, device=x.device))


def unique_values(x: Tensor, /) -> Tensor:
    return Tensor(_unique(x)[0], device=x.device, dtype=x.dtype)


# ----- manipulation -----
def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    from uops.frontend.tensor import broadcast_shape

    shape = broadcast_shape(*(a.shape for a in arrays))
    return [a.broadcast_to(shape) for a in arrays]


def broadcast_to(x: Tensor, /, shape: tuple[int, ...]) -> Tensor:
    return x.broadcast_to(tuple(shape))


def concat(arrays: Sequence[Tensor], /, *, axis: int | None = 0) -> Tensor:
    if axis is None:
        return Tensor.cat([a.reshape(-1) for a in arrays], dim=0)
    return Tensor.cat(list(arrays), dim=axis)


def stack(arrays: Sequence[Tensor], /, *, axis: int = 0) -> Tensor:
    return Tensor.stack(list(arrays), dim=axis)


def expand_dims(x: Tensor, /, axis: int = 0) -> Tensor:
    return x.unsqueeze(axis)


def flip(x: Tensor, /, *, axis: int | Sequence[int] | None = None) -> Tensor:
    return x.flip(_axis(axis))


def permute_dims(x: Tensor, /, axes: tuple[int, ...]) -> Tensor:
    return x.permute(tuple(axes))


def moveaxis(x: Tensor, source: int | tuple[int, ...], destination: int | tuple[int, ...], /) -> Tensor:
    src = [x._axis(s) for s in (source if isinstance(source, tuple) else (source,))]
    dst = [x._axis(d) for d in (destination if isinstance(destination, tuple) else (destination,))]
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(tuple(order))


def reshape(x: Tensor, /, shape: tuple[int, ...], *, copy: builtins.bool | None = None) -> Tensor:
    return x.reshape(tuple(shape))


def squeeze(x: Tensor, /, axis: int | tuple[int, ...]) -> Tensor:
    axes = tuple(x._axis(a) for a in (axis if isinstance(axis, tuple) else (axis,)))
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1")
    return x.squeeze_axes(axes)


def roll(x: Tensor, /, shift: int | tuple[int, ...], *, axis: int | tuple[int, ...] | None = None) -> Tensor:
    if axis is None:
        return roll(x.reshape(-1), shift, axis=0).reshape(x.shape)
    shifts = shift if isinstance(shift, tuple) else (shift,)
    axes = axis if isinstance(axis, tuple) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    out = x
    for s, a in zip(shifts, axes):
        a = out._axis(a)
        n = out.shape[a]
        if n == 0:
            continue
        k = s % n
        if k == 0:
            continue
        head = out.shrink(tuple((n - k, n) if d == a else None for d in range(out.ndim)))
        tail = out.shrink(tuple((0, n - k) if d == a else None for d in range(out.ndim)))
        out = Tensor.cat([head, tail], dim=a)
    return out


def repeat(x: Tensor, repeats: int | Tensor, /, *, axis: int | None = None) -> Tensor:
    if axis is None:
        x, axis = x.reshape(-1), 0
    ax = x._axis(axis)
    if isinstance(repeats, Tensor):
        if repeats.ndim == 0:
            repeats = int(repeats.item())
        else:  # per-element counts: a data-dependent shape, realized
            reps = repeats.numpy()
            return Tensor(np.repeat(x.numpy(), reps, axis=ax), device=x.device, dtype=x.dtype)
    n = x.shape[ax]
    y = x.unsqueeze(ax + 1)
    shape = list(y.shape)
    shape[ax + 1] = repeats
    return y.expand(tuple(shape)).reshape(x.shape[:ax] + (n * repeats,) + x.shape[ax + 1 :])


def tile(x: Tensor, repetitions: tuple[int, ...], /) -> Tensor:
    reps = (1,) * (x.ndim - len(repetitions)) + tuple(repetitions)
    y = x.reshape((1,) * (len(reps) - x.ndim) + x.shape)
    out = y
    for a, r in enumerate(reps):
        if r != 1:
            out = (
                Tensor.cat([out] * r, dim=a)
                if r > 0
                else out.shrink(tuple((0, 0) if d == a else None for d in range(out.ndim)))
            )
    return out


def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    ax = x._axis(axis)
    return tuple(
        x.shrink(tuple((i, i + 1) if d == ax else None for d in range(x.ndim))).squeeze(ax) for i in range(x.shape[ax])
    )


# ----- linear algebra -----
matmul = linalg.matmul
matrix_transpose = linalg.matrix_transpose
tensordot = linalg.tensordot
vecdot = linalg.vecdot
