"""Convolution and pooling as window reductions: pad, view every output's window with movement
ops, then one reduce.

Why no im2col: the windows are index math (views), so a convolution is one fused kernel per
output — the product of the windowed input and the broadcast weight, summed over channels and
kernel positions — which the optimizer tiles like any other reduce, and autograd derives like
any other composition of movement, elementwise and reduce ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uops.dtypes import dtypes
from uops.errors import UopsError

from .args import int_arg, result_dtype

if TYPE_CHECKING:
    from . import Tensor

IntOrSeq = int | Sequence[int]


class ConvArgumentError(UopsError, ValueError):
    """A convolution or pooling got shapes or settings that do not fit together."""


def _tuple(value: IntOrSeq, n: int, what: str) -> tuple[int, ...]:
    """One int per spatial dim from an int (repeated) or a sequence of ``n`` ints."""
    vals = (value,) * n if isinstance(value, int) else tuple(value)
    if len(vals) != n:
        raise ConvArgumentError(f"{what} needs one value or {n} (one per spatial dim), got {value!r}")
    return tuple(int_arg(v, what) for v in vals)


def _padding(padding: IntOrSeq | Sequence[tuple[int, int]], n: int) -> tuple[tuple[int, int], ...]:
    """(before, after) per spatial dim from an int, one int per dim, or one (before, after) pair per dim."""
    if isinstance(padding, int):
        vals: list[tuple[int, int]] = [(padding, padding)] * n
    else:
        items: list[Any] = list(padding)
        if len(items) != n or any(not isinstance(p, int) and len(p) != 2 for p in items):
            raise ConvArgumentError(
                f"padding needs an int, {n} ints or {n} (before, after) pairs (one per spatial dim), got {padding!r}"
            )
        vals = [(p, p) if isinstance(p, int) else tuple(p) for p in items]
    out = tuple((int_arg(b, "padding"), int_arg(a, "padding")) for b, a in vals)
    if any(b < 0 or a < 0 for b, a in out):
        raise ConvArgumentError(f"padding must be >= 0, got {padding!r}")
    return out


def _out_size(size: int, k: int, s: int, d: int) -> int:
    return (size - d * (k - 1) - 1) // s + 1


def pool(self: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
    """The windows of the last ``len(kernel)`` dims: shape ``(..., *out, *kernel)``, a view of ``self``.

    Element ``[..., o, k]`` is ``self[..., o * stride + k * dilation]``. Non-overlapping windows
    (``kernel <= stride``, no dilation) are a reshape; otherwise each dim is repeated so that a
    row of ``size + dilation`` elements starts every window one dilation further on.
    """
    n = len(kernel)
    lead, sizes = self.shape[:-n], self.shape[-n:]
    outs = tuple(_out_size(i, k, s, d) for i, k, s, d in zip(sizes, kernel, stride, dilation))
    if any(o <= 0 for o in outs):
        raise ConvArgumentError(
            f"the window {kernel} (dilation {dilation}) is larger than the padded input {sizes}: no output"
        )
    nl = len(lead)
    if all(k <= s for k, s in zip(kernel, stride)) and all(d == 1 for d in dilation):
        x = self.pad([None] * nl + [(0, max(0, o * s - i)) for o, s, i in zip(outs, stride, sizes)])
        x = x.shrink([None] * nl + [(0, o * s) for o, s in zip(outs, stride)])
        x = x.reshape(lead + tuple(v for o, s in zip(outs, stride) for v in (o, s)))
        x = x.shrink([None] * nl + [r for o, k in zip(outs, kernel) for r in ((0, o), (0, k))])
    else:
        reps = tuple(math.ceil(k * (i + d) / i) for k, i, d in zip(kernel, sizes, dilation))
        x = self.reshape(lead + tuple(v for i in sizes for v in (1, i)))
        x = x.expand(lead + tuple(v for e, i in zip(reps, sizes) for v in (e, i)))
        x = x.reshape(lead + tuple(e * i for e, i in zip(reps, sizes)))
        x = x.shrink([None] * nl + [(0, k * (i + d)) for k, i, d in zip(kernel, sizes, dilation)])
        x = x.reshape(lead + tuple(v for k, i, d in zip(kernel, sizes, dilation) for v in (k, i + d)))
        x = x.shrink([None] * nl + [r for k, o, s in zip(kernel, outs, stride) for r in ((0, k), (0, (o - 1) * s + 1))])
        x = x._stride((1,) * nl + tuple(v for s in stride for v in (1, s)))
        x = x.permute(tuple(range(nl)) + tuple(nl + 2 * j + 1 for j in range(n)) + tuple(nl + 2 * j for j in range(n)))
        return x
    return x.permute(tuple(range(nl)) + tuple(nl + 2 * j for j in range(n)) + tuple(nl + 2 * j + 1 for j in range(n)))


def _conv(
    self: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: IntOrSeq,
    padding: IntOrSeq | Sequence[tuple[int, int]],
    dilation: IntOrSeq,
    groups: int,
    n: int,
) -> Tensor:
    name = f"conv{n}d"
    if self.ndim != n + 2:
        raise ConvArgumentError(f"{name} needs an input of shape (N, C, {n} spatial dims), got {self.shape}")
    if weight.ndim != n + 2:
        raise ConvArgumentError(
            f"{name} needs a weight of shape (C_out, C_in/groups, {n} kernel dims), got {weight.shape}"
        )
    self._same_device(weight)
    groups = int_arg(groups, "groups")
    bs, cin = self.shape[:2]
    cout, wcin = weight.shape[:2]
    if groups < 1 or cin % groups or cout % groups:
        raise ConvArgumentError(
            f"{name}: groups={groups} must divide the input channels {cin} and output channels {cout}"
        )
    if wcin * groups != cin:
        raise ConvArgumentError(
            f"{name}: the weight {weight.shape} takes {wcin} channels per group, the input has {cin} channels "
            f"in {groups} group(s) ({cin // groups} each)"
        )
    if bias is not None and bias.shape != (cout,):
        raise ConvArgumentError(f"{name}: bias must have shape ({cout},), got {bias.shape}")
    s, d = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
    if any(v < 1 for v in s + d):
        raise ConvArgumentError(f"{name}: stride and dilation must be >= 1, got stride={s}, dilation={d}")
    ks = weight.shape[2:]
    dt = result_dtype(self.device, self.dtype, weight.dtype)
    if not dtypes.is_float(dt):
        dt = dtypes.default_float
    x = self.cast(dt).pad([None, None, *_padding(padding, n)])
    x = x._pool(ks, s, d)  # (N, C, *out, *kernel)
    outs = x.shape[2 : 2 + n]
    rc = cout // groups
    x = x.reshape((bs, groups, wcin, 1) + outs + ks).expand((bs, groups, wcin, rc) + outs + ks)
    x = x.permute((0, 1, 3) + tuple(range(4, 4 + n)) + (2,) + tuple(range(4 + n, 4 + 2 * n)))
    w = weight.cast(dt).reshape((1, groups, rc) + (1,) * n + (wcin,) + ks)
    out = (x * w).sum(tuple(range(-1 - n, 0))).reshape((bs, cout) + outs)
    return out if bias is None else out + bias.cast(dt).reshape((1, cout) + (1,) * n)


def conv2d(
    self: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: IntOrSeq | Sequence[tuple[int, int]] = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation like ``torch.nn.functional.conv2d``: input (N, C, H, W), weight
    (C_out, C/groups, kH, kW); ``padding`` is an int, one per dim, or one (before, after) per dim."""
    return _conv(self, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(
    self: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: IntOrSeq | Sequence[tuple[int, int]] = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
) -> Tensor:
    """1-D cross-correlation like ``torch.nn.functional.conv1d``: input (N, C, L), weight (C_out, C/groups, K)."""
    return _conv(self, weight, bias, stride, padding, dilation, groups, 1)


def _pool_args(
    self: Tensor,
    name: str,
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None,
    padding: IntOrSeq,
    dilation: IntOrSeq,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
    if self.ndim < 2:
        raise ConvArgumentError(f"{name} pools the last two dims, the input has shape {self.shape}")
    k = _tuple(kernel_size, 2, "kernel_size")
    s = k if stride is None else _tuple(stride, 2, "stride")
    p = _tuple(padding, 2, "padding")
    d = _tuple(dilation, 2, "dilation")
    if any(v < 1 for v in k + s + d):
        raise ConvArgumentError(f"{name}: kernel_size, stride and dilation must be >= 1, got {k}, {s}, {d}")
    if any(2 * pp > kk for pp, kk in zip(p, k)):
        raise ConvArgumentError(f"{name}: padding {p} must be at most half the kernel {k} (as in torch)")
    return k, s, tuple((pp, pp) for pp in p), d


def max_pool2d(
    self: Tensor,
    kernel_size: IntOrSeq = 2,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
) -> Tensor:
    """The maximum of each window of the last two dims (``stride`` defaults to the kernel, as in torch);
    padding never wins (it is -inf)."""
    k, s, p, d = _pool_args(self, "max_pool2d", kernel_size, stride, padding, dilation)
    lead = [None] * (self.ndim - 2)
    fill = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    x = self.pad([*lead, *p], value=fill) if any(pp != (0, 0) for pp in p) else self
    return x._pool(k, s, d).max((-2, -1))


def avg_pool2d(
    self: Tensor,
    kernel_size: IntOrSeq = 2,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    count_include_pad: bool = True,
) -> Tensor:
    """The mean of each window of the last two dims (``stride`` defaults to the kernel); with
    ``count_include_pad=False`` a window divides by its cells inside the input, as in torch."""
    k, s, p, d = _pool_args(self, "avg_pool2d", kernel_size, stride, padding, 1)
    lead = [None] * (self.ndim - 2)
    x = self._float().pad([*lead, *p])
    total = x._pool(k, s, d).sum((-2, -1))
    if count_include_pad or all(pp == (0, 0) for pp in p):
        return total / math.prod(k)
    ones = type(self).ones(*self.shape[-2:], device=self.device).pad(list(p))
    return total / ones._pool(k, s, d).sum((-2, -1))
