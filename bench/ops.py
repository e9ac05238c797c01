"""Front-end op benchmarks: uops against numpy and the peers given (jax.jit, torch.compile, torch eager,
tinygrad), side by side in one run, with each workload's share of this machine's roofline.

Workloads (``workloads.py``, each defined once for every framework): elementwise chains (``((a+b)*c).exp()``,
GELU of ``x*y+x``), sums (16M, either axis of 2048^2), softmax and layernorm over rows, matmuls (1024^3,
1023x1025x1031: sizes no tile divides, batched), matvec, 2x2 sum-pooling and an MLP layer pair. Every
result is checked against numpy first; a peer whose result disagrees is reported as wrong, not timed.
Each time is the best of ``--runs`` after a warm-up, every side taking turns run by run (compiling is not
timed; building the lazy graph, scheduling and launching are). Inputs are already on the device.

uops is timed twice: eager (``uops s``: the lazy graph built, scheduled and launched each call) and under
``uops.jit`` (``jit s``: the captured kernels replayed). The ratios are peer time / uops eager time: above 1
uops is faster; the ``jax.jit/jit`` and ``compile/jit`` columns set the compiled peers against ``uops.jit``,
compiled against compiled. GFLOP/s and GB/s are the workload's useful work (flops of the math; bytes of inputs
and output once) over the faster uops time; ``roof`` is that as a share of
the ceiling it is held to (``bench/roofline.py``, measured at the start on CPU): ``rd`` read bandwidth,
``tri`` triad bandwidth, ``fma`` peak FMA rate. ``--beam N`` adds BEAM-searched kernels.

    python bench/ops.py [--device CPU] [--runs 5] [--small] [--only TEXT] [--beam 2]
                        [--jax-python PATH] [--torch-python PATH] [--tinygrad-python PATH] [--no-roofline]

``--jax-python``/``--torch-python`` name interpreters that have jax / torch installed (their own venvs:
they are never uops dependencies); tinygrad runs from this interpreter when it can import it.
``uops bench`` calls ``main(argv)``.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import Peer, compare, peer_device, peer_pythons, start_peers, time_in_turns  # noqa: E402
from roofline import Roofline, measure  # noqa: E402
from workloads import Workload, agrees, inputs, max_error, workloads  # noqa: E402

_ROOF_TAGS = {"read": "rd", "triad": "tri", "fma": "fma"}


#: the compiled peers, compared with ``uops.jit`` as well (compiled against compiled): column label per variant
COMPILED = {"jax.jit": "jax.jit/jit", "torch.compile": "compile/jit"}


def _uops_fns(
    w: Workload, xs: list[np.ndarray], device: str, jitted: bool = False
) -> tuple[Callable[[], Any], Callable[[], np.ndarray]]:
    """(one timed run, the result as numpy) of the workload in uops: eager (lazy graphs, scheduled per call) or,
    with ``jitted``, under ``uops.jit`` (the result is taken from a replay, so the replayed kernels are checked)."""
    from uops import Tensor, jit
    from uops.plugins import Device

    ts = [Tensor(x, device=device).realize() for x in xs]
    runtime = Device[device].runtime
    fn = w.for_framework("uops")
    if jitted:
        fn = jit(fn)

    def run() -> Any:
        out = fn(*ts).realize()
        runtime.synchronize()
        return out

    def result() -> np.ndarray:
        for _ in range(3 if jitted else 0):  # the plain call, the capture, then replays
            run()
        return fn(*ts).numpy()

    return run, result


def roof_share(w: Workload, seconds: float, roof: Roofline) -> float:
    """The share of its ceiling the workload reached in ``seconds``: work per second over the ceiling's rate."""
    if w.roof == "fma":
        return w.flops / seconds / roof.fma_flops_s
    bandwidth = roof.read_bytes_s if w.roof == "read" else roof.triad_bytes_s
    return w.nbytes / seconds / bandwidth


