"""A row's reductions in one kernel: softmax, log_softmax, layernorm and RMS norm read each row once.

On a CPU-style device the scheduler fuses a row's chain of reductions (max then sum, mean then variance) into
the kernel that reads them, and the heuristics walk the row's outputs in an INNER loop after the reduction
passes. Results are checked against numpy on every device (GPU-style ones keep a kernel per pass), the kernel
counts and the fallbacks (a strided row, a row too long to fuse) on CPU, and the gradients through the fused
kernels against their closed forms.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uops import Ops, Tensor, dtypes
from uops.codegen.heuristics import hand_coded_opts
from uops.codegen.opt import OptOps, reduce_axes
from uops.codegen.program import get_program
from uops.frontend.schedule import ROW_FUSE_MAX, SPLIT_THRESHOLD
from uops.nn.attention import rms_norm
from uops.nn.layers import LayerNorm
from uops.plugins import Device
from uops.testing import devices_from_env
from uops.testing.kit.helpers import supports_dtype

RNG = np.random.default_rng(30)
needs_cpu = pytest.mark.skipif("CPU" not in devices_from_env(), reason="the row fusion is for CPU-style devices")


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def np_layernorm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)


def layernorm(x: Tensor, eps: float = 1e-5) -> Tensor:
    m = x.mean(axis=-1, keepdim=True)
    return (x - m) / (((x - m) * (x - m)).mean(axis=-1, keepdim=True) + eps).sqrt()


#: name -> (uops function, numpy reference in float64)
CASES: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "softmax": (lambda t: t.softmax(-1), np_softmax),
    "log_softmax": (lambda t: t.log_softmax(-1), lambda x: np.log(np_softmax(x))),
    "layernorm": (layernorm, np_layernorm),
    "rms_norm": (rms_norm, lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)),
    "logsumexp": (lambda t: t.logsumexp(-1), lambda x: np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1))
                  + x.max(-1)),
}  # fmt: skip


def n_kernels(t: Tensor) -> int:
    return sum(1 for it in t.schedule() if it.kind == "kernel")


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("shape", [(7, 13), (1, 1), (3, 1), (1, 9), (2, 3, 7), (16, 300)])
def test_rows_match_numpy(device, name, shape):
    fn, ref = CASES[name]
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    got = fn(Tensor(x, device=device)).numpy()
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_rows_in_float16(device, name):
    if not supports_dtype(device, dtypes.float16):
        pytest.skip(f"{device} does not support float16")
    fn, ref = CASES[name]
    x = RNG.standard_normal((5, 40)).astype(np.float16)
    got = fn(Tensor(x, device=device)).numpy()
    np.testing.assert_allclose(got.astype(np.float64), ref(x.astype(np.float64)), rtol=2e-2, atol=2e-3)


@needs_cpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_row_is_one_kernel_on_cpu(name):
    fn, ref = CASES[name]
    x = RNG.standard_normal((64, 1000)).astype(np.float32)
    out = fn(Tensor(x, device="CPU"))
    assert n_kernels(out) == 1
    np.testing.assert_allclose(out.numpy(), ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


@needs_cpu
def test_layernorm_layer_with_affine_is_one_kernel():
    x = RNG.standard_normal((8, 96)).astype(np.float32)
    w, b = RNG.standard_normal(96).astype(np.float32), RNG.standard_normal(96).astype(np.float32)
    ln = LayerNorm(96, device="CPU")
    ln.weight, ln.bias = Tensor(w, device="CPU"), Tensor(b, device="CPU")
    out = ln(Tensor(x, device="CPU"))
    assert n_kernels(out) == 1
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


@needs_cpu
def test_the_row_axis_is_an_inner_loop_after_the_reductions():
    """Without it every output element would redo its row's reductions: quadratic work per row."""
    (item,) = [it for it in Tensor(RNG.standard_normal((4, 500)).astype(np.float32)).softmax(-1).schedule()]
    opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
    assert opts[0].op is OptOps.INNER and opts[0].amount == 500


@needs_cpu
@pytest.mark.parametrize("opts", [None, []], ids=["default", "none"])
def test_every_pass_over_the_row_is_one_loop_inside_the_row_loop(opts):
    """Even with no opts (a search's first candidate) the lowering adds the row loop: loops nest two deep."""
    dev = Device["CPU"]
    x = RNG.standard_normal((4, 500)).astype(np.float32)
    (item,) = Tensor(x, device="CPU").softmax(-1).schedule()
    spec = get_program(item.ast, dev.renderer, dev.compiler, opts)
    depth = deepest = 0
    passes = []
    for u in spec.uops:
        depth += 1 if u.op is Ops.RANGE else -1 if u.op is Ops.END else 0
        deepest = max(deepest, depth)
        if u.op is Ops.RANGE and depth == 2:
            passes.append(u)
    assert deepest == 2
    assert len(passes) == 3  # max, sum of exp, the stores


