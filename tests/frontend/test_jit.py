"""uops.jit: captured kernels replayed on new inputs give what eager execution (and numpy) gives."""

from __future__ import annotations

import re

import numpy as np
import pytest

import uops
from uops import JitError, Tensor, Variable
from uops.frontend import realize as realize_mod
from uops.frontend import schedule as schedule_mod
from uops.frontend.tensor.variable import VariableRangeError

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture
def no_scheduling(monkeypatch):
    """Makes any scheduling fail: a replay must launch the captured kernels only."""

    def on():
        def boom(*a, **k):
            raise AssertionError("a replay scheduled a graph")

        monkeypatch.setattr(realize_mod, "create_schedule", boom)

    return on


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_replay_matches_numpy_without_running_the_function(device, no_scheduling):
    w = rand(6, 5)
    wt = Tensor(w, device=device).realize()
    body_runs = []

    @uops.jit
    def f(x: Tensor, b: Tensor) -> Tensor:
        body_runs.append(1)
        return (x @ wt + b).relu().sum(axis=1)

    xs = [(rand(3, 6), rand(5)) for _ in range(4)]
    got = []
    for i, (x, b) in enumerate(xs):
        if i == 2:
            no_scheduling()
        got.append(f(Tensor(x, device=device), Tensor(b, device=device)).numpy())
    assert len(body_runs) == 2 and f.captures == 1 and f.replays == 2
    for (x, b), g in zip(xs, got):
        np.testing.assert_allclose(g, np.maximum(x @ w + b, 0).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_new_shape_dtype_or_device_captures_again():
    @uops.jit
    def f(x: Tensor) -> Tensor:
        return x * 2 + 1

    cases = [
        ((4,), np.float32, "CPU"),
        ((5,), np.float32, "CPU"),
        ((4,), np.int32, "CPU"),
        ((4,), np.float32, "PYTHON"),
    ]
    for shape, dt, dev in cases:
        for _ in range(3):  # warm-up, capture, replay
            x = (RNG.standard_normal(shape) * 10).astype(dt)
            got = f(Tensor(x, device=dev))
            assert got.dtype.name == Tensor(x).dtype.name and got.device == dev
            np.testing.assert_array_equal(got.numpy(), x * 2 + 1)
    assert f.captures == len(cases) and f.replays == len(cases)


def test_non_tensor_arguments_are_part_of_the_signature():
    @uops.jit
    def f(x: Tensor, scale: float) -> Tensor:
        return x * scale

    x = rand(4)
    for scale in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 2.0):
        np.testing.assert_allclose(f(Tensor(x), scale).numpy(), x * scale)
    assert f.captures == 2 and f.replays == 3


def test_outputs_of_earlier_calls_are_not_overwritten():
    @uops.jit
    def f(x: Tensor) -> tuple[Tensor, Tensor]:
        h = (x + 1).contiguous()  # an intermediate buffer shared by both outputs
        return h * 2, h.sum()

    xs = [rand(8) for _ in range(5)]
    outs = [f(Tensor(x)) for x in xs]
    for x, (a, s) in zip(xs, outs):
        np.testing.assert_allclose(a.numpy(), (x + 1) * 2, rtol=1e-6)
        np.testing.assert_allclose(s.numpy(), (x + 1).sum(), rtol=1e-5)
    assert f.replays == 3


