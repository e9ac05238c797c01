"""The scheduler: kernel counts (fusion), the kernel AST format, and view (index) math."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from uops import AxisType, Ops, Tensor, UOp, dtypes
from uops.frontend.schedule import SPLIT_THRESHOLD
from uops.frontend.view import ShapeTracker, View

DEV = "PYTHON"  # scheduling runs nothing; any device name that exists will do


def t(*shape: int) -> Tensor:
    return Tensor(np.ones(shape, dtype=np.float32), device=DEV)


def kernels(x: Tensor) -> list:
    return [s for s in x.schedule() if s.kind == "kernel"]


# ----- kernel counts -----


def test_elementwise_chain_is_one_kernel():
    a, b, c = t(4, 4), t(4, 4), t(4, 4)
    assert len(kernels(((a + b) * c).exp())) == 1


def test_reduce_fuses_with_elementwise_input():
    a, b = t(4, 5), t(4, 5)
    assert len(kernels((a * b).sum(axis=1))) == 1


def test_matmul_with_epilogue_is_one_kernel():
    a, b = t(4, 3), t(3, 5)
    assert len(kernels((a @ b).relu())) == 1
    assert len(kernels((a @ b + t(5)).relu())) == 1


def test_softmax_is_at_most_three_kernels():
    assert len(kernels(t(4, 8).softmax(axis=-1))) <= 3
    assert len(kernels(t(4, 8).softmax(axis=0))) <= 3


def test_reduce_expanded_into_another_reduce_is_a_buffer():
    x = t(4, 8)
    var = ((x - x.mean(axis=1, keepdim=True)) ** 2).sum(axis=1)
    assert len(kernels(var)) == 2


def test_movement_ops_are_index_math_not_copies():
    a = t(4, 6)
    y = a.T.reshape(3, 8)[1:, ::2].flip(0).pad(((1, 0), (0, 1))) * 2
    assert len(kernels(y)) == 1


def test_shared_subgraph_computed_once():
    a = t(4, 4)
    s = a.sum(axis=1)
    out = (s + 1) * (s + 2)  # the same reduce read twice in one kernel: one REDUCE in the AST
    ks = kernels(out)
    assert len(ks) == 1
    assert sum(1 for u in ks[0].ast.toposort() if u.op is Ops.REDUCE) == 1


def test_reduce_read_by_two_outputs_is_a_buffer():
    a = t(4, 4)
    s = a.sum(axis=1)
    items = (s + 1).schedule(s * 2)
    assert len([i for i in items if i.kind == "kernel"]) == 3


def test_copy_between_devices_is_a_copy_item():
    others = [d for d in _devices() if d != DEV]
    if not others:
        pytest.skip("needs a second device")
    items = (t(4) + 1).to(others[0]).schedule()
    assert [i.kind for i in items] == ["kernel", "copy"]
    assert items[0].device == DEV and items[1].device == others[0]


def _devices() -> list[str]:
    from uops.testing import devices_from_env

    return devices_from_env()


# ----- kernel AST format (docs/internals.md) -----


def test_ast_format():
    a, b = t(3, 4), t(3, 4)
    (k,) = kernels((a * b).sum(axis=1))
    sink = k.ast
    assert sink.op is Ops.SINK and all(s.op is Ops.STORE for s in sink.src)
    store = sink.src[0]
    idx = store.src[0]
    assert idx.op is Ops.INDEX and idx.src[0].op is Ops.DEFINE_GLOBAL and idx.src[0].arg == 0
    assert idx.src[1].dtype == dtypes.index
    ranges = [u for u in sink.toposort() if u.op is Ops.RANGE]
    glob = [r for r in ranges if r.arg[1] is AxisType.GLOBAL]
    red = [r for r in ranges if r.arg[1] is AxisType.REDUCE]
    assert [r.arg[0] for r in glob] == [0] and glob[0].src[0].arg == 3
    assert len(red) == 1 and red[0].src[0].arg == 4
    reduce = [u for u in sink.toposort() if u.op is Ops.REDUCE]
    assert len(reduce) == 1 and reduce[0].arg is Ops.ADD and reduce[0].src[1] is red[0]
    slots = sorted(u.arg for u in sink.toposort() if u.op is Ops.DEFINE_GLOBAL)
    assert slots == [0, 1, 2] and len(k.bufs) == 3


def test_output_axes_numbered_outermost_first():
    (k,) = kernels(t(2, 3, 4) + 1)
    glob = sorted((u for u in k.ast.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg[0])
    assert [r.src[0].arg for r in glob] == [2, 3, 4]


def test_padded_read_is_gated_where():
    (k,) = kernels(t(3).pad(((1, 1),)).contiguous())
    wheres = [u for u in k.ast.toposort() if u.op is Ops.WHERE]
    assert any(w.src[1].op is Ops.LOAD and w.src[2].op is Ops.CONST and w.src[2].arg == 0 for w in wheres)


def test_identical_computations_give_the_same_ast():
    a1, b1 = t(8), t(8)
    a2, b2 = t(8), t(8)
    assert kernels(a1 * b1 + 1)[0].ast is kernels(a2 * b2 + 1)[0].ast


def test_large_sum_splits_in_two_stages():
    x = Tensor(np.ones(1 << 20, dtype=np.float32), device=DEV)
    ks = kernels(x.sum())
    assert len(ks) == 2
    first = [u for u in ks[0].ast.toposort() if u.op is Ops.RANGE and u.arg[1] is AxisType.REDUCE]
    assert first[0].src[0].arg == 1024  # sqrt(n) per partial


def test_the_split_is_the_schedulers_and_the_graph_keeps_one_reduce():
    # the tensor graph holds one REDUCE_AXIS however large; the scheduler lowers it to two stages
    x = Tensor(np.ones(SPLIT_THRESHOLD + 1, dtype=np.float32), device=DEV)
    s = x.sum()
    assert sum(1 for u in s.uop.toposort() if u.op is Ops.REDUCE_AXIS) == 1
    assert len(kernels(s)) == 2
    assert len(kernels(Tensor(np.ones(SPLIT_THRESHOLD, dtype=np.float32), device=DEV).sum())) == 1


def test_a_realized_first_stage_is_reused_by_later_schedules():
    x = Tensor(np.full(1 << 18, 3.0, dtype=np.float32), device="PYTHON")
    s = x.sum()
    (s + 1).realize()  # runs both stages; the partials stay realized while s lives
    assert len(kernels(s * 2)) == 1
    assert (s * 2).item() == 2 * 3.0 * (1 << 18)


def test_reductions_of_constants_fold_in_the_scheduler():
    big = Tensor.ones(1 << 40, device=DEV)
    ks = kernels(big.sum())
    assert len(ks) == 1
    assert not [u for u in ks[0].ast.toposort() if u.op is Ops.RANGE]  # one stored value, no loop
    mixed = Tensor.ones(1 << 20, device=DEV) * t(1 << 20)  # not one repeated value: reduced in kernels
    assert len(kernels(mixed.sum())) == 2
    padded = Tensor.ones(4, device=DEV).pad([(0, 4)], value=0)  # a masked view is not uniform
    assert len([u for u in kernels(padded.sum())[0].ast.toposort() if u.op is Ops.RANGE]) == 1


def test_reductions_over_deep_graphs_schedule():
    # the uniform-value check is iterative: a 5000-op chain under a reduction is no RecursionError
    y, c = t(8), Tensor.ones(8, device=DEV)
    for _ in range(5000):
        y, c = y + 1, c * 1
    assert len(kernels(y.sum())) == 1
    assert not [u for u in kernels(c.sum())[0].ast.toposort() if u.op is Ops.RANGE]


# ----- view math -----


def _eval(u: UOp, env: dict[UOp, int]) -> int | bool:
    """A tiny evaluator of index expressions (C semantics for / and %)."""
    vals: dict[UOp, int | bool] = {}
    for n in u.toposort():
        if n in env:
            vals[n] = env[n]
        elif n.op is Ops.CONST:
            vals[n] = n.arg
        else:
            s = [vals[x] for x in n.src]
            if n.op is Ops.ADD:
                vals[n] = s[0] + s[1]
            elif n.op is Ops.MUL:
                vals[n] = s[0] * s[1]
            elif n.op is Ops.IDIV:
                q = abs(s[0]) // abs(s[1])
                vals[n] = q if (s[0] < 0) == (s[1] < 0) else -q
            elif n.op is Ops.MOD:
                q = abs(s[0]) // abs(s[1])
                q = q if (s[0] < 0) == (s[1] < 0) else -q
                vals[n] = s[0] - q * s[1]
            elif n.op is Ops.CMPLT:
                vals[n] = s[0] < s[1]
            elif n.op is Ops.AND:
                vals[n] = s[0] and s[1]
            else:
                raise AssertionError(f"unexpected {n.op} in an index expression")
    return vals[u]


def _materialize(st: ShapeTracker, base: np.ndarray) -> np.ndarray:
    idxs = tuple(UOp.variable(f"i{d}", 0, max(s - 1, 0)) for d, s in enumerate(st.shape))
    lin, valid = st.expr(idxs)
    out = np.zeros(st.shape, dtype=base.dtype)
    for pos in itertools.product(*(range(s) for s in st.shape)):
        env = dict(zip(idxs, pos))
        if valid is None or _eval(valid, env):
            out[pos] = base.reshape(-1)[_eval(lin, env)]
    return out


MOVES = [
    (
        "permute_reshape",
        lambda s: s.reshape((2, 3, 4)).permute((2, 0, 1)).reshape((4, 6)),
        lambda a: a.reshape(2, 3, 4).transpose(2, 0, 1).reshape(4, 6),
    ),
    (
        "pad_reshape",
        lambda s: s.reshape((4, 6)).pad(((1, 1), (0, 2))).reshape((6, 8)).shrink(((1, 5), (0, 8))).reshape((32,)),
        lambda a: np.pad(a.reshape(4, 6), ((1, 1), (0, 2))).reshape(6, 8)[1:5].reshape(32),
    ),
    (
        "flip_stride",
        lambda s: s.reshape((4, 6)).flip((1,)).stride((2, 3)),
        lambda a: a.reshape(4, 6)[:, ::-1][::2, ::3],
    ),
    (
        "expand_reshape",
        lambda s: s.reshape((24, 1)).expand((24, 2)).reshape((6, 8)),
        lambda a: np.broadcast_to(a.reshape(24, 1), (24, 2)).reshape(6, 8),
    ),
    (
        "split_merge",
        lambda s: s.reshape((2, 12)).permute((1, 0)).reshape((3, 4, 2)).permute((2, 0, 1)).reshape((24,)),
        lambda a: a.reshape(2, 12).T.reshape(3, 4, 2).transpose(2, 0, 1).reshape(24),
    ),
]


@pytest.mark.parametrize("name,st_fn,np_fn", MOVES, ids=[m[0] for m in MOVES])
def test_shapetracker_matches_numpy(name, st_fn, np_fn):
    base = np.arange(24, dtype=np.int64) + 1
    st = st_fn(ShapeTracker.from_shape((24,)))
    np.testing.assert_array_equal(_materialize(st, base), np_fn(base))


def test_views_merge_when_strides_allow():
    st = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((6, 2, 2))
    assert len(st.views) == 1  # splitting a dim keeps one view
    st2 = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((24,))
    assert len(st2.views) == 2  # merging non-adjacent strides needs a stacked view
    assert ShapeTracker.from_shape((4, 6)).reshape((2, 12)).contiguous


def test_view_canonical_forms():
    v = View.create((3, 1, 4), (4, 7, 1))
    assert v.strides == (4, 0, 1) and v.contiguous
    assert View.create((3,), mask=((0, 3),)).mask is None
    assert ShapeTracker.from_shape((3, 1)).expand((3, 5)).expands
    assert not ShapeTracker.from_shape((3, 4)).permute((1, 0)).expands


def test_expanded_reduce_output_is_computed_once():
    x = t(4, 8)
    out = x.sum(axis=1, keepdim=True).expand(4, 8)
    ks = kernels(out)
    assert len(ks) == 1  # the sum is a buffer; the expand is a view of it, not a recompute per column
    assert all(u.op is not Ops.RANGE or u.src[0].arg != 8 or u.arg[1] is AxisType.REDUCE for u in ks[0].ast.toposort())
    np.testing.assert_allclose(out.numpy(), np.full((4, 8), 8.0))


def test_shapetracker_composition():
    base = np.arange(24, dtype=np.int64)
    st1 = ShapeTracker.from_shape((24,)).reshape((4, 6)).permute((1, 0))  # a value of shape (6, 4)
    st2 = ShapeTracker.from_shape((6, 4)).pad(((1, 0), (0, 0))).reshape((28,)).shrink(((2, 26),)).reshape((4, 6))
    ref = np.pad(base.reshape(4, 6).T, ((1, 0), (0, 0))).reshape(28)[2:26].reshape(4, 6)
    np.testing.assert_array_equal(_materialize(st1 + st2, base), ref)


def test_view_of_a_realized_value_is_not_recomputed():
    x = (t(3, 4) * 2).realize()
    y = x.T[1:]
    assert kernels(y) == []
    np.testing.assert_allclose(y.numpy(), np.full((3, 3), 2.0))


def test_numpy_of_a_permuted_result_is_one_kernel():
    a = t(3, 4)
    y = (a * 2).T
    assert len(kernels(y)) == 1
    y.numpy()
    assert kernels(y) == []  # realized straight into the transposed layout: no copy for numpy()


# ----- the plan cache -----


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the schedules built from scratch (cache misses); the cache starts empty."""
    from uops.frontend import schedule

    schedule._plans.clear()
    calls: list[int] = []
    real = schedule._build_schedule

    def counting(roots, default_device):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(roots, default_device)

    monkeypatch.setattr(schedule, "_build_schedule", counting)
    return calls


