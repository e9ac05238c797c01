"""Every Tensor op against numpy on ``device``: creation, dtypes, elementwise, reductions, movement,
edge shapes (empty, one element, odd sizes), linear algebra, moving between devices."""

from __future__ import annotations

import numpy as np
import pytest

from uops import Tensor, dtypes
from uops.plugins import Device
from uops.testing.kit.helpers import RNG, close, rnd, supports_dtype


def test_from_numpy_list_scalar(device):
    a = rnd(2, 3)
    close(Tensor(a, device=device), a)
    t = Tensor([[1, 2], [3, 4]], device=device)
    assert t.dtype == dtypes.int32 and t.tolist() == [[1, 2], [3, 4]]
    assert Tensor([1.5, 2.5], device=device).dtype == dtypes.float32
    assert Tensor([True, False], device=device).tolist() == [True, False]
    assert Tensor(3.5, device=device).item() == 3.5
    assert Tensor(7, device=device).shape == ()


def test_creation_helpers(device):
    close(Tensor.zeros(2, 3, device=device), np.zeros((2, 3)))
    close(Tensor.ones((4,), device=device), np.ones(4))
    close(Tensor.full((2, 2), 3.5, device=device), np.full((2, 2), 3.5))
    assert Tensor.full((2,), 7, device=device).dtype == dtypes.int32
    close(Tensor.arange(5, device=device), np.arange(5))
    close(Tensor.arange(1, 2, 0.25, device=device), np.arange(1, 2, 0.25, dtype=np.float32))
    close(Tensor.arange(10, 0, -3, device=device), np.arange(10, 0, -3))
    close(Tensor.eye(3, device=device), np.eye(3))
    close(Tensor.eye(2, 4, device=device), np.eye(2, 4))
    x = Tensor(rnd(2, 3), device=device)
    close(x.zeros_like(), np.zeros((2, 3)))
    close(x.ones_like(), np.ones((2, 3)))
    close(x.full_like(2.0), np.full((2, 3), 2.0))
    assert Tensor.empty(3, 2, device=device).shape == (3, 2)
    assert x.empty_like().numpy().shape == (2, 3)


def test_rand_is_seeded_and_the_same_on_every_device(device):
    Tensor.manual_seed(42)
    a = Tensor.rand(3, 4, device=device).numpy()
    b = Tensor.randn(100, device=device).numpy()
    Tensor.manual_seed(42)
    a2 = Tensor.rand(3, 4, device="PYTHON").numpy()
    b2 = Tensor.randn(100, device="PYTHON").numpy()
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    assert a.dtype == np.float32 and ((a >= 0) & (a < 1)).all()
    assert abs(b.mean()) < 0.5 and 0.5 < b.std() < 1.5
    assert not np.array_equal(Tensor.rand(3, 4, device=device).numpy(), a)  # the stream moves on
    x = Tensor.zeros(2, 2, device=device)
    assert x.rand_like().shape == (2, 2) and x.randn_like().dtype == dtypes.float32


def test_repr_does_not_compute(device):
    t = Tensor(rnd(1000), device=device) + 1
    r = repr(t)
    assert "lazy" in r and "(1000,)" in r and device in r
    t.realize()
    assert "realized" in repr(t)


def test_promotion_like_numpy(device):
    i = Tensor(np.array([1, 2, 3], dtype=np.int32), device=device)
    f = Tensor(np.array([0.5, 1.5, 2.5], dtype=np.float32), device=device)
    u8 = Tensor(np.array([1, 2, 250], dtype=np.uint8), device=device)
    i8 = Tensor(np.array([-1, 2, 3], dtype=np.int8), device=device)
    # numpy 2: int32 with float32 needs float64 to hold every int32; a device without float64 gives float32
    assert (i + f).dtype == (dtypes.float64 if supports_dtype(device, dtypes.float64) else dtypes.float32)
    assert (i + 1).dtype == dtypes.int32  # Python scalars are weak, as in numpy 2
    assert (u8 + 1).dtype == dtypes.uint8
    assert (i + 1.5).dtype == dtypes.float32
    assert (u8 + i8).dtype == dtypes.int16
    assert (i / i).dtype == dtypes.float32
    close(u8 + i8, np.array([1, 2, 250], np.uint8) + np.array([-1, 2, 3], np.int8))
    close(i + f, np.array([1.5, 3.5, 5.5]))
    close((u8 + 10), np.array([11, 12, 4], dtype=np.uint8))  # wraps like numpy


