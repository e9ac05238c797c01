"""Front-end op benchmarks: uops vs numpy vs tinygrad (when importable), side by side, in one run.

Cases: elementwise chains (``((a+b)*c).exp()``, GELU of ``x*y+x``), sums (16M, either axis of
2048^2), softmax and layernorm over rows, matmul 1024^3 and 1023x1025x1031 (sizes no tile divides),
batched matmul, matvec and a conv-like strided reduction (2x2 sum-pooling). Each time is the best of
``--runs`` after one warm-up, uops and numpy taking turns run by run (compiling is not timed; building the lazy
graph, scheduling and launching are). Inputs are
already on the device. GFLOP/s and GB/s are the case's useful work (flops of the math, bytes of
inputs and output once) over uops' time. ``--beam N`` adds a column with BEAM-searched kernels.
The last line is the geometric mean of tinygrad's time over uops' (above 1: uops is faster).

    python bench/ops.py [--device CPU] [--runs 5] [--small] [--beam 2]

``uops bench`` calls ``main(argv)``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


def _best(fn: Callable[[], Any], runs: int) -> float:
    return _best_alternating([fn], runs)[0]


def _best_alternating(fns: list[Callable[[], Any]], runs: int) -> list[float]:
    """The best time of each of ``fns`` over ``runs`` rounds, one run of each per round: on a shared machine a
    busy spell then slows every side of a ratio, not only the one that happened to be timing."""
    for fn in fns:
        fn()  # warm-up: compiles, allocates
    best = [float("inf")] * len(fns)
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def _gelu_np(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layernorm_np(x: np.ndarray) -> np.ndarray:
    m = x.mean(axis=1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True) + 1e-5)


def _layernorm(x: Any) -> Any:
    m = x.mean(axis=1, keepdim=True)
    return (x - m) / (((x - m) * (x - m)).mean(axis=1, keepdim=True) + 1e-5).sqrt()


def _pool(x: Any, n: int) -> Any:
    return x.reshape(n // 2, 2, n // 2, 2).sum(axis=(1, 3))


@dataclass
class Case:
    name: str
    shapes: list[tuple[int, ...]]
    numpy: Callable[..., Any]
    graph: Callable[..., Any]  # the same math on uops or tinygrad tensors
    flops: float
    out_elems: int


def cases(small: bool) -> list[Case]:
    n = 16 * 1024 if small else 16 * 1024 * 1024
    s = 64 if small else 2048
    m = 64 if small else 1024
    om, ok, on = (63, 65, 67) if small else (1023, 1025, 1031)  # sizes no tile divides
    b, bm = (4, 32) if small else (16, 256)
    v = 128 if small else 4096
    return [
        Case(f"((a+b)*c).exp() [{n}]", [(n,)] * 3, lambda a, b, c: np.exp((a + b) * c),
             lambda a, b, c: ((a + b) * c).exp(), 3 * n, n),
        Case(f"gelu(x*y+x) [{n}]", [(n,)] * 2, lambda x, y: _gelu_np(x * y + x), lambda x, y: (x * y + x).gelu(),
             12 * n, n),
        Case(f"sum [{n}]", [(n,)], lambda x: x.sum(), lambda x: x.sum(), n, 1),
        Case(f"sum axis 0 [{s}^2]", [(s, s)], lambda x: x.sum(axis=0), lambda x: x.sum(axis=0), s * s, s),
        Case(f"sum axis 1 [{s}^2]", [(s, s)], lambda x: x.sum(axis=1), lambda x: x.sum(axis=1), s * s, s),
        Case(f"softmax rows [{s}^2]", [(s, s)], _softmax_np, lambda x: x.softmax(axis=1), 5 * s * s, s * s),
        Case(f"layernorm rows [{s}^2]", [(s, s)], _layernorm_np, _layernorm, 7 * s * s, s * s),
        Case(f"matmul [{m}^3]", [(m, m), (m, m)], lambda x, y: x @ y, lambda x, y: x @ y, 2 * m**3, m * m),
        Case(f"matmul [{om}x{ok}x{on}]", [(om, ok), (ok, on)], lambda x, y: x @ y, lambda x, y: x @ y,
             2 * om * ok * on, om * on),
        Case(f"batched matmul [{b}x{bm}^3]", [(b, bm, bm), (b, bm, bm)], lambda x, y: x @ y, lambda x, y: x @ y,
             2 * b * bm**3, b * bm * bm),
        Case(f"matvec [{v}^2 @ {v}]", [(v, v), (v,)], lambda x, y: x @ y, lambda x, y: x @ y, 2 * v * v, v),
        Case(f"2x2 sum-pool [{s}^2]", [(s, s)], lambda x: x.reshape(s // 2, 2, s // 2, 2).sum(axis=(1, 3)),
             lambda x: _pool(x, s), s * s, s * s // 4),
    ]  # fmt: skip


def _uops_fn(c: Case, xs: list[np.ndarray], device: str) -> tuple[Callable[[], Any], Callable[[], np.ndarray]]:
    from uops import Tensor
    from uops.plugins import Device

    ts = [Tensor(x, device=device).realize() for x in xs]
    runtime = Device[device].runtime

    def run() -> Any:
        out = c.graph(*ts).realize()
        runtime.synchronize()
        return out

    return run, lambda: c.graph(*ts).numpy()


def _tinygrad_fn(c: Case, xs: list[np.ndarray]) -> Callable[[], Any] | None:
    try:
        from tinygrad import Device as TDevice
        from tinygrad import Tensor as TTensor
    except ImportError:
        return None
    ts = [TTensor(x).realize() for x in xs]

    def run() -> Any:
        out = c.graph(*ts).realize()
        TDevice[TDevice.DEFAULT].synchronize()
        return out

    return run


def _fmt(t: float | None) -> str:
    return f"{t:9.4f}" if t is not None else f"{'n/a':>9s}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one table; returns a process exit code."""
    p = argparse.ArgumentParser(prog="uops bench", description="uops vs numpy vs tinygrad on common ops")
    p.add_argument("--device", default=None, help="uops device (default: CPU if available, else Device.DEFAULT)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per case (best is reported)")
    p.add_argument("--small", action="store_true", help="small sizes (a quick smoke run)")
    p.add_argument("--beam", type=int, default=0, metavar="N", help="also time BEAM-searched kernels (width N)")
    p.add_argument("--only", default="", help="run only the cases whose name contains this text")
    args = p.parse_args(argv)
    from uops.frontend import realize
    from uops.plugins import Device

    device = args.device or ("CPU" if "CPU" in Device else Device.DEFAULT)
    device = Device[device].name
    rng = np.random.default_rng(0)
    cols = ["uops", "GFLOP/s", "GB/s", "numpy", "tinygrad", "uops/numpy", "uops/tg"]
    if args.beam:
        cols += [f"BEAM={args.beam}", "beam/numpy"]
    header = f"{'case':30s} " + " ".join(f"{c:>10s}" for c in cols)
    load = f"; load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"device {device}; seconds, best of {args.runs}; ratio > 1 means uops is slower{load}")
    print(header)
    print("-" * len(header))
    bad = 0
    speedups: list[float] = []
    for c in cases(args.small):
        if args.only and args.only not in c.name:
            continue
        xs = [rng.standard_normal(s).astype(np.float32) for s in c.shapes]
        want = c.numpy(*xs)
        run_u, get_u = _uops_fn(c, xs, device)
        got = get_u()
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max()))):
            print(f"{c.name}: uops result disagrees with numpy (max abs err {np.abs(got - want).max():.3g})")
            bad += 1
        t_u, t_n = _best_alternating([run_u, lambda c=c, xs=xs: c.numpy(*xs)], args.runs)
        tg = _tinygrad_fn(c, xs)
        t_t = _best(tg, args.runs) if tg is not None else None
        nbytes = 4 * (sum(x.size for x in xs) + c.out_elems)
        row = [_fmt(t_u), f"{c.flops / t_u / 1e9:10.2f}", f"{nbytes / t_u / 1e9:10.2f}", _fmt(t_n), _fmt(t_t)]
        row += [f"{t_u / t_n:10.2f}", f"{t_u / t_t:10.2f}" if t_t else f"{'n/a':>10s}"]
        if t_t:
            speedups.append(t_t / t_u)
        if args.beam:
            os.environ["UOPS_BEAM"] = str(args.beam)
            realize._programs.clear()
            try:
                run_b, get_b = _uops_fn(c, xs, device)
                t_b = _best(run_b, args.runs)
            finally:
                del os.environ["UOPS_BEAM"]
                realize._programs.clear()
            row += [_fmt(t_b), f"{t_b / t_n:10.2f}"]
        print(f"{c.name:30s} " + " ".join(f"{x:>10s}" for x in row), flush=True)
    if speedups:
        geo = math.exp(sum(math.log(x) for x in speedups) / len(speedups))
        print(f"geomean speedup over tinygrad: {geo:.2f}x")
    if hasattr(os, "getloadavg"):
        print(f"load average at the end {os.getloadavg()[0]:.2f} (a shared machine times everything slower)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