def test_a_plan_stored_under_the_same_hash_for_another_graph_is_not_used(builds: list[int]) -> None:
    """Plans are kept by the hash of the graph's structure; a hit is checked against the whole structure, so a
    collision schedules afresh rather than running another graph's kernels."""
    from uops.frontend import schedule

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32)
    other = (Tensor(b, device="PYTHON") * 3).max(1)
    other_key, _, _ = schedule._graph_key([other.uop], "PYTHON")
    schedule.create_schedule([other.uop], "PYTHON")
    stored_key, stored_plan = schedule._plans.get(hash(other_key)) or (None, None)
    assert stored_key == other_key and stored_plan is not None
    x = (Tensor(a, device="PYTHON") + 1).sum(1)
    key, _, _ = schedule._graph_key([x.uop], "PYTHON")
    schedule._plans.put(hash(key), (other_key, stored_plan))  # as if the two structures hashed alike
    before = len(builds)
    np.testing.assert_allclose(x.numpy(), (a + 1).sum(1), rtol=1e-5)
    assert len(builds) == before + 1


def test_a_repeated_op_on_new_inputs_reuses_the_plan(builds: list[int]) -> None:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    first = Tensor(a, device="PYTHON")
    x = (first + 1).sum(0)
    (first_item,) = kernels(x)
    np.testing.assert_allclose(x.numpy(), (a + 1).sum(0), rtol=1e-5)
    assert len(builds) == 1
    second = Tensor(b, device="PYTHON")
    y = (second + 1).sum(0)
    (item,) = y.schedule()
    assert len(builds) == 1  # the plan was reused: no second scheduling
    assert item.ast is first_item.ast  # the same kernel, reading the new input into a new output
    assert item.bufs[1] is second.uop.src[0] and item.bufs[0] is not first_item.bufs[0]
    np.testing.assert_allclose(y.numpy(), (b + 1).sum(0), rtol=1e-5)
    np.testing.assert_allclose(x.numpy(), (a + 1).sum(0), rtol=1e-5)  # the first result is its own