def test_cast(device):
    a = np.array([-1.7, -0.2, 0.0, 2.9, 100.5], dtype=np.float32)
    t = Tensor(a, device=device)
    close(t.cast(dtypes.int32), a.astype(np.int32))
    close(t.cast(dtypes.bool), a.astype(bool))
    close(t.cast(dtypes.int32).cast(dtypes.float32), a.astype(np.int32).astype(np.float32))
    close(Tensor([1, 0, 3], device=device).cast("bool"), np.array([True, False, True]))
    if not supports_dtype(device, dtypes.float16):  # declared unsupported: test_dtypes checks the error
        return
    close(t.cast(dtypes.float16), a.astype(np.float16), rtol=1e-3)
    h = Tensor(a, device=device, dtype=dtypes.float16)
    close((h * 2).sum(), (a.astype(np.float16) * 2).astype(np.float32).sum(), rtol=1e-3)


def test_float64_and_int64_round_trip(device):
    b = np.array([2**40, -(2**40), 7], dtype=np.int64)
    np.testing.assert_array_equal((Tensor(b, device=device) + 1).numpy(), b + 1)
    a = np.array([1e-300, 1.0, 3.141592653589793])
    t = Tensor(a, device=device)
    assert t.dtype == dtypes.float64
    if dtypes.float64 in Device[device].renderer.unsupported_dtypes:  # Metal has no double
        from uops.renderer import DTypeNotSupportedError

        with pytest.raises(DTypeNotSupportedError, match=f"device {device} does not support dtype double"):
            (t * 2).numpy()
        return
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)


BINARY = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b),
    ("maximum", lambda a, b: a.maximum(b) if isinstance(a, Tensor) else np.maximum(a, b)),
    ("minimum", lambda a, b: a.minimum(b) if isinstance(a, Tensor) else np.minimum(a, b)),
]


@pytest.mark.parametrize("name,fn", BINARY, ids=[n for n, _ in BINARY])
def test_binary_float_broadcast(device, name, fn):
    a, b = rnd(3, 1, 4), rnd(2, 1) + 3.0
    close(fn(Tensor(a, device=device), Tensor(b, device=device)), fn(a, b), rtol=1e-6)
    close(fn(Tensor(a, device=device), 2.5), fn(a, np.float32(2.5)), rtol=1e-6)


def test_reverse_ops_with_scalars(device):
    a = rnd(5) + 3.0
    t = Tensor(a, device=device)
    close(2.0 - t, 2.0 - a)
    close(2.0 / t, np.float32(2.0) / a, rtol=1e-6)
    close(3 * t, 3 * a)
    close(1 + t, 1 + a)
    close(2.0**t, np.float32(2.0) ** a, rtol=1e-5)


