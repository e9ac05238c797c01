"""BEAM search: breadth-first over opt sequences, each candidate compiled and timed on the device.

Each step extends every kernel of the beam by one opt; the candidates that fit are compiled in
worker processes (each with a timeout; all of a step's compiles finish before its first timed run),
run on the device with buffers of the kernel's real sizes
(best of a few runs) and checked against the unoptimised kernel on the same random inputs: a
candidate whose results differ is discarded and reported, never chosen. The ``width`` fastest go
on to the next step; the search stops when a step finds nothing faster. The default heuristics'
opts and their prefixes start in the beam, and the winner replaces the default only when it is faster again in
alternating rounds side by side, so the result is never slower than the default on the timed runs.

The chosen opts are cached on disk (beside the compile cache) keyed by the kernel AST and the
target, so a second run does not search.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uops.codegen.heuristics import hand_coded_opts
from uops.codegen.opt import Opt, OptError, OptOps, apply_opts
from uops.codegen.program import ProgramSpec, get_program, kernel_name
from uops.compiler import Compiler, cache_dir, usable_cores
from uops.dtypes import PtrDType, dtypes, to_numpy
from uops.errors import UopsError
from uops.ir.ops import Ops
from uops.ir.serialize import uops_from_data, uops_to_data
from uops.ir.uop import UOp
from uops.renderer import Renderer
from uops.runtime import Buffer, Runtime

#: seconds one candidate may take to compile before it is dropped
COMPILE_TIMEOUT_S = 60.0
#: timed runs per candidate (the best is kept)
RUNS = 3
#: opts added at most, one per step
MAX_STEPS = 5
#: rounds of timed runs in which the winner is compared with the default once more before it replaces it
CONFIRM_ROUNDS = 3
#: a candidate slower than this many times the best so far is dropped after one run, and
#: leaves the beam: extending a kernel that far behind does not catch up in a few steps
PRUNE = 3.0


class SearchError(UopsError, RuntimeError):
    """The search could not run the kernel at all (no baseline to compare candidates against)."""


def actions(ren: Renderer) -> list[Opt]:
    """Every single-opt step the search tries, for this kind of target (axes that do not exist raise OptError)."""
    out: list[Opt] = []
    gpu = ren.global_max is not None
    for axis in range(6):
        out += [Opt(OptOps.UPCAST, axis, a) for a in (2, 4, 8, 16, 32)]
        out += [Opt(OptOps.UNROLL, axis, a) for a in (4, 8, 16)]
        out += [Opt(OptOps.INNER, axis, a) for a in (16, 256, 1024)]
        out += [Opt(OptOps.BLOCK, axis, a) for a in (64, 256, 512, 1024)]
        if gpu:
            out += [Opt(OptOps.LOCAL, axis, a) for a in (2, 4, 8, 16, 32, 64, 128, 256)]
            out += [Opt(op, axis, a) for op in (OptOps.GROUP, OptOps.GROUPTOP) for a in (16, 32, 64, 128, 256)]
        else:
            threads = int(getattr(ren, "threads", 1))
            if threads > 1:
                out += [Opt(OptOps.THREAD, axis, a) for a in (threads, 4 * threads)]
        out += [Opt(OptOps.SWAP, axis, other) for other in range(axis + 1, 6)]
    out += [Opt(OptOps.PACK, i, 0) for i in range(4)]  # an input by slot order, after the other opts
    return out


def cache_key(ast: UOp, ren: Renderer, compiler: Compiler) -> str:
    data = json.dumps(uops_to_data([ast]), sort_keys=True, default=str)
    who = f"{ren.device}|{ren.target}|{type(ren).__name__}|{compiler.identity()}"
    return hashlib.sha256(f"{who}\n{data}".encode()).hexdigest()


def _cache_path(key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / "beam" / f"{key}.json"


def cached_opts(ast: UOp, ren: Renderer, compiler: Compiler, width: int) -> list[Opt] | None:
    path = _cache_path(cache_key(ast, ren, compiler))
    if path is None or not path.is_file():
        return None
    try:
        d = json.loads(path.read_text())
        if int(d.get("width", 0)) < width:
            return None
        return [Opt.from_data(o) for o in d["opts"]]
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _store(ast: UOp, ren: Renderer, compiler: Compiler, width: int, opts: list[Opt], t: float) -> None:
    path = _cache_path(cache_key(ast, ren, compiler))
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"opts": [o.to_data() for o in opts], "time_s": t, "width": width}))
        os.replace(tmp, path)
    except OSError as e:
        print(f"beam: cannot cache the chosen opts in {path.parent}: {e}", file=sys.stderr)


# ----- candidates are compiled in worker processes: plain data in, plain data out -----
@dataclass
class _Job:
    device: str
    target: str | None
    graph: dict[str, Any]
    opts: list[list[Any]]


_worker_target: tuple[Renderer, Compiler] | None = None


def _init_worker(ren: Renderer, compiler: Compiler) -> None:
    """Each worker compiles with the caller's renderer and compiler (inherited through fork or pickled)."""
    global _worker_target
    _worker_target = (ren, compiler)


