"""Autograd: every derivative rule against central finite differences in float64, the API
(backward, gradient, accumulation, detach, no_grad) and its errors, and the same gradient graphs
on the emulated GPU devices against CPU.

A check compares the gradient's projection on a random direction with the central difference of
the loss along it (two directions per input): as strong as a full Jacobian check for a wrong rule,
at four evaluations per input instead of two per element.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uops import Tensor, UopsError, dtypes
from uops.frontend.autograd import AutogradError, NonDifferentiableError

F64 = "float64"
GRAD_DEVICES = ["PYTHON", "CPU"]
EPS = 1e-6


def _loss(fn: Callable[..., Tensor], arrays: list[np.ndarray], weight: np.ndarray | None, device: str) -> Tensor:
    ts = [Tensor(a, device=device, dtype=F64, requires_grad=True) for a in arrays]
    out = fn(*ts)
    w = Tensor(weight, device=device, dtype=F64) if weight is not None else None
    return (out * w).sum() if w is not None else out.sum(), ts  # type: ignore[return-value]


def check_grad(fn: Callable[..., Tensor], arrays: list[np.ndarray], device: str, rtol: float = 1e-5) -> None:
    rng = np.random.default_rng(1)
    probe = fn(*[Tensor(a, device=device, dtype=F64) for a in arrays])
    weight = rng.standard_normal(probe.shape) if probe.shape else None
    loss, ts = _loss(fn, arrays, weight, device)
    grads = [g.numpy() for g in loss.gradient(*ts)]
    for i, (a, g) in enumerate(zip(arrays, grads)):
        assert g.shape == a.shape
        for _ in range(2):
            v = rng.standard_normal(a.shape)
            hi = [x + EPS * v if j == i else x for j, x in enumerate(arrays)]
            lo = [x - EPS * v if j == i else x for j, x in enumerate(arrays)]
            num = (_loss(fn, hi, weight, device)[0].item() - _loss(fn, lo, weight, device)[0].item()) / (2 * EPS)
            ana = float((g * v).sum())
            assert ana == pytest.approx(num, rel=rtol, abs=1e-6), f"input {i}: analytic {ana}, numeric {num}"


def _r(*shape: int, lo: float = -2.0, hi: float = 2.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).uniform(lo, hi, shape)


def _pos(*shape: int, seed: int = 0) -> np.ndarray:
    return _r(*shape, lo=0.5, hi=2.0, seed=seed)


CASES: dict[str, tuple[Callable[..., Tensor], list[np.ndarray]]] = {
    "add_broadcast": (lambda a, b: a + b, [_r(3, 1, 4), _r(5, 4, seed=1)]),
    "sub": (lambda a, b: a - b, [_r(2, 3), _r(3, seed=1)]),
    "mul": (lambda a, b: a * b, [_r(4, 3), _r(4, 1, seed=1)]),
    "div": (lambda a, b: a / b, [_r(3, 5), _pos(5, seed=1)]),
    "rdiv_scalar": (lambda a: 2.0 / a, [_pos(7)]),
    "maximum": (lambda a, b: a.maximum(b), [_r(3, 4), _r(3, 4, seed=1)]),
    "minimum": (lambda a, b: a.minimum(b), [_r(3, 4), _r(4, seed=1)]),
    "where": (lambda a, b: (a > 0).where(a * 3.0, b), [_r(5, 3), _r(5, 3, seed=1)]),
    "pow": (lambda a, b: a**b, [_pos(3, 4), _r(3, 4, seed=1)]),
    "pow_int": (lambda a: a**3, [_r(6)]),
    "pow_half": (lambda a: a**0.5, [_pos(6)]),
    "rpow": (lambda a: 2.0**a, [_r(5)]),
    "exp": (lambda a: a.exp(), [_r(3, 3)]),
    "log": (lambda a: a.log(), [_pos(3, 3)]),
    "exp2_log2": (lambda a: a.exp2() + a.abs().log2(), [_pos(5)]),
    "sqrt": (lambda a: a.sqrt(), [_pos(7)]),
    "rsqrt": (lambda a: a.rsqrt(), [_pos(7)]),
    "reciprocal": (lambda a: a.reciprocal(), [_pos(4, 2)]),
    "sin_cos_tan": (lambda a: a.sin() + a.cos() * a.tan(), [_r(6, lo=-1.0, hi=1.0)]),
    "neg_abs_square": (lambda a: -a.abs() + a.square(), [_r(9)]),
    "clip": (lambda a: a.clip(-0.5, 0.7), [_r(11)]),
    "relu": (lambda a: a.relu(), [_r(4, 5)]),
    "sigmoid": (lambda a: a.sigmoid(), [_r(4, 5)]),
    "tanh": (lambda a: a.tanh(), [_r(4, 5)]),
    "gelu": (lambda a: a.gelu(), [_r(4, 5)]),
    "sum_axis": (lambda a: a.sum(1), [_r(3, 4, 5)]),
    "sum_all_keepdim": (lambda a: a.sum((0, 2), keepdim=True) * a, [_r(2, 3, 2)]),
    "mean_var_std": (lambda a: a.mean(0) + a.var(1).sum() + a.std(), [_r(4, 3)]),
    "max_axis": (lambda a: a.max(0), [_r(5, 3)]),
    "min_all": (lambda a: a.min(), [_r(7)]),
    "prod": (lambda a: a.prod(1), [_r(3, 4)]),
    "reshape_permute": (lambda a: a.reshape(4, 6).permute(1, 0) * 1.5, [_r(2, 3, 4)]),
    "expand": (lambda a: a.expand(3, 4, 5), [_r(4, 1)]),
    "pad_shrink": (lambda a: a.pad(((1, 2), (0, 3))).shrink(((0, 5), (2, 6))), [_r(3, 4)]),
    "pad_value": (lambda a: a.pad(((2, 1),), value=1.5) * 2.0, [_r(5)]),
    "flip": (lambda a: a.flip((0, 2)), [_r(2, 3, 4)]),
    "getitem_steps": (lambda a: a[1:, ::-2, ::3], [_r(3, 5, 7)]),
    "getitem_int_none": (lambda a: a[1, None, ..., 2:], [_r(3, 4, 5)]),
    "cat": (lambda a, b: a.cat(b, dim=1), [_r(2, 3), _r(2, 4, seed=1)]),
    "stack": (lambda a, b: Tensor.stack(a, b, dim=1), [_r(3, 2), _r(3, 2, seed=1)]),
    "matmul_odd": (lambda a, b: a @ b, [_r(3, 5), _r(5, 7, seed=1)]),
    "matmul_batched_broadcast": (lambda a, b: a @ b, [_r(2, 1, 3, 4), _r(3, 4, 2, seed=1)]),
    "matvec": (lambda a, b: a @ b, [_r(3, 4), _r(4, seed=1)]),
    "linear": (lambda x, w, b: x.linear(w, b), [_r(5, 3), _r(4, 3, seed=1), _r(4, seed=2)]),
    "softmax": (lambda a: a.softmax(-1), [_r(3, 5)]),
    "log_softmax": (lambda a: a.log_softmax(0), [_r(4, 3)]),
    "logsumexp": (lambda a: a.logsumexp(1), [_r(3, 6)]),
    "contiguous_transpose": (lambda a: a.T.contiguous() * a.T, [_r(3, 4)]),
    "gather": (lambda a: a.gather(1, Tensor(np.array([[2, 0, 2], [1, 1, 3], [3, 0, 0]]), device=a.device)), [_r(3, 4)]),
    "int_tensor_index": (lambda a: a[Tensor(np.array([2, 0, 2, -1]), device=a.device)] * 2.0, [_r(4, 3)]),
    "scatter_add": (
        lambda a, b: a.scatter_add(0, Tensor(np.array([[1, 0], [1, 2]]), device=a.device), b),
        [_r(3, 2), _r(2, 2, seed=1)],
    ),
    "masked_fill": (
        lambda a: a.masked_fill(Tensor(np.array([True, False, True]), device=a.device), 0.5) * a,
        [_r(2, 3)],
    ),
    "cumsum": (lambda a: a.cumsum(1) * a, [_r(2, 4)]),
    "mod": (lambda a: a % 0.7, [_r(8, lo=0.05, hi=0.6)]),
}


@pytest.mark.parametrize("device", GRAD_DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_matches_finite_differences(name: str, device: str) -> None:
    fn, arrays = CASES[name]
    check_grad(fn, arrays, device)


def test_cast_passes_gradient_in_the_source_dtype() -> None:
    x = Tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True)
    h = Tensor([0.5, 0.25, 2.0], dtype="float16", requires_grad=True)
    ((x.cast("float32") * 3.0).sum() + (h.cast("float32") ** 2).sum()).backward()
    assert x.grad.dtype == dtypes.float64 and h.grad.dtype == dtypes.float16
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(h.grad.numpy(), [1.0, 0.5, 4.0])


def test_max_reduction_splits_ties_evenly() -> None:
    x = Tensor([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 0.0]], dtype=F64, requires_grad=True)
    x.max(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])


def test_min_reduction_and_maximum_ties() -> None:
    x = Tensor([2.0, 1.0, 1.0], dtype=F64, requires_grad=True)
    y = Tensor([2.0, 0.0, 4.0], dtype=F64, requires_grad=True)
    (x.min() + x.maximum(y).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 0.5 + 1.0, 0.5])
    np.testing.assert_allclose(y.grad.numpy(), [0.5, 0.0, 1.0])


def test_prod_with_zeros() -> None:
    a = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 5.0]])
    x = Tensor(a, dtype=F64, requires_grad=True)
    x.prod(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 6, 0], [0, 0, 0], [10, 5, 2]])


def test_gradients_accumulate_until_reset() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])
    x.grad = None
    x.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0, 1.0])


def test_backward_fills_only_leaves_and_gradient_touches_nothing() -> None:
    w = Tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    x = Tensor([[1.0, 1.0]])
    h = x @ w
    assert h.requires_grad and not h.is_leaf and w.is_leaf and not x.requires_grad
    (gw,) = (h * h).sum().gradient(w)
    assert w.grad is None and x.grad is None
    np.testing.assert_allclose(gw.numpy(), 2 * np.array([[1.0], [1.0]]) @ (np.array([[1.0, 1.0]]) @ w.numpy()))
    (h * h).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), gw.numpy())
    assert h.grad is None and x.grad is None


def test_backward_with_gradient_argument() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).backward(np.array([1.0, -1.0], dtype=np.float32))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -4.0])


def test_gradient_of_intermediate_and_unused() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    u = Tensor([4.0], requires_grad=True)
    y = x.exp()
    gy, gu = (y * 2.0).sum().gradient(y, u)
    np.testing.assert_allclose(gy.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(gu.numpy(), [0.0])


def test_detach_and_no_grad_stop_gradients() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    (x * d).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 2.0])  # d is a constant
    with Tensor.no_grad():
        y = x * 5.0
    assert not y.requires_grad
    x.grad = None
    (x * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 10.0])
    with pytest.raises(AutogradError, match="does not require grad"):
        y.sum().backward()


def test_no_grad_update_of_a_leaf_keeps_it_a_leaf() -> None:
    import uops

    w = Tensor([1.0, -1.0], requires_grad=True)
    for _ in range(2):
        (w * w).sum().backward()
        with uops.no_grad():
            assert w.grad is not None
            w.assign(w - 0.25 * w.grad)
        w.grad = None
        w.realize()
    np.testing.assert_allclose(w.numpy(), [0.25, -0.25])
    (w * 2.0).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])


def test_realized_intermediate_keeps_its_gradient() -> None:
    x = Tensor([0.5, 1.5], requires_grad=True)
    h = (x * x).exp()
    h.numpy()  # realized: h is a buffer now
    z = h * 2.0
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.numpy() ** 2) * 2 * x.numpy(), rtol=1e-6)


def test_lazy_and_constant_leaves_are_distinct() -> None:
    a = Tensor.zeros(3).requires_grad_()
    b = Tensor.zeros(3).requires_grad_()
    (a * 2.0 + b * 3.0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [2.0] * 3)
    np.testing.assert_allclose(b.grad.numpy(), [3.0] * 3)


def test_errors_name_the_problem() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match=r"non-scalar tensor \(shape \(2,\)\)"):
        (x * 2.0).backward()
    with pytest.raises(AutogradError, match="does not require grad"):
        Tensor([1.0]).backward()
    with pytest.raises(NonDifferentiableError, match="only floating-point tensors can require grad"):
        Tensor([1, 2], requires_grad=True)
    with pytest.raises(NonDifferentiableError, match="gradient with respect to a int"):
        x.sum().gradient(Tensor([1, 2]))
    with pytest.raises(AutogradError, match="gradient has shape"):
        (x * 2.0).backward(np.ones(3))
    with pytest.raises(AutogradError, match="leaf"):
        (x * 2.0).requires_grad = False
    for e in (AutogradError, NonDifferentiableError):
        assert issubclass(e, UopsError)
    assert issubclass(AutogradError, RuntimeError) and issubclass(NonDifferentiableError, TypeError)


def test_backward_graph_is_fused() -> None:
    x = Tensor(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32), requires_grad=True)
    (g,) = (x.exp() * 2.0 + x.sin()).sum().gradient(x)
    assert len(g.schedule()) == 1  # elementwise gradient chain: one kernel


@pytest.mark.parametrize("device", ["CUDA_EMU", "AMD_EMU", "METAL_EMU"])
def test_emulated_devices_agree_with_cpu(device: str) -> None:
    from uops.testing import devices_from_env

    if device not in devices_from_env():
        pytest.skip(f"{device} is not available here")
    rng = np.random.default_rng(3)
    xs, ws = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)

    def grads(dev: str) -> list[np.ndarray]:
        x, w = Tensor(xs, device=dev, requires_grad=True), Tensor(ws, device=dev, requires_grad=True)
        loss = ((x @ w).relu().log_softmax(-1) * x[:, :2]).max(0).sum() + x.pad(((0, 1), (1, 0))).flip(0)[::2].sum()
        loss.backward()
        assert x.grad is not None and w.grad is not None
        return [x.grad.numpy(), w.grad.numpy()]

    for got, want in zip(grads(device), grads("CPU")):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_creation_helpers_make_leaves() -> None:
    Tensor.manual_seed(0)
    ts = [
        Tensor.zeros(2, 3, requires_grad=True),
        Tensor.ones(2, 3, requires_grad=True),
        Tensor.full((2, 3), 0.5, requires_grad=True),
        Tensor.rand(2, 3, requires_grad=True),
        Tensor.randn(2, 3, requires_grad=True),
        Tensor.uniform(2, 3, low=-1.0, high=1.0, requires_grad=True),
    ]
    assert all(t.requires_grad and t.is_leaf for t in ts)
    sum((t * float(i + 1)).sum() for i, t in enumerate(ts)).backward()  # type: ignore[union-attr]
    for i, t in enumerate(ts):
        assert t.grad is not None
        np.testing.assert_allclose(t.grad.numpy(), np.full((2, 3), i + 1.0))
    assert not Tensor.rand(2).requires_grad