def test_floordiv_mod_pow_like_numpy(device):
    a = np.array([-7, -6, -1, 0, 1, 5, 7, 9], dtype=np.int32)
    b = np.array([2, -4, 3, 5, -3, 5, -2, 4], dtype=np.int32)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    close(ta // tb, a // b)
    close(ta % tb, a % b)
    close(ta**2, a**2)
    close(ta**3, a**3)
    close(ta**13, a**13)  # exact, with int32 wraparound like numpy
    with pytest.raises(ValueError, match="negative integer powers"):
        ta**-1
    f = np.array([-7.5, -1.0, 0.25, 3.0, 8.5], dtype=np.float32)
    g = np.array([2.0, -4.0, 0.5, 5.0, -3.0], dtype=np.float32)
    tf, tg = Tensor(f, device=device), Tensor(g, device=device)
    close(tf // tg, f // g)
    close(tf % tg, f % g, atol=1e-5)
    close(tf**2, f**2)
    p = np.array([0.0, 0.5, 2.0, 3.0], dtype=np.float32)
    e = np.array([0.0, 1.5, -2.0, 2.5], dtype=np.float32)
    close(Tensor(p, device=device) ** Tensor(e, device=device), p**e, rtol=1e-5)
    close(
        Tensor(np.array([-2.0, -3.0], np.float32), device=device)
        ** Tensor(np.array([3.0, 2.0], np.float32), device=device),
        np.array([-8.0, 9.0]),
        rtol=1e-5,
    )
    close(tf.abs() ** 0.5, np.abs(f) ** 0.5, rtol=1e-6)


def test_neg_abs_comparisons_where(device):
    a, b = rnd(4, 3), rnd(4, 3)
    b[0, 0] = a[0, 0]
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    close(-ta, -a)
    close(ta.abs(), np.abs(a))
    close(abs(ta), np.abs(a))
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        got = getattr(ta, op)(tb)
        assert got.dtype == dtypes.bool
        close(got, getattr(a, op)(b))
    close(ta < 0.5, a < 0.5)
    close((ta > tb).where(ta, tb), np.where(a > b, a, b))
    close((ta > 0).where(1.0, 0.0), np.where(a > 0, 1.0, 0.0))
    close((ta > 0).where(ta, 0.0), np.where(a > 0, a, 0.0))
    ia = Tensor(np.array([-3, 0, 4], dtype=np.int32), device=device)
    close(ia.abs(), np.array([3, 0, 4]))
    close(-ia, np.array([3, 0, -4]))
    bt = Tensor([True, False, True], device=device)
    close(bt & Tensor([True, True, False], device=device), np.array([True, False, False]))
    close(bt | Tensor([False, False, False], device=device), np.array([True, False, True]))
    close(~bt, np.array([False, True, False]))


UNARY = [
    ("exp", lambda t: t.exp(), np.exp, (-3, 3)),
    ("log", lambda t: t.log(), np.log, (0.01, 5)),
    ("exp2", lambda t: t.exp2(), np.exp2, (-3, 3)),
    ("log2", lambda t: t.log2(), np.log2, (0.01, 5)),
    ("sqrt", lambda t: t.sqrt(), np.sqrt, (0, 5)),
    ("rsqrt", lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x), (0.1, 5)),
    ("sin", lambda t: t.sin(), np.sin, (-4, 4)),
    ("cos", lambda t: t.cos(), np.cos, (-4, 4)),
    ("tanh", lambda t: t.tanh(), np.tanh, (-5, 5)),
    ("sigmoid", lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (-6, 6)),
    ("relu", lambda t: t.relu(), lambda x: np.maximum(x, 0), (-2, 2)),
    (
        "gelu",
        lambda t: t.gelu(),
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
        (-4, 4),
    ),
    ("clip", lambda t: t.clip(-0.5, 0.75), lambda x: np.clip(x, -0.5, 0.75), (-2, 2)),
]


@pytest.mark.parametrize("name,fn,ref,rng", UNARY, ids=[u[0] for u in UNARY])
def test_unary(device, name, fn, ref, rng):
    a = rnd(3, 5, lo=rng[0], hi=rng[1])
    close(fn(Tensor(a, device=device)), ref(a.astype(np.float64)).astype(np.float32), rtol=2e-5, atol=2e-6)


def test_unary_on_ints_gives_floats(device):
    t = Tensor([1, 4, 9], device=device)
    assert t.sqrt().dtype == dtypes.float32
    close(t.sqrt(), np.array([1.0, 2.0, 3.0]))


def test_elementwise_chain_fuses_and_is_right(device):
    a, b, c = rnd(8, 8), rnd(8, 8), rnd(8, 8)
    t = ((Tensor(a, device=device) + Tensor(b, device=device)) * Tensor(c, device=device)).exp()
    assert len(t.schedule()) == 1
    close(t, np.exp((a + b) * c), rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(device, axis, keepdim):
    a = rnd(3, 4, 5)
    t = Tensor(a, device=device)
    close(t.sum(axis, keepdim), a.sum(axis, keepdims=keepdim), rtol=1e-5, atol=1e-5)
    close(t.max(axis, keepdim), a.max(axis, keepdims=keepdim))
    close(t.min(axis, keepdim), a.min(axis, keepdims=keepdim))
    close(t.mean(axis, keepdim), a.mean(axis, keepdims=keepdim), rtol=1e-5, atol=1e-6)
    close(t.var(axis, keepdim), a.var(axis, keepdims=keepdim), rtol=1e-4, atol=1e-6)
    close(t.std(axis, keepdim), a.std(axis, keepdims=keepdim), rtol=1e-4, atol=1e-6)
    close((t * 0.5).prod(axis, keepdim), (a * 0.5).prod(axis, keepdims=keepdim), rtol=1e-5, atol=1e-7)


def test_int_and_bool_reductions(device):
    a = np.array([[3, -1, 7], [2, 9, -4]], dtype=np.int32)
    t = Tensor(a, device=device)
    close(t.sum(), a.sum())
    close(t.max(axis=1), a.max(axis=1))
    close(t.min(axis=0), a.min(axis=0))
    close(t.prod(axis=1), a.prod(axis=1))
    b = Tensor([[True, False], [True, True]], device=device)
    assert b.sum().item() == 3
    close(b.max(axis=1), np.array([True, True]))
    close(b.min(axis=1), np.array([False, True]))
    u = Tensor(np.array([5, 200, 7], dtype=np.uint8), device=device)
    assert u.min().item() == 5 and u.max().item() == 200


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_argmax_argmin(device, axis):
    a = rnd(4, 6)
    a[1, 2] = a[1, 4] = 5.0  # ties: the first index wins, like numpy
    a[2, 0] = a[3, 0] = -5.0
    t = Tensor(a, device=device)
    close(t.argmax(axis), a.argmax(axis))
    close(t.argmin(axis), a.argmin(axis))
    close(t.argmax(axis, keepdim=True), np.expand_dims(a.argmax(axis), axis))
    assert t.argmax().item() == a.argmax()
    assert t.argmin().item() == a.argmin()
    assert t.argmax().dtype == dtypes.int64  # numpy's index dtype


@pytest.mark.parametrize("axis,shape", [(0, (5, 7)), (-1, (5, 7)), (-1, (19, 130))])
def test_softmax_family(device, axis, shape):
    """Also the row kernel a CPU-style device fuses (whose summing pass stores the exponentials into the output,
    see ``uops.codegen.stash``), with rows that do not split evenly over threads or vectors."""
    a = rnd(*shape, lo=-10, hi=10)
    t = Tensor(a, device=device)
    e = np.exp(a - a.max(axis, keepdims=True))
    close(t.softmax(axis), e / e.sum(axis, keepdims=True), rtol=1e-5, atol=1e-7)
    lse = np.log(np.exp(a.astype(np.float64)).sum(axis))
    close(t.logsumexp(axis), lse, rtol=1e-5)
    close(t.logsumexp(axis, keepdim=True), np.expand_dims(lse, axis), rtol=1e-5)
    close(t.log_softmax(axis), a - np.expand_dims(lse, axis), rtol=1e-5, atol=1e-5)


def test_sum_of_1m_float32_within_numpys_error(device):
    n = 1 << 20
    a = RNG.uniform(0, 1, size=n).astype(np.float32)
    exact = a.astype(np.float64).sum()
    np_err = abs(float(a.sum()) - exact)
    got = Tensor(a, device=device).sum().item()
    # numpy's pairwise sum is the bar: within a few times its error, or 1e-6 relative
    assert abs(got - exact) <= max(4 * np_err, 1e-6 * exact), (got, exact, np_err)
    m = Tensor(a, device=device).max().item()
    assert m == a.max()


def test_large_reduction_is_two_stages(device):
    t = Tensor(np.ones(1 << 17, dtype=np.float32), device=device)
    assert len(t.sum().schedule()) == 2
    x = rnd(3, 70000)
    # float32 rounding grows with the sum of |x| (~70000 here), not with the (cancelling) result
    close(Tensor(x, device=device).sum(axis=1), x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=2e-3)
    odd = rnd(70001)
    close(Tensor(odd, device=device).max(), odd.max())
    close(Tensor(odd, device=device).min(), odd.min())


def test_reshape_permute_transpose_expand(device):
    a = rnd(2, 3, 4)
    t = Tensor(a, device=device)
    close(t.reshape(4, -1), a.reshape(4, -1))
    close(t.reshape((6, 4)), a.reshape(6, 4))
    close(t.permute(2, 0, 1), a.transpose(2, 0, 1))
    close(t.transpose(0, 2), a.swapaxes(0, 2))
    close(t.T, a.T)
    close(t.permute(1, 0, 2).reshape(3, 8), a.transpose(1, 0, 2).reshape(3, 8))  # unmergeable: stacked views
    close(t.permute(2, 1, 0).reshape(-1)[::5], a.transpose(2, 1, 0).reshape(-1)[::5])
    b = rnd(3, 1)
    close(Tensor(b, device=device).expand(2, 3, 4), np.broadcast_to(b, (2, 3, 4)))
    close(Tensor(b, device=device).expand(-1, 5), np.broadcast_to(b, (3, 5)))
    close(t.flatten(), a.flatten())
    close(t.flatten(1), a.reshape(2, 12))
    close(t.unsqueeze(1), a[:, None])
    close(t.unsqueeze(-1), a[..., None])
    close(t.reshape(2, 1, 12).squeeze(), a.reshape(2, 12))
    close(t.reshape(2, 1, 12).squeeze(1), a.reshape(2, 12))


def test_pad_shrink_flip(device):
    a = rnd(3, 4)
    t = Tensor(a, device=device)
    close(t.pad(((1, 2), (0, 3))), np.pad(a, ((1, 2), (0, 3))))
    close(t.pad(((1, 0), None), value=-1.5), np.pad(a, ((1, 0), (0, 0)), constant_values=-1.5))
    close(t.shrink(((1, 3), (0, 2))), a[1:3, 0:2])
    close(t.flip(0), a[::-1])
    close(t.flip((0, 1)), a[::-1, ::-1])
    close(t.pad(((2, 2), (2, 2))).shrink(((1, 6), (3, 5))), np.pad(a, 2)[1:6, 3:5])
    close(t.exp().pad(((1, 1), (1, 1))), np.pad(np.exp(a), 1), rtol=1e-6)  # pad after an op is 0, not exp(0)
    close(t.pad(((1, 1), (0, 0))).flip(0).reshape(-1), np.pad(a, ((1, 1), (0, 0)))[::-1].reshape(-1))


@pytest.mark.parametrize(
    "idx",
    [
        1,
        -1,
        (slice(None), 2),
        (slice(1, None), slice(None, None, 2)),
        (slice(None, None, -1),),
        (slice(None, None, -2), slice(3, 0, -1)),
        (Ellipsis, 1),
        (None, 0, Ellipsis, None),
        (slice(5, 1),),
        (0, slice(None), None, 2),
        (slice(-2, None), slice(None, -1)),
    ],
    ids=str,
)
def test_getitem(device, idx):
    a = rnd(4, 5, 6)
    close(Tensor(a, device=device)[idx], a[idx])


def test_cat_stack(device):
    a, b, c = rnd(2, 3), rnd(4, 3), rnd(2, 3)
    ta, tb, tc = (Tensor(x, device=device) for x in (a, b, c))
    close(Tensor.cat(ta, tb), np.concatenate([a, b]))
    close(Tensor.cat(ta, tc, dim=1), np.concatenate([a, c], axis=1))
    close(Tensor.stack(ta, tc), np.stack([a, c]))
    close(Tensor.stack([ta, tc], dim=-1), np.stack([a, c], axis=-1))
    close(Tensor.cat(ta.exp(), tb * 2), np.concatenate([np.exp(a), b * 2]), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 4\)"):
        Tensor.cat(ta, Tensor(rnd(2, 4), device=device))


def test_contiguous_and_non_contiguous_inputs(device):
    a = rnd(4, 6)
    t = Tensor(a, device=device)
    tt = t.T.contiguous()
    assert len(tt.schedule()) == 1
    close(tt, a.T)
    close(tt + t.T, 2 * a.T)
    close(t[::2, 1::2] * t[1::2, ::2], a[::2, 1::2] * a[1::2, ::2])


def test_realized_views_are_reused(device):
    a = rnd(3, 4)
    t = (Tensor(a, device=device) * 2).realize()
    assert t.schedule() == []
    close(t.T, (a * 2).T)
    close(t[1:, ::-1], (a * 2)[1:, ::-1])


def test_zero_size(device):
    z = Tensor(np.zeros((0, 3), np.float32), device=device)
    assert (z + 1).numpy().shape == (0, 3)
    close(z.sum(axis=0), np.zeros(3))
    close(z.sum(axis=1), np.zeros(0))
    close(z.prod(axis=0), np.ones(3))
    assert z.sum().item() == 0.0
    assert Tensor.zeros(0, device=device).tolist() == []
    close(Tensor.cat(z, Tensor(np.ones((2, 3), np.float32), device=device)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="empty"):
        z.max(axis=0)


def test_size_one_dims(device):
    a = rnd(1, 3, 1)
    t = Tensor(a, device=device)
    close(t.sum(axis=0), a.sum(axis=0))
    close(t.sum(axis=2, keepdim=True), a.sum(axis=2, keepdims=True))
    close(t.max(), a.max())
    one = rnd(1)
    close(t + Tensor(one, device=device).reshape(1, 1, 1), a + one.reshape(1, 1, 1))
    s = Tensor(2.0, device=device)
    close(s * t, 2.0 * a)
    w = rnd(1, 2)
    close(t.reshape(3, 1) @ Tensor(w, device=device), a.reshape(3, 1) @ w, rtol=1e-6)
    b = rnd(1, 1)
    close(Tensor(b, device=device) @ Tensor(b, device=device), b @ b)


def test_matmul_shapes(device):
    cases = [
        ((3, 4), (4, 5)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
    ]
    for sa, sb in cases:
        a, b = rnd(*sa), rnd(*sb)
        close(Tensor(a, device=device) @ Tensor(b, device=device), a @ b, rtol=1e-5, atol=1e-5)
    a, b = rnd(3, 4), rnd(4, 2)
    close(Tensor(a, device=device).dot(Tensor(b, device=device)), a.dot(b), rtol=1e-5, atol=1e-6)
    ia, ib = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(3, 2)
    close(Tensor(ia, device=device) @ Tensor(ib, device=device), ia @ ib)


def test_linear(device):
    x, w, bias = rnd(5, 3), rnd(4, 3), rnd(4)
    close(
        Tensor(x, device=device).linear(Tensor(w, device=device), Tensor(bias, device=device)),
        x @ w.T + bias,
        rtol=1e-5,
    )
    close(Tensor(x, device=device).linear(Tensor(w, device=device)), x @ w.T, rtol=1e-5, atol=1e-6)


def test_to_between_devices(device):
    a = rnd(3, 4)
    t = Tensor(a, device=device) * 2
    for other in sorted({device, "PYTHON"}):
        moved = t.to(other)
        assert moved.device == other
        close(moved + 1, a * 2 + 1)
        close(moved.T.to(device), (a * 2).T)
    assert Tensor.ones(2, device=device).to("PYTHON").numpy().tolist() == [1.0, 1.0]


def test_item_tolist_numpy(device):
    t = Tensor([[1.5, 2.5]], device=device)
    assert t.tolist() == [[1.5, 2.5]]
    assert t[0, 1].item() == 2.5
    assert isinstance(t.numpy(), np.ndarray) and t.numpy().dtype == np.float32
    with pytest.raises(ValueError, match="one element"):
        t.item()


def test_second_run_reuses_compiled_program(device, monkeypatch):
    from uops.codegen import program
    from uops.compiler.cache import LRU
    from uops.frontend import realize

    monkeypatch.setattr(realize, "_programs", LRU(64))  # room to spare: nothing is evicted
    compiled: list[object] = []
    real = program.get_program

    def counting(ast, *args, **kw):
        compiled.append(ast)
        return real(ast, *args, **kw)

    monkeypatch.setattr(program, "get_program", counting)
    a = rnd(16)
    close(Tensor(a, device=device) * 3 + 1, a * 3 + 1)
    first = len(compiled)
    assert first >= 1 and len(realize._programs) >= 1
    b = rnd(16)
    close(Tensor(b, device=device) * 3 + 1, b * 3 + 1)
    assert len(compiled) == first, "the second run compiled again"


def test_use_after_free_is_an_error(device):
    from uops.frontend.realize import get_buffer
    from uops.runtime import BufferFreedError

    t = (Tensor(rnd(4), device=device) + 1).realize()
    get_buffer(t.uop.src[0]).free()
    with pytest.raises(BufferFreedError, match="after free"):
        t.numpy()


def test_realize_several_at_once(device):
    a = rnd(3, 4)
    x = Tensor(a, device=device)
    s = x.sum(axis=1)
    p, q = s + 1, s * 2
    p.realize(q)
    close(p, a.sum(1) + 1, rtol=1e-5)
    close(q, a.sum(1) * 2, rtol=1e-5)