def _compile_job(job: _Job) -> dict[str, Any]:
    assert _worker_target is not None, "a beam worker runs only in a pool made by _pool"
    ren, compiler = _worker_target
    ast = uops_from_data(job.graph)[0]
    spec = get_program(ast, ren, compiler, [Opt.from_data(o) for o in job.opts])
    return spec.to_dict()


def _compile_candidate(
    pool: cf.Executor | None, ast: UOp, device: str, ren: Renderer, compiler: Compiler, opts: list[Opt]
) -> cf.Future[dict[str, Any]]:
    if pool is None:
        fut: cf.Future[dict[str, Any]] = cf.Future()
        try:
            fut.set_result(get_program(ast, ren, compiler, opts).to_dict())
        except Exception as e:  # noqa: BLE001 - a failing candidate is reported and skipped
            fut.set_exception(e)
        return fut
    return pool.submit(_compile_job, _Job(device, None, uops_to_data([ast]), [o.to_data() for o in opts]))


# ----- buffers of the kernel's real sizes -----
def _buffer_sizes(ast: UOp) -> dict[int, tuple[Any, int]]:
    """slot -> (dtype, elements): the largest index each buffer is accessed at, plus one."""
    out: dict[int, tuple[Any, int]] = {}
    for u in ast.toposort():
        if u.op is Ops.INDEX and u.src[0].op is Ops.DEFINE_GLOBAL:
            g = u.src[0]
            assert isinstance(g.dtype, PtrDType)
            n = int(u.src[1].vmax) + 1
            prev = out.get(g.arg, (g.dtype.base, 0))[1]
            out[g.arg] = (g.dtype.base, max(prev, n))
    for u in ast.toposort():
        if u.op is Ops.DEFINE_GLOBAL and u.arg not in out:
            assert isinstance(u.dtype, PtrDType)
            out[u.arg] = (u.dtype.base, 1)
    return out


