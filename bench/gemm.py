"""GEMM benchmarks: uops vs numpy on the matmul shapes models run, side by side in one run.

Cases: square 1024^3, the MLP's two layers (512x1024 -> 4096 and 4096 -> 1024), decode's vector-matrix product
(1x4096 @ 4096^2), a matrix-vector product, skinny (8 rows, 8 columns) and odd (33x1000x77, 1023x1025x1031)
shapes, and the whole MLP ``relu(x @ w1 + b1) @ w2 + b2``. Each time is the best of ``--runs`` rounds after one
warm-up, uops and numpy taking turns round by round (on a shared machine a busy spell slows both sides of a ratio);
building the lazy graph, scheduling and launching are timed, compiling is not. Results are checked against numpy.

    python bench/gemm.py [--runs 7] [--only mlp]

The ratio column is numpy's time over uops' (above 1: uops is faster).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import time_in_turns  # noqa: E402  (a sibling script of bench/)

#: name -> (M, K, N); M = 0 marks a 1-D left operand (a vector times a matrix)
SHAPES: dict[str, tuple[int, int, int]] = {
    "matmul 1024^3": (1024, 1024, 1024),
    "mlp up 512x1024x4096": (512, 1024, 4096),
    "mlp down 512x4096x1024": (512, 4096, 1024),
    "decode 4096 @ 4096^2": (0, 4096, 4096),
    "matvec 4096^2 @ 4096": (4096, 4096, 1),
    "skinny 8x4096x4096": (8, 4096, 4096),
    "skinny 4096x4096x8": (4096, 4096, 8),
    "odd 33x1000x77": (33, 1000, 77),
    "odd 512x1024x768": (512, 1024, 768),
    "odd 1023x1025x1031": (1023, 1025, 1031),
}


def _report(name: str, flops: float, got: np.ndarray, want: np.ndarray, t_u: float, t_n: float) -> float:
    ok = np.allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
    print(f"{name:26s} {t_u * 1e3:10.3f} {t_n * 1e3:10.3f} {t_n / t_u:10.2f} {flops / t_u / 1e9:10.1f}"
          f"{'' if ok else '   WRONG'}", flush=True)  # fmt: skip
    return t_n / t_u


def main(argv: list[str] | None = None) -> int:
    """Run the cases and print one table; returns a process exit code."""
    p = argparse.ArgumentParser(description="uops vs numpy on GEMM shapes")
    p.add_argument("--runs", type=int, default=7, help="timed rounds per case (best is reported)")
    p.add_argument("--only", default="", help="run only the cases whose name contains this text")
    args = p.parse_args(argv)
    from uops import Tensor
    from uops.plugins import Device

    runtime = Device["CPU"].runtime
    rng = np.random.default_rng(0)
    print(f"{'case (CPU, ms)':26s} {'uops':>10s} {'numpy':>10s} {'numpy/uops':>10s} {'GFLOP/s':>10s}")
    ratios: list[float] = []
    for name, (m, k, n) in SHAPES.items():
        if args.only not in name:
            continue
        a = rng.standard_normal((m, k) if m else (k,)).astype(np.float32)
        b = rng.standard_normal((k, n) if n > 1 else (k,)).astype(np.float32)
        ta, tb = Tensor(a, device="CPU").realize(), Tensor(b, device="CPU").realize()

        def run(ta: Any = ta, tb: Any = tb) -> None:
            (ta @ tb).realize()
            runtime.synchronize()

        t_u, t_n = time_in_turns([run, lambda a=a, b=b: a @ b], [], args.runs)
        ratios.append(_report(name, 2 * max(m, 1) * k * n, (ta @ tb).numpy(), a @ b, t_u, t_n))
    if args.only in "mlp 512x1024 -> 4096 -> 1024, relu":
        x = rng.standard_normal((512, 1024)).astype(np.float32)
        w1 = (rng.standard_normal((1024, 4096)) * 0.03).astype(np.float32)
        b1 = rng.standard_normal(4096).astype(np.float32)
        w2 = (rng.standard_normal((4096, 1024)) * 0.03).astype(np.float32)
        b2 = rng.standard_normal(1024).astype(np.float32)
        ts = [Tensor(v, device="CPU").realize() for v in (x, w1, b1, w2, b2)]

        def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
            return ((x @ w1 + b1).relu()) @ w2 + b2

        def mlp_np() -> np.ndarray:
            return np.maximum(x @ w1 + b1, 0) @ w2 + b2

        def run_mlp() -> None:
            mlp(*ts).realize()
            runtime.synchronize()

        t_u, t_n = time_in_turns([run_mlp, mlp_np], [], args.runs)
        ratios.append(_report("mlp 512x1024>4096>1024", 4 * 512 * 1024 * 4096, mlp(*ts).numpy(), mlp_np(), t_u, t_n))
    if ratios:
        print(f"geomean numpy/uops {math.exp(sum(math.log(r) for r in ratios) / len(ratios)):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