def test_a_capture_after_a_call_with_the_same_inputs_launches_every_kernel_that_reads_them():
    """The warm-up call realized the results from these very tensors; the captured call builds the same graph, and
    must still launch its kernels, or a replay on other inputs would return the warm-up's values."""

    @uops.jit
    def f(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
        h = (x * 2).contiguous()
        return h @ w, (h + 1).sum()

    x, w = Tensor(rand(4, 5)).realize(), Tensor(rand(5, 3)).realize()
    first = f(x, w)  # a plain call: lazy results
    first[0].numpy()  # realizes h too, which the still lazy first[1] keeps alive
    second = f(x, w)  # captured
    np.testing.assert_allclose(second[1].numpy(), first[1].numpy(), rtol=1e-6)
    for _ in range(2):
        xn = rand(4, 5)
        a, s = f(Tensor(xn), w)
        np.testing.assert_allclose(a.numpy(), (xn * 2) @ w.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s.numpy(), (xn * 2 + 1).sum(), rtol=1e-5)
    assert f.captures == 1 and f.replays == 2


def test_returning_an_input_or_a_weight_returns_that_buffer():
    w = Tensor(rand(3)).realize()

    @uops.jit
    def f(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return x, w, x + w

    for _ in range(4):
        x = rand(3)
        a, b, c = f(Tensor(x))
        np.testing.assert_array_equal(a.numpy(), x)
        np.testing.assert_array_equal(b.numpy(), w.numpy())
        np.testing.assert_allclose(c.numpy(), x + w.numpy())


def test_values_later_eager_code_computes_are_not_read_from_replayed_buffers():
    x = Tensor(rand(6)).realize()

    @uops.jit
    def f(a: Tensor) -> Tensor:
        return (a * 3).exp()

    f(Tensor(rand(6)))
    f(x)  # captured with x's buffer
    f(Tensor(rand(6)))  # a replay overwrites the capture's intermediate buffers
    np.testing.assert_allclose((x * 3).exp().numpy(), np.exp(x.numpy() * 3), rtol=1e-6)


def test_view_inputs_are_made_whole_buffers():
    @uops.jit
    def f(x: Tensor) -> Tensor:
        return x + 1

    for _ in range(4):
        base = rand(4, 6)
        np.testing.assert_allclose(f(Tensor(base)[1:3, ::2].T).numpy(), base[1:3, ::2].T + 1)


def test_the_same_buffer_twice_is_a_different_signature():
    @uops.jit
    def f(a: Tensor, b: Tensor) -> Tensor:
        return a - b

    x, y = rand(4), rand(4)
    for _ in range(3):
        tx = Tensor(x)
        np.testing.assert_array_equal(f(tx, tx).numpy(), np.zeros(4, np.float32))
    for _ in range(3):
        np.testing.assert_allclose(f(Tensor(x), Tensor(y)).numpy(), x - y)
    assert f.captures == 2


def test_state_written_in_place_is_written_again_by_every_replay(no_scheduling):
    total = Tensor(np.zeros(4, np.float32)).realize()
    history = Tensor(np.zeros((6, 4), np.float32)).realize()

    @uops.jit
    def accumulate(x: Tensor, i: Tensor) -> Tensor:
        total.assign(total + x)  # reads and writes its own buffer
        row = (Tensor.arange(6) == i).reshape(6, 1)
        history.assign(row.where(total.reshape(1, 4), history))
        return total * 2

    xs = [rand(4) for _ in range(6)]
    i = Variable("i", 0, 5)
    for k, x in enumerate(xs):
        if k == 2:
            no_scheduling()
        out = accumulate(Tensor(x), i.bind(k))
        np.testing.assert_allclose(out.numpy(), 2 * np.sum(xs[: k + 1], axis=0), rtol=1e-5)
    assert accumulate.replays == 4
    np.testing.assert_allclose(total.numpy(), np.sum(xs, axis=0), rtol=1e-5)
    np.testing.assert_allclose(history.numpy(), np.cumsum(xs, axis=0), rtol=1e-5)


def test_reading_data_on_the_host_while_capturing_is_refused():
    @uops.jit
    def f(x: Tensor) -> Tensor:
        s = x.sum().item()  # a Python value derived from data: a replay could not recompute it
        return x * s

    x = rand(4)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), x * x.sum(), rtol=1e-5)  # the plain warm-up call works
    with pytest.raises(JitError, match=r"read tensor data back to the host.*\.item\(\)"):
        f(Tensor(x))
    assert realize_mod.recorder is None  # the failed capture left nothing behind
    np.testing.assert_allclose((Tensor(x) + 1).numpy(), x + 1)

    @uops.jit
    def g(x: Tensor) -> Tensor:
        return x * 2 if x.sum() > 0 else x  # bool(t) reads data as well

    g(Tensor(x))
    with pytest.raises(JitError, match="read tensor data back"):
        g(Tensor(x))


def test_random_numbers_drawn_while_capturing_are_refused():
    f = uops.jit(lambda x: x + Tensor.rand(*x.shape))
    f(Tensor(rand(3)))
    with pytest.raises(JitError, match="drew random numbers"):
        f(Tensor(rand(3)))
    g = uops.jit(lambda x, noise: x + noise)  # drawn outside: a new input every call
    for _ in range(3):
        x, noise = Tensor(rand(3)), Tensor.rand(3)
        np.testing.assert_allclose(g(x, noise).numpy(), x.numpy() + noise.numpy())