def _random(dt: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    if dtypes.is_float(dt):
        return rng.standard_normal(n).astype(to_numpy(dt))
    if dt == dtypes.bool:
        return rng.integers(0, 2, n).astype(np.bool_)
    return rng.integers(0, 8, n).astype(to_numpy(dt))


class _Bench:
    """Buffers, inputs and the reference outputs of one kernel, for timing and checking candidates."""

    def __init__(self, ast: UOp, runtime: Runtime, reference: ProgramSpec) -> None:
        if reference.vars:
            raise SearchError(f"kernel {reference.name} has symbolic sizes; BEAM searches only fixed shapes")
        rng = np.random.default_rng(0)
        sizes = _buffer_sizes(ast)
        self.runtime = runtime
        self.init = {s: _random(dt, n, rng) for s, (dt, n) in sizes.items()}
        self.bufs = {s: Buffer(runtime, n, dt) for s, (dt, n) in sizes.items()}
        self.outs = reference.outs
        _, want = self.run(reference, timed_runs=0)  # its outputs are what it is for: no timed run
        assert want is not None
        self.want = want

    def run(
        self, spec: ProgramSpec, cutoff: float = float("inf"), timed_runs: int = RUNS
    ) -> tuple[float, dict[int, np.ndarray] | None]:
        """(best time, outputs); a candidate whose first run is already slower than ``cutoff`` is
        not read back (None: it cannot win, so it is neither checked nor timed again)."""
        prog = self.runtime.load(spec.name, spec.lib)
        for s, b in self.bufs.items():
            b.copyin(self.init[s])
        g, loc = spec.launch_dims()
        args = [self.bufs[s].handle for s in sorted(self.bufs)]
        first = prog(*args, global_size=g, local_size=loc, wait=True)
        first_t = float(first) if isinstance(first, (int, float)) else float("inf")
        if first_t > cutoff:
            return first_t, None
        got = {s: self.bufs[s].numpy().copy() for s in self.outs}
        best = float("inf") if timed_runs else first_t
        for _ in range(timed_runs):
            t = prog(*args, global_size=g, local_size=loc, wait=True)
            best = min(best, float(t) if isinstance(t, (int, float)) else float("inf"))
            if best > cutoff:
                break
        return best, got

    def agrees(self, got: dict[int, np.ndarray]) -> bool:
        for s, want in self.want.items():
            a = got[s]
            if dtypes.is_float(self.bufs[s].dtype):
                scale = max(1.0, float(np.nanmax(np.abs(want))) if want.size else 1.0)
                if not np.allclose(a, want, rtol=1e-3, atol=1e-4 * scale, equal_nan=True):
                    return False
            elif not np.array_equal(a, want):
                return False
        return True


def _fits(ast: UOp, ren: Renderer, opts: list[Opt]) -> bool:
    try:
        apply_opts(ast, opts, ren)
    except OptError:
        return False
    return True


def _pool(n: int, ren: Renderer, compiler: Compiler) -> cf.Executor | None:
    if n <= 1:
        return None
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    return cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker, initargs=(ren, compiler))


def beam_search(
    ast: UOp,
    device: str,
    ren: Renderer,
    compiler: Compiler,
    runtime: Runtime,
    width: int,
    use_cache: bool = True,
    workers: int | None = None,
    timed: dict[tuple[Opt, ...], float] | None = None,
    max_steps: int = MAX_STEPS,
) -> list[Opt]:
    """The fastest opts found for ``ast`` on the device (cached on disk by AST and target).

    ``workers``: compile processes (default: the usable cores; 1 compiles in this process).
    ``timed``, when given, receives every candidate's best time (inf: failed or wrong)."""
    if width < 1:
        raise ValueError(f"BEAM width must be at least 1, got {width}")
    if use_cache and (hit := cached_opts(ast, ren, compiler, width)) is not None:
        return hit
    name = kernel_name(ast)
    bench = _Bench(ast, runtime, get_program(ast, ren, compiler, []))
    default = hand_coded_opts(ast, ren)
    if workers is None:
        workers = min(usable_cores(), 8)
    pool = _pool(workers, ren, compiler)
    timed = {} if timed is None else timed
    try:
        # the default first: its prefixes, down to the unoptimised kernel, are then cut off after one run when
        # far slower; every seed that is not is extended, so the search can leave the default's choices behind
        beam = _time_all(pool, ast, device, ren, compiler, bench, seeds(default), timed, name)
        beam = _prune(sorted(beam, key=lambda c: c[1]))
        best = beam[0] if beam else ([], float("inf"))
        tried = len(timed)
        for _ in range(max_steps):
            cands = [
                [*opts, a]
                for opts, _t in beam
                for a in actions(ren)
                if tuple([*opts, a]) not in timed and _fits(ast, ren, [*opts, a])
            ]
            if not cands:
                break
            tried += len(cands)
            timed_now = _time_all(pool, ast, device, ren, compiler, bench, cands, timed, name)
            beam = _prune(sorted(beam + timed_now, key=lambda c: c[1])[:width])
            _progress(name, tried, beam[0][1], beam[0][0])
            if beam[0][1] >= best[1]:
                break
            best = beam[0]
        best = _confirm(ast, ren, compiler, bench, best, default, timed)
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    print(f"\rbeam {name}: {tried} candidates, best {best[1] * 1e6:.1f} us with {best[0]}", file=sys.stderr)
    _store(ast, ren, compiler, width, best[0], best[1])
    return best[0]


