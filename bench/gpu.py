"""GPU speed goals: elementwise bandwidth against the memory's peak, fp32 matmul against cuBLAS.

On an H200 the goals are: elementwise kernels at >= 85% of 4.3 TB/s, fp32 matmul 4096^3 within 2x of
``torch.matmul`` (cuBLAS, TF32 off) when torch is importable, else within 2x of 67 TFLOP/s x 0.5
(about what cuBLAS reaches), and a row sum of 2048^2 (a grouped reduction: its combine must not
serialize) within 2x of the time of an elementwise pass over the same matrix. Each uops time is the
device's own (the runtime's ``wait=True`` timing: CUDA events on CUDA), best of ``--runs`` after a
warm-up launch, summed over the case's kernels; the ``wall`` column is the host's time to launch
them without waiting and ``synchronize()`` (launch overhead included, scheduling not: the kernels
are the ones ``realize`` would run). Torch, when importable and on a CUDA device, is timed with CUDA
events too. GB/s counts the inputs and the output once; every result is checked against numpy.
``--beam N`` adds a column with BEAM-searched kernels. Goals are reported, never asserted: the
exit code is 1 only when a result is wrong (2 when the device cannot compile or run here).

    python bench/gpu.py [--device CUDA] [--small] [--runs 10] [--beam 2] [--summary FILE]

``--small`` (tiny sizes) runs anywhere, e.g. ``--device CUDA_EMU`` on a machine without a GPU;
the percentages are then of the given peaks, not of that device's.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BANDWIDTH_GOAL = 0.85  # of the memory's peak, for every elementwise case
MATMUL_GOAL = 0.5  # of torch.matmul's GFLOP/s ("within 2x"), or of half the fp32 peak without torch
ROWSUM_GOAL = 2.0  # a row sum's time, at most this many times an elementwise pass over the same matrix


@dataclass
class Case:
    name: str
    kind: str  # "elementwise" (bandwidth goal), "matmul" (GFLOP/s goal), "rowsum" (vs the case before) or "info"
    shapes: list[tuple[int, ...]]
    numpy: Callable[..., np.ndarray]
    graph: Callable[..., Any]  # the same math on uops or torch tensors
    flops: float
    out_elems: int
    versus: str = ""  # a "rowsum" case: the name of the elementwise case over the same matrix it is held to


def cases(small: bool) -> list[Case]:
    n = 1 << 12 if small else 1 << 27  # 512 MiB per fp32 buffer: the launch is a rounding error
    m = 64 if small else 4096
    r = 64 if small else 2048
    return [
        Case(f"a*2 [{n}]", "elementwise", [(n,)], lambda a: a * 2, lambda a: a * 2, n, n),
        Case(f"a+b [{n}]", "elementwise", [(n,)] * 2, lambda a, b: a + b, lambda a, b: a + b, n, n),
        Case(f"((a+b)*c).exp() [{n}]", "elementwise", [(n,)] * 3, lambda a, b, c: np.exp((a + b) * c),
             lambda a, b, c: ((a + b) * c).exp(), 3 * n, n),
        Case(f"sum [{n}]", "info", [(n,)], lambda a: a.sum(), lambda a: a.sum(), n, 1),
        Case(f"a*2 [{r}^2]", "info", [(r, r)], lambda a: a * 2, lambda a: a * 2, r * r, r * r),
        Case(f"row sum [{r}^2]", "rowsum", [(r, r)], lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), r * r, r,
             versus=f"a*2 [{r}^2]"),
        Case(f"matmul fp32 [{m}^3]", "matmul", [(m, m), (m, m)], lambda x, y: x @ y, lambda x, y: x @ y,
             2 * m**3, m * m),
    ]  # fmt: skip


@dataclass
class Timing:
    kernel: float  # seconds of device time, summed over the case's kernels (best run)
    wall: float  # seconds of wall time to launch them all without waiting, then synchronize (best run)
    kernels: int


def _best(fn: Callable[[], float], runs: int) -> float:
    fn()  # warm-up: compiles, allocates
    return min(fn() for _ in range(runs))


def time_uops(c: Case, ts: list[Any], device: str, runs: int, beam: int = 0) -> Timing:
    """Device time of the case's kernels, launched as ``realize`` launches them, and their launch-to-done wall time."""
    from uops.frontend import realize
    from uops.plugins import Device

    runtime = Device[device].runtime
    launches = []
    for item in c.graph(*ts).schedule():
        if item.kind != "kernel":
            raise RuntimeError(f"{c.name}: the inputs are on {device}, yet the schedule copies ({item})")
        if beam:
            realize._programs.clear()  # the program cache does not key on the beam width
        _, prog, gsz, lsz = realize.get_runner(item.ast, item.device, beam=beam)
        launches.append((prog, [realize.get_buffer(b).handle for b in item.bufs], gsz, lsz))
    if beam:
        realize._programs.clear()
    if not launches:
        raise RuntimeError(f"{c.name}: the schedule has no kernel to time (is the value already realized?)")

    def device_time() -> float:
        return sum(float(p(*a, global_size=g, local_size=loc, wait=True) or 0.0) for p, a, g, loc in launches)

    def wall_time() -> float:
        t0 = time.perf_counter()
        for p, a, g, loc in launches:
            p(*a, global_size=g, local_size=loc)
        runtime.synchronize()
        return time.perf_counter() - t0

    return Timing(_best(device_time, runs), _best(wall_time, runs), len(launches))


