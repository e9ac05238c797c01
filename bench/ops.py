"""Front-end op benchmarks: uops vs numpy vs tinygrad (when importable), side by side, in one run.

Cases: an elementwise chain over 16M floats, a sum over 16M, softmax over 4096x1024 rows and a
1024^3 float32 matmul. Each time is the best of ``--runs`` after one warm-up (compiling is not
timed; building the lazy graph, scheduling and launching are). Inputs are already on the device.

    python bench/ops.py [--device CPU] [--runs 5] [--small]

``uops bench`` calls ``main(argv)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

N_ELEM = 16 * 1024 * 1024
SOFTMAX = (4096, 1024)
MATMUL = 1024


def _best(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm-up: compiles, allocates
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _cases(small: bool) -> dict[str, tuple[list[tuple[int, ...]], str]]:
    n = N_ELEM // 1024 if small else N_ELEM
    rows, cols = (64, 128) if small else SOFTMAX
    m = 64 if small else MATMUL
    return {
        f"elementwise ((a+b)*c).exp() [{n}]": ([(n,), (n,), (n,)], "ew"),
        f"sum [{n}]": ([(n,)], "sum"),
        f"softmax rows [{rows}x{cols}]": ([(rows, cols)], "softmax"),
        f"matmul [{m}^3]": ([(m, m), (m, m)], "matmul"),
    }


def _numpy_fn(kind: str, xs: list[np.ndarray]) -> Callable[[], Any]:
    if kind == "ew":
        return lambda: np.exp((xs[0] + xs[1]) * xs[2])
    if kind == "sum":
        return lambda: xs[0].sum()
    if kind == "softmax":

        def sm() -> np.ndarray:
            e = np.exp(xs[0] - xs[0].max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        return sm
    return lambda: xs[0] @ xs[1]


def _graph(kind: str, ts: list[Any]) -> Any:
    if kind == "ew":
        return ((ts[0] + ts[1]) * ts[2]).exp()
    if kind == "sum":
        return ts[0].sum()
    if kind == "softmax":
        return ts[0].softmax(axis=1)
    return ts[0] @ ts[1]


def _uops_fn(kind: str, xs: list[np.ndarray], device: str) -> tuple[Callable[[], Any], Callable[[], np.ndarray]]:
    from uops import Tensor
    from uops.plugins import Device

    ts = [Tensor(x, device=device).realize() for x in xs]
    runtime = Device[device].runtime

    def run() -> Any:
        out = _graph(kind, ts).realize()
        runtime.synchronize()
        return out

    return run, lambda: _graph(kind, ts).numpy()


def _tinygrad_fn(kind: str, xs: list[np.ndarray]) -> tuple[Callable[[], Any], Callable[[], np.ndarray]] | None:
    try:
        from tinygrad import Device as TDevice
        from tinygrad import Tensor as TTensor
    except ImportError:
        return None
    ts = [TTensor(x).realize() for x in xs]

    def run() -> Any:
        out = _graph(kind, ts).realize()
        TDevice[TDevice.DEFAULT].synchronize()
        return out

    return run, lambda: _graph(kind, ts).numpy()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one table; returns a process exit code."""
    p = argparse.ArgumentParser(prog="uops bench", description="uops vs numpy vs tinygrad on common ops")
    p.add_argument("--device", default=None, help="uops device (default: CPU if available, else Device.DEFAULT)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per case (best is reported)")
    p.add_argument("--small", action="store_true", help="small sizes (a quick smoke run)")
    args = p.parse_args(argv)
    from uops.plugins import Device

    device = args.device or ("CPU" if "CPU" in Device else Device.DEFAULT)
    device = Device[device].name
    rng = np.random.default_rng(0)
    header = f"{'case':36s} {'uops':>9s} {'numpy':>9s} {'tinygrad':>9s} {'uops/numpy':>11s} {'uops/tinygrad':>14s}"
    print(f"device {device}; seconds, best of {args.runs}; ratio > 1 means uops is slower")
    print(header)
    print("-" * len(header))
    bad = 0
    for name, (shapes, kind) in _cases(args.small).items():
        xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        want = _numpy_fn(kind, xs)()
        run_u, get_u = _uops_fn(kind, xs, device)
        got = get_u()
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max()))):
            print(f"{name}: uops result disagrees with numpy (max abs err {np.abs(got - want).max():.3g})")
            bad += 1
        t_u = _best(run_u, args.runs)
        t_n = _best(_numpy_fn(kind, xs), args.runs)
        tg = _tinygrad_fn(kind, xs)
        t_t = _best(tg[0], args.runs) if tg is not None else None
        tg_s = f"{t_t:9.3g}" if t_t is not None else f"{'n/a':>9s}"
        tg_r = f"{t_u / t_t:14.2f}" if t_t else f"{'n/a':>14s}"
        print(f"{name:36s} {t_u:9.3g} {t_n:9.3g} {tg_s} {t_u / t_n:11.2f} {tg_r}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