def seeds(default: list[Opt]) -> list[list[Opt]]:
    """Where the search starts: the default's opts and each of their prefixes, longest first, down to none."""
    return [default[:n] for n in range(len(default), -1, -1)]


def _confirm(
    ast: UOp,
    ren: Renderer,
    compiler: Compiler,
    bench: _Bench,
    best: tuple[list[Opt], float],
    default: list[Opt],
    timed: dict[tuple[Opt, ...], float],
) -> tuple[list[Opt], float]:
    """The winner against the default once more, in alternating rounds of fresh timed runs: a candidate that won
    on a lucky run (a busy machine) does not replace the default unless it is faster again, side by side. Both
    entries of ``timed`` take the fresh times."""
    if best[0] == default or timed.get(tuple(default), float("inf")) == float("inf"):
        return best
    specs = {tuple(o): get_program(ast, ren, compiler, o) for o in (best[0], default)}
    times = dict.fromkeys(specs, float("inf"))
    for _ in range(CONFIRM_ROUNDS):
        for k, spec in specs.items():
            times[k] = min(times[k], bench.run(spec)[0])
    timed.update(times)
    win = min(specs, key=lambda k: times[k])
    return list(win), times[win]


def _prune(beam: list[tuple[list[Opt], float]]) -> list[tuple[list[Opt], float]]:
    """The sorted beam without the entries more than PRUNE times slower than its best."""
    return [c for c in beam if c[1] <= PRUNE * beam[0][1]] if beam else beam


def _progress(name: str, tried: int, t: float, opts: list[Opt]) -> None:
    print(f"\rbeam {name}: {tried} candidates, best {t * 1e6:.1f} us {opts}", end="", file=sys.stderr, flush=True)


def _time_all(
    pool: cf.Executor | None,
    ast: UOp,
    device: str,
    ren: Renderer,
    compiler: Compiler,
    bench: _Bench,
    cands: list[list[Opt]],
    timed: dict[tuple[Opt, ...], float],
    name: str,
) -> list[tuple[list[Opt], float]]:
    futs = [(c, _compile_candidate(pool, ast, device, ren, compiler, c)) for c in cands]
    built: list[tuple[list[Opt], ProgramSpec]] = []
    for opts, fut in futs:
        key = tuple(opts)
        try:
            # each candidate's own timeout, counted from when the one before it is done: a long step on a busy
            # machine does not run later candidates out of time
            built.append((opts, ProgramSpec.from_dict(fut.result(timeout=COMPILE_TIMEOUT_S))))
        except cf.TimeoutError:
            print(f"\nbeam {name}: {opts} did not compile within {COMPILE_TIMEOUT_S} s; skipped", file=sys.stderr)
            timed[key] = float("inf")
        except Exception as e:  # noqa: BLE001 - a candidate that fails to build is skipped, with the reason
            print(f"\nbeam {name}: {opts} failed to build ({type(e).__name__}: {e}); skipped", file=sys.stderr)
            timed[key] = float("inf")
    # every compile of the step is done before the first timed run: a compiler on the other core would slow
    # a threaded kernel by a different amount for each candidate
    out: list[tuple[list[Opt], float]] = []
    for opts, spec in built:
        key = tuple(opts)
        t, got = bench.run(spec, cutoff=PRUNE * min([t for _, t in out] + [min(timed.values(), default=float("inf"))]))
        if got is None:
            timed[key] = t
            continue
        if not bench.agrees(got):
            print(f"\nbeam {name}: {opts} gives wrong results; discarded", file=sys.stderr)
            timed[key] = float("inf")
            continue
        timed[key] = t
        out.append((opts, t))
    return out


__all__ = ["SearchError", "actions", "beam_search", "cached_opts", "seeds"]
