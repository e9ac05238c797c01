"""The standard's linear-algebra functions that map onto existing kernels (products and reductions).

Only these are offered: ``matmul``, ``matrix_transpose``, ``tensordot``, ``vecdot`` (in the main
namespace too), and ``cross``, ``diagonal``, ``matrix_norm`` (the orders that are sums and maxima),
``matrix_power`` (``n >= 0``), ``outer``, ``trace``, ``vector_norm``. Decompositions and solvers
(``cholesky``, ``inv``, ``svd``...) would need kernels uops does not have and are absent: the
extension is partial, and ``bench/array_api.sh`` runs the suite with it disabled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from uops.dtypes import DType, dtypes
from uops.errors import UopsError
from uops.frontend.tensor import Tensor
from uops.frontend.tensor.args import broadcast_shape


class LinalgError(UopsError, ValueError):
    """A linear-algebra request that needs a decomposition (SVD, inverse) uops has no kernel for."""


def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
    return x1.matmul(x2)


def matrix_transpose(x: Tensor, /) -> Tensor:
    return x.mT


def tensordot(x1: Tensor, x2: Tensor, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    if isinstance(axes, int):
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1, a2 = [x1._axis(a) for a in axes[0]], [x2._axis(a) for a in axes[1]]
    free1 = [a for a in range(x1.ndim) if a not in a1]
    free2 = [a for a in range(x2.ndim) if a not in a2]
    k = math.prod(x1.shape[a] for a in a1)
    left = x1.permute(tuple(free1 + a1)).reshape(math.prod(x1.shape[a] for a in free1), k)
    right = x2.permute(tuple(a2 + free2)).reshape(k, math.prod(x2.shape[a] for a in free2))
    out = left.matmul(right)
    return out.reshape(tuple(x1.shape[a] for a in free1) + tuple(x2.shape[a] for a in free2))


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(
            f"vecdot: axis {axis} has size {x1.shape[axis]} in one array and {x2.shape[axis]} in the other"
        )
    prod = x1 * x2
    return prod.sum(axis).cast(prod.dtype)


def outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    return x1.unsqueeze(-1) * x2.unsqueeze(0)


def diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    n, m = x.shape[-2], x.shape[-1]
    i = Tensor.arange(n, dtype=dtypes.int32, device=x.device).unsqueeze(-1)
    j = Tensor.arange(m, dtype=dtypes.int32, device=x.device).unsqueeze(0)
    size = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    start = (max(0, -offset), max(0, offset))
    sel = (j - i) == offset
    picked = sel.where(x, x.zeros_like()).sum(-1 if offset >= 0 else -2)
    lo = start[0] if offset >= 0 else start[1]
    return picked.shrink(tuple(None for _ in picked.shape[:-1]) + ((lo, lo + size),)).cast(x.dtype)


def trace(x: Tensor, /, *, offset: int = 0, dtype: DType | None = None) -> Tensor:
    d = diagonal(x, offset=offset)
    return (d if dtype is None else d.cast(dtype)).sum(-1)


def vector_norm(
    x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, ord: float = 2
) -> Tensor:
    a = x.abs()
    if ord == math.inf:
        return a.max(axis, keepdims)
    if ord == -math.inf:
        return a.min(axis, keepdims)
    if ord == 0:
        return (x != 0).cast(x.dtype).sum(axis, keepdims)
    return (a**ord).sum(axis, keepdims) ** (1.0 / ord)


def cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"cross: axis {axis} must have size 3, got shapes {x1.shape} and {x2.shape}")
    shape = broadcast_shape(x1.shape, x2.shape)
    a, b = x1.broadcast_to(shape), x2.broadcast_to(shape)
    ax = a._axis(axis)
    a, b = a.transpose(ax, -1), b.transpose(ax, -1)
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    out = Tensor.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim=-1)
    return out.transpose(ax, -1)


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """By repeated squaring (log2 n matmuls); a negative ``n`` would need an inverse."""
    if n < 0:
        raise LinalgError(f"matrix_power: n={n} < 0 needs a matrix inverse, which uops has no kernel for")
    size = x.shape[-1]
    eye = Tensor.eye(size, dtype=x.dtype, device=x.device)
    out = eye.broadcast_to(x.shape) if n == 0 else None
    base = x
    while n:
        if n & 1:
            out = base if out is None else out.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    assert out is not None
    return out


def matrix_norm(x: Tensor, /, *, keepdims: bool = False, ord: float | str = "fro") -> Tensor:
    """The Frobenius norm and the 1/inf orders (column/row sums); 2, -2 and 'nuc' need an SVD."""
    a = x.abs()
    if ord == "fro":
        out = (a * a).sum((-2, -1), keepdim=True).sqrt()
    elif ord in (1, -1):
        s = a.sum(-2, keepdim=True)
        out = s.max(-1, keepdim=True) if ord == 1 else s.min(-1, keepdim=True)
    elif ord in (math.inf, -math.inf):
        s = a.sum(-1, keepdim=True)
        out = s.max(-2, keepdim=True) if ord == math.inf else s.min(-2, keepdim=True)
    else:
        raise LinalgError(f"matrix_norm: ord={ord!r} needs singular values (an SVD), which uops has no kernel for")
    return out if keepdims else out.reshape(out.shape[:-2])