def test_a_split_reduction_on_new_inputs_reuses_the_plan(builds: list[int]) -> None:
    """A reduction split in two stages (a stage is a node that lowering made, not in the graph) still gets a plan:
    the stage's buffer is a fresh one of the plan, and each call's result is its own."""
    from uops.frontend.schedule import SPLIT_THRESHOLD

    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(4 * SPLIT_THRESHOLD + 3).astype(np.float32) for _ in range(2))
    x = Tensor(a, device="CPU").sum()
    assert len(kernels(x)) == 2 and len(builds) == 1
    y = Tensor(b, device="CPU").sum()
    assert len(kernels(y)) == 2 and len(builds) == 1
    np.testing.assert_allclose(y.numpy(), b.astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_allclose(x.numpy(), a.astype(np.float64).sum(), rtol=1e-5)
    assert len(builds) == 1


@pytest.mark.parametrize(
    "other", [np.ones((8, 4), np.float32), np.ones((8, 8), np.int32), np.ones((8, 8), np.float32)], ids=str
)
def test_another_shape_dtype_or_constant_is_scheduled_anew(builds: list[int], other: np.ndarray) -> None:
    (Tensor(np.ones((8, 8), np.float32), device="PYTHON") + 1).sum(0).numpy()
    c = 2 if other.shape == (8, 8) and other.dtype == np.float32 else 1
    y = (Tensor(other, device="PYTHON") + c).sum(0)
    np.testing.assert_array_equal(y.numpy(), (other + c).sum(0))
    assert len(builds) == 2


def test_a_realized_constant_and_a_realized_array_do_not_share_a_plan(builds: list[int]) -> None:
    # both inputs are realized lazy nodes of one shape and dtype; only the first is one value everywhere,
    # which the reduction folds: the second must be reduced for real
    uniform = Tensor.ones((4, 4), device="PYTHON") * 3
    alias = Tensor(uniform)
    uniform.realize()
    assert alias.sum().item() == 48.0
    arr = np.arange(16, dtype=np.float32).reshape(4, 4)
    varied = Tensor(arr, device="PYTHON") * 1
    alias2 = Tensor(varied)
    varied.realize()
    assert alias2.sum().item() == arr.sum()