def time_torch(c: Case, xs: list[np.ndarray], runs: int) -> float | None:
    """Best CUDA-event time of the case in torch on the GPU (TF32 off: a true fp32 matmul), or None without one."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ts = [torch.from_numpy(x).cuda() for x in xs]

    def run() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        c.graph(*ts)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    return _best(run, runs)


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return f"torch {torch.__version__}, cuda {'yes' if torch.cuda.is_available() else 'no'}"


def bandwidth_verdict(name: str, gbs: float, peak_gbs: float) -> str:
    """One GOAL line: a bandwidth as a share of the memory's peak, against BANDWIDTH_GOAL."""
    share = gbs / peak_gbs
    met = "MET" if share >= BANDWIDTH_GOAL else "MISSED"
    return (f"GOAL {name}: {gbs:.0f} GB/s = {100 * share:.1f}% of {peak_gbs:.0f} GB/s "
            f"(goal >= {100 * BANDWIDTH_GOAL:.0f}%): {met}")  # fmt: skip


def matmul_verdict(name: str, gflops: float, torch_gflops: float | None, peak_tflops: float) -> str:
    """One GOAL line: matmul GFLOP/s within 2x of torch.matmul's, or of half the fp32 peak without torch."""
    if torch_gflops is not None:
        ref, what = torch_gflops, "torch.matmul"
    else:  # cuBLAS reaches about half the fp32 peak: the stand-in when torch is not there to measure it
        ref, what = peak_tflops * 1e3 * 0.5, f"half the {peak_tflops:g} TFLOP/s fp32 peak (torch not importable)"
    share = gflops / ref
    met = "MET" if share >= MATMUL_GOAL else "MISSED"
    return (f"GOAL {name}: {gflops:.0f} GFLOP/s = {share:.2f}x {what} at {ref:.0f} GFLOP/s "
            f"(goal >= {MATMUL_GOAL:g}x): {met}")  # fmt: skip


def rowsum_verdict(name: str, t: float, copy_name: str, t_copy: float) -> str:
    """One GOAL line: a row sum's device time within ROWSUM_GOAL times an elementwise pass over its matrix."""
    ratio = t / t_copy
    met = "MET" if ratio <= ROWSUM_GOAL else "MISSED"
    return (f"GOAL {name}: {1e3 * t:.3f} ms = {ratio:.2f}x {copy_name} at {1e3 * t_copy:.3f} ms "
            f"(goal <= {ROWSUM_GOAL:g}x): {met}")  # fmt: skip


def _ms(t: float | None) -> str:
    return f"{t * 1e3:10.3f}" if t is not None and math.isfinite(t) else f"{'n/a':>10s}"