def test_numpy_and_unhashable_arguments_are_refused():
    f = uops.jit(lambda x, extra: x + 1)
    with pytest.raises(JitError, match="numpy array"):
        f(Tensor(rand(2)), np.ones(2))
    with pytest.raises(JitError, match="neither a Tensor nor hashable"):
        f(Tensor(rand(2)), {1, 2})


def test_variables_are_replayed_across_positions_without_capturing_again(no_scheduling):
    ctx = 16
    pos = Variable("pos", 0, ctx - 1)
    state = Tensor(rand(ctx, 4)).realize()

    @uops.jit
    def masked_sum(x: Tensor, p: Tensor) -> Tensor:
        keep = (Tensor.arange(ctx) <= p).reshape(ctx, 1)
        return (keep.where(state, 0.0) * x).sum(axis=0) + p

    for p in range(ctx):
        if p == 2:
            no_scheduling()
        x = rand(4)
        got = masked_sum(Tensor(x), pos.bind(p))
        want = (state.numpy()[: p + 1] * x).sum(axis=0) + p
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert masked_sum.captures == 1 and masked_sum.replays == ctx - 2


def test_eager_variables_share_one_kernel_and_one_plan():
    v = Variable("i", 0, 100)
    x = Tensor(rand(5)).realize()
    (x * v.bind(1)).numpy()
    programs, plans = len(realize_mod._programs), len(schedule_mod._plans)
    for i in (2, 50, 100):
        np.testing.assert_allclose((x * v.bind(i)).numpy(), x.numpy() * i, rtol=1e-6)
    assert (len(realize_mod._programs), len(schedule_mod._plans)) == (programs, plans)
    with pytest.raises(VariableRangeError, match=r"outside its declared range \[0, 100\]"):
        v.bind(101)
    with pytest.raises(ValueError, match="bound to 1 and to 2"):
        (v.bind(1) + v.bind(2)).numpy()


def test_jitted_method_captures_per_instance():
    class Scale:
        def __init__(self, k: float):
            self.w = Tensor(np.full(3, k, np.float32)).realize()

        @uops.jit
        def __call__(self, x: Tensor) -> Tensor:
            return x * self.w

    a, b = Scale(2.0), Scale(5.0)
    x = rand(3)
    for _ in range(3):
        np.testing.assert_allclose(a(Tensor(x)).numpy(), x * 2)
        np.testing.assert_allclose(b(Tensor(x)).numpy(), x * 5)


def test_a_jit_inside_a_capture_is_recorded_by_the_outer_one():
    inner = uops.jit(lambda x: x * 3)

    @uops.jit
    def outer(x: Tensor) -> Tensor:
        return inner(x + 1) - 1

    for _ in range(4):
        x = rand(4)
        np.testing.assert_allclose(outer(Tensor(x)).numpy(), (x + 1) * 3 - 1, rtol=1e-6, atol=1e-6)
    assert outer.replays == 2


def test_debug_2_prints_captures_and_replays(monkeypatch, capsys):
    monkeypatch.setenv("UOPS_DEBUG", "2")
    f = uops.jit(lambda x: x - 1)
    for _ in range(3):
        f(Tensor(rand(3)))
    err = capsys.readouterr().err
    assert re.search(r"jit: captured \S*<lambda>: 1 kernels", err) and re.search(
        r"jit: replay \S*<lambda>: 1 kernels", err
    )


def test_warmup_zero_captures_the_first_call():
    f = uops.jit(warmup=0)(lambda x: x + 2)
    x = rand(3)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), x + 2)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), x + 2)
    assert (f.captures, f.replays) == (1, 1)


def test_a_bound_variable_keeps_its_value_where_an_equal_constant_was_realized() -> None:
    # nodes are hash-consed: the BIND's CONST is the node of any equal constant, which may be realized on its own
    from uops.dtypes import dtypes
    from uops.ir.uop import UOp

    Tensor(UOp.const(dtypes.int32, 5)).realize()
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal((Tensor(x) + Variable("n", 1, 8).bind(5)).numpy(), x + 5)
