"""Grouped reductions (GROUP and GROUPTOP: the threads of a workgroup share one reduction) on ``device`` against
numpy, and what their combine costs. On an emulated device (its compiler an ``EmulatedCompiler``) the kit counts
each work-item's reads of local memory and each workgroup's barrier phases: together they must grow as log2 of
the group, as a tree or a warp shuffle combines, never as the group, as a combine that every work-item redoes
over all the partials does (its tail is serialized on a real GPU)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uops import AxisType, Ops, UOp, dtypes
from uops.backends.gpu_emu import EmulatedCompiler
from uops.codegen.opt import Opt, OptOps
from uops.codegen.program import get_program
from uops.plugins import Device
from uops.runtime import Buffer

G, GT, L = OptOps.GROUP, OptOps.GROUPTOP, OptOps.LOCAL
_REF: dict[Ops, Callable[..., np.ndarray]] = {Ops.ADD: np.sum, Ops.MAX: np.max}


def row_reduce(m: int, n: int, op: Ops) -> UOp:
    """out[i] = op over k of x[i, k]."""
    out, x = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), s) for s in range(2))
    i, r = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.REDUCE)
    return UOp.sink(out.index(i).store(x.index(i * n + r).load().reduce(r, op=op)))


def run_grouped(device: str, m: int, n: int, op: Ops, opts: list[Opt], compiler: Any = None) -> Any:
    """Row ``op`` of an m x n input with ``opts`` on ``device`` (``compiler``: the device's own when None), checked
    against numpy; returns the loaded program (an emulated one holds its ``last_stats``)."""
    dev = Device[device]
    spec = get_program(row_reduce(m, n, op), dev.renderer, compiler or dev.compiler, opts)
    x = np.random.default_rng(2).standard_normal((m, n)).astype(np.float32)
    out, inp = Buffer(dev.runtime, m, dtypes.float32), Buffer(dev.runtime, x.size, dtypes.float32)
    inp.copyin(x.ravel())
    prog = dev.runtime.load(spec.name, spec.lib)
    g, loc = spec.launch_dims()
    prog(out.handle, inp.handle, global_size=g, local_size=loc)
    dev.runtime.synchronize()
    np.testing.assert_allclose(out.numpy(), _REF[op](x, axis=1), rtol=1e-4, atol=1e-4, err_msg=f"{op} {opts}")
    return prog


def _gpu_style(device: str) -> None:
    ren = Device[device].renderer
    if ren.global_max is None or not ren.local_max:
        pytest.skip(f"{device} has no workgroups: a reduction is not shared among a group's threads there")


@pytest.mark.parametrize(
    "m,n,op,opts",
    [
        (3, 1024, Ops.ADD, [Opt(G, 0, 256)]),
        (5, 1000, Ops.MAX, [Opt(G, 0, 7)]),
        (4, 300, Ops.ADD, [Opt(L, 0, 2), Opt(GT, 0, 24)]),
    ],
    ids=["sum-256", "max-odd-group", "local-rows"],
)
def test_grouped_reductions_match_numpy(device: str, m: int, n: int, op: Ops, opts: list[Opt]) -> None:
    _gpu_style(device)
    run_grouped(device, m, n, op, opts)


@pytest.mark.parametrize(
    "op,opts,group", [(Ops.ADD, [Opt(G, 0, 256)], 256), (Ops.MAX, [Opt(L, 0, 2), Opt(G, 0, 64)], 64)]
)
def test_grouped_combine_takes_log_steps(device: str, op: Ops, opts: list[Opt], group: int) -> None:
    """Steps per work-item: its local reads plus its group's barrier phases, at most 4 per halving plus 4."""
    _gpu_style(device)
    compiler = Device[device].compiler
    if not isinstance(compiler, EmulatedCompiler):
        pytest.skip(f"the combine's steps are counted on emulated devices; {device}'s compiler builds for hardware")
    prog = run_grouped(device, 4, 4 * group, op, opts, compiler.counting())
    stats = prog.last_stats
    steps, bound = stats.local_reads + stats.rounds, 4 * math.ceil(math.log2(group)) + 4
    assert stats.rounds > 1, f"a group of {group} combined without a barrier: {stats}"
    assert steps <= bound, (
        f"{device}: the combine of a group of {group} took {stats.local_reads} local reads per work-item and "
        f"{stats.rounds} barrier phases ({steps} steps, more than {bound}): each level of a tree or shuffle "
        "should halve the work-items left, not have each of them walk all the partials"
    )