def main(argv: list[str] | None = None) -> int:
    """Run the cases, print the table and the GOAL lines (and write them to ``--summary``); an exit code."""
    p = argparse.ArgumentParser(prog="bench/gpu.py", description="uops GPU goals: bandwidth and fp32 matmul")
    p.add_argument("--device", default="CUDA", help="uops device (default CUDA; CUDA_EMU runs without a GPU)")
    p.add_argument("--runs", type=int, default=10, help="timed runs per case (best is reported)")
    p.add_argument("--small", action="store_true", help="tiny sizes (a smoke run on any device)")
    p.add_argument("--peak-gbs", type=float, default=4300.0, help="memory bandwidth peak in GB/s (H200: 4300)")
    p.add_argument("--peak-tflops", type=float, default=67.0, help="fp32 peak in TFLOP/s (H200: 67)")
    p.add_argument("--beam", type=int, default=0, metavar="N", help="also time BEAM-searched kernels (width N)")
    p.add_argument("--only", default="", help="run only the cases whose name contains this text")
    p.add_argument("--summary", type=Path, help="also write the table and the GOAL lines to this file")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    from uops import Tensor
    from uops.plugins import Device, PluginError

    try:
        device = Device[args.device].name
        _ = (Device[device].compiler, Device[device].runtime)  # fail now, with the plugin's reason
    except PluginError as e:
        print(f"bench/gpu.py: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    cols = ["kernels", "uops ms", "wall ms", "GB/s", "% peak", "GFLOP/s", "torch ms", "uops/torch"]
    if args.beam:
        cols += [f"BEAM={args.beam} ms", "beam GB/s", "beam GFLOP/s"]
    header = f"{'case':28s} " + " ".join(f"{c:>10s}" for c in cols)
    say(f"device {device}; uops ms = device time, best of {args.runs}; peaks {args.peak_gbs:g} GB/s, "
        f"{args.peak_tflops:g} TFLOP/s; {torch_version() or 'torch not importable'}")  # fmt: skip
    say(header)
    say("-" * len(header))
    goals: list[str] = []
    bad = 0
    timed: dict[str, float] = {}  # case name -> device time, for the row sum's comparison
    for c in cases(args.small):
        if args.only and args.only not in c.name:
            continue
        xs = [rng.random(s, dtype=np.float32) - np.float32(0.5) for s in c.shapes]
        want = c.numpy(*xs)
        ts = [Tensor(x, device=device).realize() for x in xs]
        got = c.graph(*ts).numpy()
        scale = max(1.0, float(np.abs(want).max()))
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * scale):
            say(f"{c.name}: uops result disagrees with numpy (max abs err {np.abs(got - want).max():.3g})")
            bad += 1
            continue
        t = time_uops(c, ts, device, args.runs)
        t_torch = time_torch(c, xs, args.runs) if device == "CUDA" else None
        nbytes = 4 * (sum(x.size for x in xs) + c.out_elems)
        gbs, gflops = nbytes / t.kernel / 1e9, c.flops / t.kernel / 1e9
        ratio = f"{t.kernel / t_torch:10.2f}" if t_torch else f"{'n/a':>10s}"
        row = [f"{t.kernels:10d}", _ms(t.kernel), _ms(t.wall), f"{gbs:10.1f}", f"{100 * gbs / args.peak_gbs:10.1f}",
               f"{gflops:10.1f}", _ms(t_torch), ratio]  # fmt: skip
        best_gbs, best_gflops = gbs, gflops
        if args.beam:
            tb = time_uops(c, ts, device, args.runs, beam=args.beam)
            b_gbs, b_gflops = nbytes / tb.kernel / 1e9, c.flops / tb.kernel / 1e9
            row += [_ms(tb.kernel), f"{b_gbs:10.1f}", f"{b_gflops:10.1f}"]
            best_gbs, best_gflops = max(gbs, b_gbs), max(gflops, b_gflops)
        say(f"{c.name:28s} " + " ".join(f"{x:>10s}" for x in row))
        label = c.name if not args.beam else f"{c.name} (best of default and BEAM={args.beam})"
        if c.kind == "elementwise":
            goals.append(bandwidth_verdict(label, best_gbs, args.peak_gbs))
        elif c.kind == "matmul":
            torch_gflops = c.flops / t_torch / 1e9 if t_torch else None
            goals.append(matmul_verdict(label, best_gflops, torch_gflops, args.peak_tflops))
        elif c.kind == "rowsum" and c.versus in timed:  # (not when --only left the elementwise case out)
            goals.append(rowsum_verdict(c.name, t.kernel, c.versus, timed[c.versus]))
        timed[c.name] = t.kernel
        del ts
    for g in goals:
        say(g)
    if bad:
        say(f"{bad} case(s) gave wrong results")
    if args.summary is not None:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text("\n".join(lines) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
