"""A 2-layer MLP forward pass on random data, on every available device, checked against numpy.

    python examples/mlp.py [--batch 64] [--hidden 128]

Exits non-zero when any device disagrees with numpy.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from uops import Tensor


def mlp_numpy(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w1.T + b1, 0)
    logits = h @ w2.T + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mlp_uops(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return x.linear(w1, b1).relu().linear(w2, b2).softmax(axis=1)


def devices() -> list[str]:
    """Every device that can compile and run here."""
    from uops.plugins import Device

    return sorted({row.device for row in Device.status() if row.status == "ok"} | {"PYTHON"})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--inputs", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.inputs)).astype(np.float32)
    w1 = (rng.standard_normal((args.hidden, args.inputs)) / np.sqrt(args.inputs)).astype(np.float32)
    b1 = (rng.standard_normal(args.hidden) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((args.classes, args.hidden)) / np.sqrt(args.hidden)).astype(np.float32)
    b2 = (rng.standard_normal(args.classes) * 0.1).astype(np.float32)
    want = mlp_numpy(x, w1, b1, w2, b2)
    failed = []
    for dev in devices():
        t0 = time.perf_counter()
        out = mlp_uops(*(Tensor(a, device=dev) for a in (x, w1, b1, w2, b2)))
        n_kernels = sum(1 for s in out.schedule() if s.kind == "kernel")
        got = out.numpy()
        dt = time.perf_counter() - t0
        err = float(np.abs(got - want).max())
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-6)
        print(f"{dev:10s} {'ok' if ok else 'MISMATCH':8s} max abs err {err:.2e}  {n_kernels} kernels  {dt:.3f}s")
        if not ok:
            failed.append(dev)
    if failed:
        print(f"mismatch against numpy on: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
