"""BEAM search: never slower than the default on its own timings, cached on disk, wrong candidates rejected."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.codegen.test_opt import matmul, run_ast
from uops.codegen import search
from uops.codegen.heuristics import hand_coded_opts
from uops.codegen.opt import Opt, OptOps
from uops.codegen.program import get_program
from uops.plugins import Device


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("UOPS_CACHE", raising=False)
    return tmp_path


def _search(device: str, ast, **kw):  # type: ignore[no-untyped-def]
    dev = Device[device]
    timed: dict[tuple[Opt, ...], float] = {}
    opts = search.beam_search(
        ast, device, dev.renderer, dev.compiler, dev.runtime, 2, workers=1, timed=timed, max_steps=2, **kw
    )
    return opts, timed


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_beam_is_no_slower_than_the_default_and_right(device: str, cache: Path) -> None:
    ast, ref, shapes = matmul(8, 8, 8)
    opts, timed = _search(device, ast)
    default = tuple(hand_coded_opts(ast, Device[device].renderer))
    assert default in timed and tuple(opts) in timed
    assert timed[tuple(opts)] <= timed[default]  # the search keeps the best of what it timed, default included
    got, want = run_ast(device, ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert list(cache.glob("beam/*.json")), "the chosen opts are cached on disk"


def test_a_second_process_reads_the_cache_and_does_not_search(cache: Path) -> None:
    script = textwrap.dedent(
        """
        import numpy as np
        from uops import Tensor
        a = np.arange(8 * 8, dtype=np.float32).reshape(8, 8) / 10
        out = (Tensor(a, device="CPU") @ Tensor(a, device="CPU")).numpy()
        assert np.allclose(out, a @ a, rtol=1e-4), "wrong matmul"
        """
    )
    env = {**os.environ, "UOPS_BEAM": "1", "UOPS_CACHE_DIR": str(cache)}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "candidates" in first.stderr  # searched, with progress on stderr
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "candidates" not in second.stderr


def test_a_wrong_candidate_is_discarded_and_reported(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ast, ref, shapes = matmul(8, 8, 8)
    wrong_ast = matmul(8, 8, 7)[0]  # the same buffers, one product short of the sum
    dev = Device["CPU"]
    real = search._compile_candidate
    bad: list[list[Opt]] = []

    def inject(pool, ast_, device, ren, compiler, opts):  # type: ignore[no-untyped-def]
        if opts and not bad:
            bad.append(list(opts))
            fut = search.cf.Future()
            fut.set_result(get_program(wrong_ast, ren, compiler, opts).to_dict())
            return fut
        return real(pool, ast_, device, ren, compiler, opts)

    monkeypatch.setattr(search, "_compile_candidate", inject)
    opts, timed = _search("CPU", ast, use_cache=False)
    assert bad and timed[tuple(bad[0])] == float("inf")
    assert "gives wrong results; discarded" in capsys.readouterr().err
    got, want = run_ast("CPU", ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert dev.renderer.device == "CPU"


def test_beam_width_must_be_positive(cache: Path) -> None:
    with pytest.raises(ValueError, match="BEAM width must be at least 1"):
        dev = Device["CPU"]
        search.beam_search(matmul(4, 4, 4)[0], "CPU", dev.renderer, dev.compiler, dev.runtime, 0)


def test_a_wider_beam_times_every_first_step_including_loop_order(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Width 3, nothing pruned: both starting points (no opts, the default) are extended by every action
    that fits, SWAP among them; the result is cached for that width and read back for any narrower search."""
    monkeypatch.setattr(search, "PRUNE", float("inf"))
    ast, ref, shapes = matmul(8, 8, 16)
    dev = Device["CPU"]
    timed: dict[tuple[Opt, ...], float] = {}
    opts = search.beam_search(
        ast, "CPU", dev.renderer, dev.compiler, dev.runtime, 3, workers=2, timed=timed, max_steps=1
    )
    default = tuple(hand_coded_opts(ast, dev.renderer))
    firsts = {a for a in search.actions(dev.renderer) if search._fits(ast, dev.renderer, [a])}
    assert {(a,) for a in firsts} <= set(timed) and (Opt(OptOps.SWAP, 0, 1),) in timed
    assert timed[tuple(opts)] <= timed[default]
    assert search.cached_opts(ast, dev.renderer, dev.compiler, 2) == opts
    assert search.cached_opts(ast, dev.renderer, dev.compiler, 4) is None  # a wider search is not answered by it
    got, want = run_ast("CPU", ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_entries_far_behind_the_best_leave_the_beam() -> None:
    a, b, c = [Opt(OptOps.UPCAST, 0, 4)], [Opt(OptOps.UNROLL, 0, 4)], []
    kept = search._prune([(a, 1.0), (b, search.PRUNE * 1.0), (c, search.PRUNE * 1.0 + 0.5)])
    assert [opts for opts, _ in kept] == [a, b]
    assert search._prune([]) == []


def test_a_candidate_slower_than_the_cutoff_is_not_read_back_or_timed_again() -> None:
    ast, _, _ = matmul(16, 16, 16)
    dev = Device["CPU"]
    bench = search._Bench(ast, dev.runtime, get_program(ast, dev.renderer, dev.compiler, []))
    t, got = bench.run(get_program(ast, dev.renderer, dev.compiler, []), cutoff=0.0)
    assert got is None and t > 0.0
    t, got = bench.run(get_program(ast, dev.renderer, dev.compiler, []))
    assert got is not None and bench.agrees(got)


def test_the_search_starts_from_the_default_and_each_of_its_prefixes(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "PRUNE", float("inf"))
    ast, ref, shapes = matmul(8, 8, 16)
    default = hand_coded_opts(ast, Device["CPU"].renderer)
    assert len(default) >= 2, "a kernel whose default has prefixes to seed the search with"
    assert search.seeds(default) == [default[:n] for n in range(len(default), -1, -1)]
    opts, timed = _search("CPU", ast)
    assert all(tuple(s) in timed for s in search.seeds(default))
    got, want = run_ast("CPU", ast, ref, shapes, opts)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


class _ScriptedBench:
    """Stands in for the device: each kernel's time is what the script says (its first lucky run aside)."""

    def __init__(self, times: dict[tuple[Opt, ...], float]) -> None:
        self.times = times

    def run(self, spec, cutoff: float = float("inf"), timed_runs: int = 3):  # type: ignore[no-untyped-def]
        return self.times[tuple(spec.opts)], {}


def test_a_winner_from_a_lucky_run_does_not_replace_the_default() -> None:
    ast = matmul(8, 8, 16)[0]
    dev = Device["CPU"]
    default = hand_coded_opts(ast, dev.renderer)
    other = [Opt(OptOps.UPCAST, 0, 2)]
    bench = _ScriptedBench({tuple(default): 1.0, tuple(other): 2.0})
    timed = {tuple(default): 1.5, tuple(other): 0.5}  # the search saw the other one win once
    got = search._confirm(ast, dev.renderer, dev.compiler, bench, (other, 0.5), default, timed)  # type: ignore[arg-type]
    assert got == (default, 1.0) and timed[tuple(default)] == 1.0
    bench = _ScriptedBench({tuple(default): 1.0, tuple(other): 0.25})  # really faster: it wins again
    timed = {tuple(default): 1.5, tuple(other): 0.5}
    got = search._confirm(ast, dev.renderer, dev.compiler, bench, (other, 0.5), default, timed)  # type: ignore[arg-type]
    assert got == (other, 0.25)
