"""Time to first result: the cold first call of small workloads, uops against tinygrad, in one run.

Why: a user feels latency before throughput — the first call of a new shape pays for
scheduling, lowering, rendering, compiling and loading. Each (library, workload) pair runs in
a fresh interpreter with the compile caches off, `--runs` times; the table shows the minimum
seconds of the first call (imports excluded; inputs come from numpy arrays, so no RNG kernels), then the sum over all
workloads and the ratio uops/tinygrad (the goal is <= 0.5). `--whole` also shows the wall time
of the whole process (interpreter start and imports included); `--cpu` the CPU seconds of the
first call (the process's threads and its children, e.g. clang), which a loaded machine inflates
far less than wall time.

    python bench/latency.py [-n 5] [--device CPU] [--whole] [--cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

# each workload: a function of the library's Tensor class, returning a numpy array (the first result)
WORKLOADS: dict[str, str] = {
    "gelu chain": "x = T.rand(256, 256); out = (0.5 * x * (1 + (0.7978845608 * (x + 0.044715 * x * x * x)).tanh()))",
    "softmax": "x = T.rand(128, 512); out = x.softmax(-1)",
    "sum over an axis": "x = T.rand(512, 256); out = x.sum(0)",
    "transpose + add": "x = T.rand(256, 256); y = T.rand(256, 256); out = x.T + y",
    "layernorm": "x = T.rand(128, 512); m = x.mean(-1, keepdim=True); "
    "out = (x - m) / ((x - m).pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()",
    "matmul": "x = T.rand(128, 128); y = T.rand(128, 128); out = x @ y",
}

_CHILD = """
import resource, sys, time
def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
lib, device, body = sys.argv[1], sys.argv[2], sys.argv[3]
import numpy as np
if lib == "uops":
    from uops import Tensor
    def rand(*shape):
        return Tensor(np.random.default_rng(0).random(shape, dtype=np.float32), device=device)
else:
    from tinygrad import Tensor  # its device comes from DEV in the environment
    def rand(*shape):
        return Tensor(np.random.default_rng(0).random(shape, dtype=np.float32))
class T:
    rand = staticmethod(rand)
c0, t0 = cpu(), time.perf_counter()
ns = {"T": T}
exec(body, ns)
ns["out"].numpy()
print(time.perf_counter() - t0, cpu() - c0)
"""


def _env(lib: str, device: str, cache: str) -> dict[str, str]:
    env = dict(os.environ)
    if lib == "uops":
        env["UOPS_CACHE"] = "0"
    else:  # tinygrad's compile cache off, its own cache dir so nothing is shared between runs
        env["CACHELEVEL"] = "0"
        env["DISABLE_COMPILER_CACHE"] = "1"
        env["XDG_CACHE_HOME"] = cache
        env["DEV"] = device
    return env


def _first_call(lib: str, device: str, body: str, runs: int, cache: str) -> tuple[float, float, float]:
    """(min first-call seconds, min whole-process seconds, min first-call CPU seconds) over fresh interpreters."""
    calls, wholes, cpus = [], [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, lib, device, body],
            capture_output=True,
            text=True,
            env=_env(lib, device, cache),
            check=False,
        )
        wholes.append(time.perf_counter() - t0)
        if out.returncode != 0:
            raise RuntimeError(f"{lib} failed on {body!r}:\n{out.stderr[-2000:]}")
        call, cpu = out.stdout.split()[-2:]
        calls.append(float(call))
        cpus.append(float(cpu))
    return min(calls), min(wholes), min(cpus)


def main(argv: list[str] | None = None) -> int:
    """Print the latency table; returns 0."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=5, help="fresh processes per case (minimum taken)")
    ap.add_argument("--device", default="CPU", help="device for both libraries (default CPU)")
    ap.add_argument("--whole", action="store_true", help="also show whole-process wall time")
    ap.add_argument("--cpu", action="store_true", help="also show the first call's CPU seconds (children included)")
    args = ap.parse_args(argv)
    libs = ["uops"] + (["tinygrad"] if importlib.util.find_spec("tinygrad") else [])
    if len(libs) == 1:
        print("tinygrad is not installed (pip install tinygrad): showing uops alone", file=sys.stderr)
    totals = {lib: [0.0, 0.0, 0.0] for lib in libs}
    head = f"{'workload':20s}" + "".join(f" {lib + ' s':>12s}" for lib in libs)
    if args.whole:
        head += "".join(f" {lib + ' whole':>14s}" for lib in libs)
    if args.cpu:
        head += "".join(f" {lib + ' cpu':>14s}" for lib in libs)
    print(f"cold first call, min of {args.runs} fresh processes, compile caches off, device {args.device}")
    print(head)
    with tempfile.TemporaryDirectory(prefix="uops-latency-") as cache:
        for name, body in WORKLOADS.items():
            row = {lib: _first_call(lib, args.device, body, args.runs, cache) for lib in libs}
            for lib in libs:
                for i in range(3):
                    totals[lib][i] += row[lib][i]
            print(_row(name, row, args.whole, args.cpu))
    print(_row("total", totals, args.whole, args.cpu))
    if "tinygrad" in totals:
        ratio = totals["uops"][0] / totals["tinygrad"][0]
        print(f"uops / tinygrad, first calls: {ratio:.2f} (goal <= 0.50)")
        if args.whole:
            print(f"uops / tinygrad, whole processes: {totals['uops'][1] / totals['tinygrad'][1]:.2f}")
        if args.cpu:
            print(f"uops / tinygrad, first-call CPU: {totals['uops'][2] / totals['tinygrad'][2]:.2f}")
    return 0


def _row(name: str, cells: Mapping[str, Sequence[float]], whole: bool, cpu: bool) -> str:
    """One table line: first-call seconds per library, then whole-process and CPU seconds if asked for."""
    line = f"{name:20s}" + "".join(f" {c[0]:12.3f}" for c in cells.values())
    if whole:
        line += "".join(f" {c[1]:14.3f}" for c in cells.values())
    if cpu:
        line += "".join(f" {c[2]:14.3f}" for c in cells.values())
    return line


if __name__ == "__main__":
    sys.exit(main())
