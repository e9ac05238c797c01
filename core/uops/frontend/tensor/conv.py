"""Convolution and pooling as window reductions: pad, view every output's window with movement
ops, then one reduce.

Why no im2col: the windows are index math (views), so a convolution is one fused kernel per
output — the product of the windowed input and the broadcast weight, summed over channels and
kernel positions — which the optimizer tiles like any other reduce. A padded input is first
copied padded (a load through the padding's mask costs more than the copy). The gradient is not
derived through the windows (that is a scatter of every window back onto the input): a
convolution is marked as one op (``autograd.composite``) whose rule gives the input's gradient
as a transposed convolution (again one window reduction) and the weight's as a reduction of the
input's windows times the output's gradient.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uops.dtypes import dtypes
from uops.errors import UopsError
from uops.ir.ops import GroupOp, Ops
from uops.ir.uop import UOp

from ..autograd import COMPOSITE, GRAD_ENABLED, composite
from ..schedule import realized
from .args import int_arg, result_dtype

if TYPE_CHECKING:
    from . import Tensor

IntOrSeq = int | Sequence[int]
#: an int, one per spatial dim, one (before, after) pair per dim, or torch's 'same' / 'valid'
Padding = IntOrSeq | Sequence[tuple[int, int]] | str


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


def _named_padding(
    padding: str, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...], name: str
) -> tuple[tuple[int, int], ...]:
    """torch's ``'valid'`` (none) and ``'same'`` (output size = input size: ``dilation * (k - 1)`` in all, the odd
    one after, as torch pads an even kernel); 'same' with a stride cannot keep the size and is refused, as in torch."""
    if padding == "valid":
        return tuple((0, 0) for _ in kernel)
    if padding != "same":
        raise ConvArgumentError(f"{name}: padding must be an int, a sequence, 'same' or 'valid', got {padding!r}")
    if any(v != 1 for v in stride):
        raise ConvArgumentError(
            f"{name}: padding='same' needs stride 1 (an output the input's size), got stride={stride}; "
            "pad explicitly for a strided convolution"
        )
    total = tuple(dd * (k - 1) for k, dd in zip(kernel, dilation))
    return tuple((t // 2, t - t // 2) for t in total)


def _ceil_extra(size: int, k: int, s: int, p: int, d: int) -> int:
    """Cells ``ceil_mode`` adds after the padded input so the last partial window counts (torch's rule: a window
    must start inside the input or its left padding)."""
    span = size + 2 * p - d * (k - 1) - 1
    if span < 0:
        return 0
    out = -(-span // s) + 1
    if (out - 1) * s >= size + p:
        out -= 1
    return max(0, (out - 1) * s + d * (k - 1) + 1 - (size + 2 * p))


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
    padding: Padding,
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
    pads = _named_padding(padding, ks, s, d, name) if isinstance(padding, str) else _padding(padding, n)
    dt = result_dtype(self.device, self.dtype, weight.dtype)
    if not dtypes.is_float(dt):
        dt = dtypes.default_float
    x, w = self.cast(dt), weight.cast(dt)
    b = None if bias is None else bias.cast(dt)
    out = _correlate(x, w, s, pads, d, groups)
    if b is not None:
        out = out + b.reshape((1, cout) + (1,) * n)
    ins = (x, w) if b is None else (x, w, b)
    if any(t.requires_grad for t in ins) and GRAD_ENABLED[0]:
        out = x._new(composite(out.uop, tuple(t.uop for t in ins), "conv", (s, pads, d, groups, self.device)), *ins[1:])
    return out


def _correlate(
    x: Tensor,
    w: Tensor,
    stride: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
    dilation: tuple[int, ...],
    groups: int,
) -> Tensor:
    """The convolution's kernel: one window reduction. A padded input is copied padded first, so the reduction
    reads plain memory: a load through the padding's mask costs more (3-4x on a 3x3 conv) than the copy."""
    n = len(stride)
    ks = w.shape[2:]
    bs = x.shape[0]
    cout, wcin = w.shape[:2]
    padded = _padded(x.shape[2:], pads)
    outs = tuple(p - dd * (k - 1) for p, dd, k in zip(padded, dilation, ks))
    if _flat(stride, padded, outs):
        return _correlate_flat(x, w, pads, dilation, groups)
    if any(p != (0, 0) for p in pads):
        x = x.pad([None, None, *pads]).contiguous()
    x = x._pool(ks, stride, dilation)  # (N, C, *out, *kernel)
    outs = x.shape[2 : 2 + n]
    rc = cout // groups
    x = x.reshape((bs, groups, wcin, 1) + outs + ks).expand((bs, groups, wcin, rc) + outs + ks)
    x = x.permute((0, 1, 3) + tuple(range(4, 4 + n)) + (2,) + tuple(range(4 + n, 4 + 2 * n)))
    wv = w.reshape((1, groups, rc) + (1,) * n + (wcin,) + ks)
    return (x * wv).sum(tuple(range(-1 - n, 0))).reshape((bs, cout) + outs)