def _ratio(r: float) -> str:
    """Two decimals, as the issue tables print them; small ratios keep two significant digits instead."""
    return f"{r:13.2f}" if r >= 0.1 else f"{r:13.2g}"


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one table; returns a process exit code (1: a uops result was wrong)."""
    p = argparse.ArgumentParser(prog="uops bench", description="uops vs numpy, jax, torch and tinygrad on common ops")
    p.add_argument("--device", default=None, help="uops device (default: CPU if available, else Device.DEFAULT)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per case (best is reported)")
    p.add_argument("--small", action="store_true", help="small sizes (a quick smoke run)")
    p.add_argument("--beam", type=int, default=0, metavar="N", help="also time BEAM-searched kernels (width N)")
    p.add_argument("--only", default="", help="run only the cases whose name contains this text")
    p.add_argument("--jax-python", metavar="PATH", help="an interpreter with jax: adds jax.jit")
    p.add_argument("--torch-python", metavar="PATH", help="an interpreter with torch: adds torch.compile, eager")
    p.add_argument("--tinygrad-python", metavar="PATH", help="an interpreter with tinygrad (default: this one's)")
    p.add_argument("--no-roofline", action="store_true", help="skip measuring the roofline (CPU only)")
    args = p.parse_args(argv)
    from uops.frontend import realize
    from uops.plugins import Device

    device = args.device or ("CPU" if "CPU" in Device else Device.DEFAULT)
    device = Device[device].name
    roof: Roofline | None = None
    if device == "CPU" and not args.no_roofline:
        roof = measure(32 * 2**20, runs=2) if args.small else measure()
        print(roof.describe())
    where = peer_device(device)
    peers = start_peers(peer_pythons(args.jax_python, args.torch_python, args.tinygrad_python), device=where)
    try:
        return _table(args, device, roof, peers, realize)
    finally:
        for peer in peers:
            peer.close()


def _table(args: argparse.Namespace, device: str, roof: Roofline | None, peers: list[Peer], realize: Any) -> int:
    remote = [(p, v) for p in peers for v in p.variants]
    for p in peers:
        print(f"peer {p.framework} {p.version}: {p.python} (on {p.device})")
    jit_cols = [COMPILED[v] for _, v in remote if v in COMPILED]
    cols = ["uops s", "jit s", "GFLOP/s", "GB/s", "roof", "numpy", *(v for _, v in remote), *jit_cols]
    if args.beam:
        cols += [f"BEAM={args.beam} s", "numpy/beam"]
    header = f"{'workload':34s} " + " ".join(f"{c:>13s}" for c in cols)
    load = f"; load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"device {device}; best of {args.runs}; ratios are peer time / uops time (above 1: uops is faster){load}")
    print("uops s: eager (lazy, scheduled each call); jit s: under uops.jit; GFLOP/s, GB/s and roof: the faster one")
    if jit_cols:
        print(f"{', '.join(jit_cols)}: the compiled peers against uops.jit (the other ratios are against eager)")
    print(header)
    print("-" * len(header))
    bad = 0
    ratios: dict[str, list[float]] = {c: [] for c in ["numpy", *(v for _, v in remote), *jit_cols]}
    notes: list[str] = []
    for w in workloads(args.small):
        if args.only and args.only not in w.name:
            continue
        xs = inputs(w)
        numpy_fn = w.for_framework("numpy")
        want = np.asarray(numpy_fn(*xs), dtype=np.float32)
        run_u, get_u = _uops_fns(w, xs, device)
        run_j, get_j = _uops_fns(w, xs, device, jitted=True)
        for mode, get in (("uops", get_u), ("uops.jit", get_j)):
            got = get()
            if not agrees(got, want):
                notes.append(f"{w.name}: {mode} result disagrees with numpy ({max_error(got, want)})")
                bad += 1
        local = [run_u, run_j, functools.partial(numpy_fn, *xs)]
        (t_u, t_j, t_n), outcomes = compare(peers, w.name, args.small, xs, want, local, args.runs)
        t_best = min(t_u, t_j)
        row = [f"{t_u:13.5f}", f"{t_j:13.5f}", f"{w.flops / t_best / 1e9:13.2f}", f"{w.nbytes / t_best / 1e9:13.2f}"]
        row.append(f"{100 * roof_share(w, t_best, roof):8.0f}% {_ROOF_TAGS[w.roof]:>3s}" if roof else f"{'n/a':>13s}")
        ratios["numpy"].append(t_n / t_u)
        row.append(_ratio(t_n / t_u))
        for (peer, variant), outcome in outcomes.items():
            if outcome.seconds is None:
                notes.append(f"{w.name}: {variant} ({peer.python}) {outcome.status}: {outcome.detail}")
        # each peer against eager uops, then the compiled peers against uops.jit
        cells = [(v, o, t_u) for (_, v), o in outcomes.items()]
        cells += [(COMPILED[v], o, t_j) for (_, v), o in outcomes.items() if v in COMPILED]
        for column, outcome, base in cells:
            if outcome.seconds is None:
                row.append(f"{outcome.status:>13s}")
            else:
                ratios[column].append(outcome.seconds / base)
                row.append(_ratio(outcome.seconds / base))
        if args.beam:
            os.environ["UOPS_BEAM"] = str(args.beam)
            realize._programs.clear()
            try:
                run_b, _ = _uops_fns(w, xs, device)
                t_b, t_n = time_in_turns([run_b, functools.partial(numpy_fn, *xs)], [], args.runs)
            finally:
                del os.environ["UOPS_BEAM"]
                realize._programs.clear()
            row += [f"{t_b:13.5f}", _ratio(t_n / t_b)]
        print(f"{w.name:34s} " + " ".join(f"{x:>13s}" for x in row), flush=True)
    geo = [_ratio(_geomean(r)) if r else f"{'n/a':>13s}" for r in ratios.values()]
    label = f"geomean ({len(ratios['numpy'])} workloads)"
    print(f"{label:34s} " + " ".join([f"{'':>13s}"] * 5 + geo))
    for note in notes:
        print(note)
    if roof is not None:  # measured again: if it moved much, the machine's load did, and so did the shares
        again = measure(roof.array_bytes, runs=2) if args.small else measure(roof.array_bytes)
        print(f"at the end: {again.describe()}")
    if hasattr(os, "getloadavg"):
        print(f"load average at the end {os.getloadavg()[0]:.2f} (a shared machine times everything slower)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