@needs_cpu
@pytest.mark.parametrize(
    "why, fn, shape",
    [
        ("a strided row", lambda t: t.softmax(0), (300, 64)),
        ("a transposed input", lambda t: t.T.softmax(-1), (300, 64)),
        ("a row too long to fuse", lambda t: t.softmax(-1), (2, ROW_FUSE_MAX + 16)),
        ("a row split in two stages", lambda t: t.softmax(-1), (2, SPLIT_THRESHOLD + 16)),
    ],
)
def test_rows_that_do_not_fuse_keep_a_kernel_per_pass(why, fn, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    out = fn(Tensor(x, device="CPU"))
    assert n_kernels(out) >= 3, why
    want = np_softmax(x.T.astype(np.float64), -1) if "transposed" in why else None
    if want is None:
        want = np_softmax(x.astype(np.float64), 0 if "strided" in why else -1)
    np.testing.assert_allclose(out.numpy(), want, rtol=2e-5, atol=1e-7)


@needs_cpu
def test_row_and_column_broadcasts_in_one_expression():
    """Reductions over two different axes cannot both be per row: one of them stays a buffer."""
    x = RNG.standard_normal((33, 17)).astype(np.float32)
    t = Tensor(x, device="CPU")
    out = t - t.max(1, keepdim=True) - t.max(0, keepdim=True)
    assert n_kernels(out) == 2
    np.testing.assert_allclose(out.numpy(), x - x.max(1, keepdims=True) - x.max(0, keepdims=True), rtol=1e-6)


@needs_cpu
def test_a_reduction_over_fused_rows():
    """A kernel whose output is itself a reduction over the row (cross entropy) reads the row's max and sum."""
    x = RNG.standard_normal((6, 50)).astype(np.float32)
    y = RNG.integers(0, 50, 6).astype(np.int32)
    got = Tensor(x, device="CPU").cross_entropy(Tensor(y, device="CPU"), reduction="none")
    lp = np.log(np_softmax(x.astype(np.float64)))
    np.testing.assert_allclose(got.numpy(), -lp[np.arange(6), y], rtol=1e-5)


@needs_cpu
def test_softmax_gradient_through_the_fused_kernel():
    x = RNG.standard_normal((9, 40))
    w = RNG.standard_normal((9, 40))
    t = Tensor(x, device="CPU", requires_grad=True)
    (g,) = (t.softmax(-1) * Tensor(w, device="CPU")).sum().gradient(t)
    assert n_kernels(g) == 1
    s = np_softmax(x)
    np.testing.assert_allclose(g.numpy(), s * (w - (s * w).sum(-1, keepdims=True)), rtol=1e-9, atol=1e-12)


@needs_cpu
def test_layernorm_gradient_through_the_fused_kernel():
    x = RNG.standard_normal((9, 40))
    w = RNG.standard_normal((9, 40))
    t = Tensor(x, device="CPU", requires_grad=True)
    (g,) = (layernorm(t) * Tensor(w, device="CPU")).sum().gradient(t)
    assert n_kernels(g) == 1
    xhat, inv = np_layernorm(x), 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    want = inv * (w - w.mean(-1, keepdims=True) - xhat * (w * xhat).mean(-1, keepdims=True))
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-9, atol=1e-12)


@needs_cpu
def test_each_pass_of_a_fused_gradient_gets_its_own_unrolled_accumulators():
    """A row's passes run one after another, so their UNROLL lanes do not multiply toward the lane limit."""
    t = Tensor(RNG.standard_normal((8, 1024)).astype(np.float32), device="CPU", requires_grad=True)
    (g,) = (t.softmax(-1) * Tensor(RNG.standard_normal((8, 1024)).astype(np.float32), device="CPU")).sum().gradient(t)
    (item,) = g.schedule()
    n_reduce_axes = len({r for u in item.ast.toposort() if u.op is Ops.REDUCE for r in u.src[1:]})
    opts = hand_coded_opts(item.ast, Device["CPU"].renderer)
    assert n_reduce_axes >= 3
    assert sum(1 for o in opts if o.op is OptOps.UNROLL) == n_reduce_axes


@needs_cpu
@pytest.mark.parametrize("vector_bytes", [32, 64])
def test_a_pass_with_cheap_steps_keeps_two_vectors_of_accumulators(vector_bytes):
    """A fused row's later passes read the row from L1: a max or a sum of plain arithmetic is limited by its
    accumulator chain and gets two vectors of lanes; a pass that computes an exp keeps the one-vector unroll."""
    from uops_cpu_clang.renderer import ClangRenderer

    ren = ClangRenderer(Device["CPU"].renderer.target, vector_bytes=vector_bytes)
    two = 2 * vector_bytes // 4
    x = Tensor(RNG.standard_normal((64, 2048)).astype(np.float32), device="CPU")

    def unrolls(t: Tensor) -> list[tuple[Ops, int]]:
        """(reduce op, UNROLL amount) of each reduce axis of ``t``'s one kernel, in axis order."""
        (item,) = t.schedule()
        amounts = {o.axis: o.amount for o in hand_coded_opts(item.ast, ren) if o.op is OptOps.UNROLL}
        op_of = {r: u.arg for u in item.ast.toposort() if u.op is Ops.REDUCE for r in u.src[1:]}
        return [(op_of[r], amounts.get(i, 1)) for i, r in enumerate(reduce_axes(item.ast))]

    assert unrolls(layernorm(x)) == [(Ops.ADD, two), (Ops.ADD, two)]
    assert sorted(unrolls(x.softmax(-1)), key=str) == sorted([(Ops.MAX, two), (Ops.ADD, 16)], key=str)
    np.testing.assert_allclose(layernorm(x).numpy(), np_layernorm(x.numpy().astype(np.float64)), rtol=1e-4, atol=1e-4)