#: the share of extra positions (the padding's, computed and dropped) up to which a stride-1 2-D convolution takes
#: the flattened form of ``_correlate_flat``. Timed on the shared 2-core EPYC (best of alternating rounds): the conv
#: bench 8x64x56x56 (1.07) forward kernel 115 -> 88 ms; the digits CNN's 8x8 and 4x4 images padded by 1 (1.56,
#: 2.25) train at 340-350 steps/s against 316 in the 4-D form. Tiny images (2x2 padded: 4) keep the 4-D form.
FLAT_MAX_WASTE = 2.5


def _padded(sizes: tuple[int, ...], pads: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """The spatial sizes after (before, after) padding."""
    return tuple(i + b + a for i, (b, a) in zip(sizes, pads))


def _flat(stride: tuple[int, ...], padded: tuple[int, ...], outs: tuple[int, ...]) -> bool:
    """Whether a convolution (of ``padded`` images to ``outs``) takes the flattened form of ``_correlate_flat``."""
    return (
        len(stride) == 2
        and all(v == 1 for v in stride)
        and all(o > 0 for o in outs)
        and math.prod(padded) <= FLAT_MAX_WASTE * math.prod(outs)
    )


def _flat_windows(
    x: Tensor, wshape: tuple[int, ...], pads: tuple[tuple[int, int], ...], dilation: tuple[int, ...], groups: int
) -> Tensor:
    """The windows of the flattened form: the input copied padded as (C, N * Hp * Wp) rows (plus the last window's
    reach), viewed as (groups, out channels per group, in channels per group, kH, kW, positions), where position
    ``p`` of the flattened padded images reads ``row[c, p + kh * Wp + kw]`` (an affine index, no copy)."""
    from uops.frontend.view import ShapeTracker, View

    bs, cin = x.shape[:2]
    cout, wcin, kh, kw = wshape
    (dh, dw), rc = dilation, cout // groups
    hp, wp = _padded(x.shape[2:], pads)
    rows, tail = bs * hp * wp, -(-(dh * (kh - 1) * wp + dw * (kw - 1)) // wp) * wp  # the tail in whole rows
    # copied as (C, image rows, Wp): a kernel with a row axis, whose index math runs once per row, not per element
    xt = x.permute((1, 0, 2, 3)).pad([None, None, *pads]).reshape((cin, bs * hp, wp))
    xt = xt.pad([None, (0, tail // wp), None]).contiguous()
    shape = (groups, rc, wcin, kh, kw, rows)
    strides = (wcin * (rows + tail), 0, rows + tail, dh * wp, dw, 1)
    return xt._view(lambda st: ShapeTracker((View.create(shape, strides),)))


def _correlate_flat(
    x: Tensor, w: Tensor, pads: tuple[tuple[int, int], ...], dilation: tuple[int, ...], groups: int
) -> Tensor:
    """A stride-1 2-D convolution as one matrix-like product over ``_flat_windows``: the kernel has two output axes
    (out channels, positions) and the optimizer tiles it like a matmul (a register tile with the positions
    vectorized); positions in the padding are computed and dropped.

    Why not the 4-D form: its batch, channel and row axes all take register lanes and the columns get none."""
    bs = x.shape[0]
    cout, wcin, kh, kw = w.shape
    hp, wp = _padded(x.shape[2:], pads)
    ho, wo = hp - dilation[0] * (kh - 1), wp - dilation[1] * (kw - 1)
    win = _flat_windows(x, w.shape, pads, dilation, groups)
    out = (win * w.reshape((groups, cout // groups, wcin, kh, kw, 1))).sum((2, 3, 4))  # (groups, rc, positions)
    # a kernel of its own: a reader's layout (NCHW) pushed into it would bring back the 4-D form
    rows = bs * hp * wp
    out = out.reshape((cout, rows)).contiguous().reshape((cout, bs, hp, wp)).shrink([None, None, (0, ho), (0, wo)])
    return out.permute((1, 0, 2, 3))


def _weight_grad_flat(
    x: Tensor,
    gy: Tensor,
    wshape: tuple[int, ...],
    pads: tuple[tuple[int, int], ...],
    dilation: tuple[int, ...],
    groups: int,
) -> Tensor:
    """The weight's gradient of a convolution in the flattened form: the windows of ``_flat_windows`` times the
    output's gradient laid out as (positions of the flattened padded images, channels), zeros where the forward
    dropped a position, summed over the positions.

    Why channels last: the sum is then a matmul whose streamed operand is contiguous along the output channels, so
    the optimizer vectorizes them with the windows broadcast, as in the forward (on 8x64x56x56, 3x3: 220 GFLOP/s,
    against 176 with the positions in the vector lanes, whose eight streams per tile wait on the caches)."""
    bs, cout, ho, wo = gy.shape
    _, wcin, kh, kw = wshape
    hp, wp = _padded(x.shape[2:], pads)
    rows, rc = bs * hp * wp, cout // groups
    gt = gy.permute((0, 2, 3, 1)).pad([None, (0, hp - ho), (0, wp - wo), None]).contiguous().reshape((rows, cout))
    gt = gt.reshape((rows, groups, rc)).permute((1, 2, 0)).reshape((groups, 1, 1, 1, rc, rows))
    win = _flat_windows(x, wshape, pads, dilation, groups).permute((0, 2, 3, 4, 1, 5))  # (groups, wcin, kh, kw, rc, P)
    gw = (win * gt).sum(5)  # (groups, wcin, kh, kw, rc)
    return gw.permute((0, 4, 1, 2, 3)).reshape(wshape)


def _cheap(u: UOp) -> bool:
    """Whether a lazy value costs each of its readers less to compute again than to be written once and read back:
    elementwise over one buffer at most (a gradient scaled or cast), no reduction, gather or copy in it."""
    buffers = 0
    for n in u.toposort(gate=lambda n: n.op is not Ops.BUFFER and n not in realized):
        if n.op is Ops.BUFFER or n in realized:
            buffers += 1
        elif n.op not in GroupOp.ALU and n.op not in (Ops.CONST, Ops.VIEW, Ops.CAST, Ops.BITCAST):
            return False
    return buffers <= 1


def _conv_grad(ret: UOp, g: UOp) -> tuple[UOp | None, ...]:
    """The input's gradient is a transposed convolution (the output's gradient spread by the stride, padded by the
    kernel's reach, correlated with the flipped, transposed weight: one window reduction, no scatter); the
    weight's is the correlation of the padded input with that gradient, summed over the batch and positions; the
    bias's sums that gradient. Every one of them reads the output's gradient: it is written to a buffer first
    unless it is cheap to compute again (``_cheap``)."""
    from . import Tensor

    stride, pads, dil, groups, device = ret.arg.move[1][1]
    x = Tensor._untracked(ret.src[1], device)
    w = Tensor._untracked(ret.src[2], device)
    n = len(stride)
    ks, (bs, cin), (cout, wcin) = w.shape[2:], x.shape[:2], w.shape[:2]
    rc = cout // groups
    gy = Tensor._untracked(g, device)
    outs = gy.shape[2:]
    padded = _padded(x.shape[2:], pads)
    if not _cheap(g):
        gy = gy.contiguous()  # read by the weight's and the input's gradients (and the bias's): computed once
    if _flat(stride, padded, outs):
        gw = _weight_grad_flat(x, gy, w.shape, pads, dil, groups)
    else:
        xp = x.pad([None, None, *pads]).contiguous() if any(p != (0, 0) for p in pads) else x
        win = xp._pool(ks, stride, dil).reshape((bs, groups, 1, wcin) + outs + ks)
        gw = (win * gy.reshape((bs, groups, rc, 1) + outs + (1,) * n)).sum((0,) + tuple(range(4, 4 + n)))
        gw = gw.reshape(w.shape)
    spread = gy
    if any(v > 1 for v in stride):  # the stride's skipped cells get zeros
        spread = spread.reshape((bs, cout) + tuple(v for o in outs for v in (o, 1)))
        spread = spread.pad([None, None] + [p for v in stride for p in (None, (0, v - 1))])
        spread = spread.reshape((bs, cout) + tuple(o * v for o, v in zip(outs, stride)))
        spread = spread.shrink([None, None] + [(0, (o - 1) * v + 1) for o, v in zip(outs, stride)])
    reach = tuple(dd * (k - 1) for dd, k in zip(dil, ks))
    wt = w.reshape((groups, rc, wcin) + ks).permute((0, 2, 1) + tuple(range(3, 3 + n)))
    wt = wt.reshape((cin, rc) + ks).flip(tuple(range(2, 2 + n)))
    # only the input's cells: the spread padded so the first window ends at the first input cell; cells after the
    # last one a window read get zeros from the padding
    around = tuple((r - b, i + b - q) for r, (b, _), i, q in zip(reach, pads, x.shape[2:], spread.shape[2:]))
    if all(b >= 0 and a >= 0 for b, a in around):
        gx = _correlate(spread, wt, (1,) * n, around, dil, groups)
    else:  # padding beyond the kernel's reach: the padded input's gradient, then the input's part of it
        gxp = _correlate(spread, wt, (1,) * n, tuple((r, r) for r in reach), dil, groups)
        gxp = gxp.pad([None, None] + [(0, max(0, p - q)) for p, q in zip(padded, gxp.shape[2:])])
        gx = gxp.shrink([None, None] + [(b, b + i) for i, (b, _) in zip(x.shape[2:], pads)])
    if len(ret.src) == 3:
        return gx.uop, gw.uop
    return gx.uop, gw.uop, gy.sum((0,) + tuple(range(2, 2 + n))).uop


COMPOSITE["conv"] = _conv_grad


def conv2d(
    self: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
) -> Tensor:
    """2-D cross-correlation like ``torch.nn.functional.conv2d``: input (N, C, H, W), weight
    (C_out, C/groups, kH, kW); ``padding`` is an int, one per dim, one (before, after) per dim, or torch's
    ``'same'`` / ``'valid'``."""
    return _conv(self, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(
    self: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
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
    ceil_mode: bool,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...], tuple[int, ...]]:
    """kernel, stride, (before, after) padding, dilation, and the cells ``ceil_mode`` adds after the padding."""
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
    sizes = self.shape[-2:]
    extra = tuple(_ceil_extra(i, kk, ss, pp, dd) if ceil_mode else 0 for i, kk, ss, pp, dd in zip(sizes, k, s, p, d))
    return k, s, tuple((pp, pp) for pp in p), d, extra


def max_pool2d(
    self: Tensor,
    kernel_size: IntOrSeq = 2,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
) -> Tensor:
    """The maximum of each window of the last two dims (``stride`` defaults to the kernel, as in torch);
    padding never wins (it is -inf). ``ceil_mode`` keeps a last window that hangs over the end, as torch does."""
    k, s, p, d, extra = _pool_args(self, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode)
    lead = [None] * (self.ndim - 2)
    fill = -math.inf if dtypes.is_float(self.dtype) else dtypes.min(self.dtype)
    pads = [(b, a + e) for (b, a), e in zip(p, extra)]
    x = self.pad([*lead, *pads], value=fill) if any(pp != (0, 0) for pp in pads) else self
    return x._pool(k, s, d).max((-2, -1))


def avg_pool2d(
    self: Tensor,
    kernel_size: IntOrSeq = 2,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    count_include_pad: bool = True,
    ceil_mode: bool = False,
) -> Tensor:
    """The mean of each window of the last two dims (``stride`` defaults to the kernel); with
    ``count_include_pad=False`` a window divides by its cells inside the input, as in torch. Under ``ceil_mode``
    a last window hanging over the end divides by its cells inside the padded input (torch's rule)."""
    k, s, p, d, extra = _pool_args(self, "avg_pool2d", kernel_size, stride, padding, 1, ceil_mode)
    lead = [None] * (self.ndim - 2)
    pads = [(b, a + e) for (b, a), e in zip(p, extra)]
    total = self._float().pad([*lead, *pads])._pool(k, s, d).sum((-2, -1))
    if all(e == 0 for e in extra) and (count_include_pad or all(pp == (0, 0) for pp in p)):
        return total / math.prod(k)
    ones = type(self).ones(*self.shape[-2:], device=self.device)
    if count_include_pad:
        ones = ones.pad(list(p), value=1)
    ones = ones.pad([(0, e) if count_include_pad else (b, a + e) for (b, a), e in zip(p, extra)])
    return total / ones._pool(k, s, d).sum((-2, -1))
