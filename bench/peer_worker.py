"""The peer side of ``bench/peers.py``: runs in a peer's own interpreter (one with jax, torch, tinygrad or only
numpy installed, and no uops), computes the workloads it is asked for and times single runs on request.

    PEER_PYTHON bench/peer_worker.py FRAMEWORK [--workloads PATH] [--device cpu|cuda|mps]

``--device`` places torch's tensors (``cuda`` against a uops GPU backend; ROCm builds of torch call theirs
``cuda`` too) and jax's (its first device of that platform: ``cuda`` needs a jax built for it); numpy and
tinygrad run where they run.

It speaks JSON lines: one request on stdin, one answer on the original stdout (whatever a library prints
goes to stderr instead). Requests:

- ``{"cmd": "setup", "workload": NAME, "small": BOOL, "inputs": [NPY...], "out": DIR}``: load the inputs,
  build each variant of the framework (jax: ``jax.jit``; torch: ``torch.compile`` and eager), run each once
  (compiling, warming up) and save its result to ``DIR/<variant>.npy``. Answers
  ``{"results": {VARIANT: NPY}, "errors": {VARIANT: MESSAGE}}``.
- ``{"cmd": "time", "variant": VARIANT}``: one run of that variant of the last workload, waited for;
  answers ``{"seconds": S}``.
- ``{"cmd": "quit"}``.

The first line it writes is ``{"ready": true, "framework": ..., "variants": [...], "version": ...}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import numpy as np

# framework -> its variants, in the order the bench prints them
VARIANTS = {
    "numpy": ("numpy",),
    "jax": ("jax.jit",),
    "torch": ("torch.compile", "torch eager"),
    "tinygrad": ("tinygrad",),
}


def _load_workloads(path: str | None) -> ModuleType:
    file = Path(path) if path else Path(__file__).with_name("workloads.py")
    spec = importlib.util.spec_from_file_location("bench_workloads", file)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot load workloads from {file}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


# a variant: (run once and wait, result as numpy); built from the workload's function of the inputs
Built = tuple[Callable[[], Any], Callable[[], np.ndarray]]


def _numpy_variants(fn: Callable[..., Any], xs: list[np.ndarray], device: str) -> dict[str, Callable[[], Built]]:
    return {"numpy": lambda: (lambda: fn(*xs), lambda: np.asarray(fn(*xs)))}


def _jax_variants(fn: Callable[..., Any], xs: list[np.ndarray], device: str) -> dict[str, Callable[[], Built]]:
    import jax

    def build() -> Built:
        where = jax.devices("gpu" if device == "cuda" else device)[0]  # raises, naming the platform, without it
        ds = [jax.device_put(x, where) for x in xs]
        f = jax.jit(fn)
        return (lambda: f(*ds).block_until_ready()), (lambda: np.asarray(f(*ds)))

    return {"jax.jit": build}


def _torch_variants(fn: Callable[..., Any], xs: list[np.ndarray], device: str) -> dict[str, Callable[[], Built]]:
    import torch

    torch.set_grad_enabled(False)

    def build(f: Callable[..., Any]) -> Built:
        ts = [torch.from_numpy(x.copy()).to(device) for x in xs]  # a torch without the device says so here

        def run() -> Any:
            out = f(*ts)
            torch_synchronize(torch, device)
            return out

        return run, (lambda: f(*ts).cpu().numpy())

    return {"torch.compile": lambda: build(torch.compile(fn)), "torch eager": lambda: build(fn)}


def torch_synchronize(torch: Any, device: str) -> None:
    """Wait for what torch queued on a GPU (a call returns before its kernels finish); nothing to wait for on the
    CPU. ``bench/models.py`` times its torch peers with it too."""
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _tinygrad_variants(fn: Callable[..., Any], xs: list[np.ndarray], device: str) -> dict[str, Callable[[], Built]]:
    from tinygrad import Device, Tensor

    def build() -> Built:
        ts = [Tensor(x).realize() for x in xs]

        def run() -> Any:
            out = fn(*ts).realize()
            Device[Device.DEFAULT].synchronize()
            return out

        return run, lambda: fn(*ts).numpy()

    return {"tinygrad": build}


_BUILDERS = {"numpy": _numpy_variants, "jax": _jax_variants, "torch": _torch_variants, "tinygrad": _tinygrad_variants}


def _version(framework: str) -> str:
    """The installed version (importing the framework first, so a peer without it fails to start)."""
    import importlib.metadata

    mod = __import__(framework)
    try:
        return importlib.metadata.version(framework)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(mod, "__version__", "?"))


def serve(framework: str, workloads: ModuleType, stdin: TextIO, stdout: TextIO, device: str = "cpu") -> None:
    """Answer requests until ``quit`` or the end of stdin."""

    def say(msg: dict[str, Any]) -> None:
        stdout.write(json.dumps(msg) + "\n")
        stdout.flush()

    say({"ready": True, "framework": framework, "variants": list(VARIANTS[framework]), "version": _version(framework)})
    runs: dict[str, Callable[[], Any]] = {}
    for line in stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            return
        if req["cmd"] == "setup":
            runs.clear()
            w = next((w for w in workloads.workloads(req["small"]) if w.name == req["workload"]), None)
            if w is None:
                raise KeyError(f"{workloads.__file__} has no workload named {req['workload']!r}")
            xs = [np.load(p) for p in req["inputs"]]
            results: dict[str, str] = {}
            errors: dict[str, str] = {}
            for variant, build in _BUILDERS[framework](w.for_framework(framework), xs, device).items():
                try:
                    run, result = build()
                    run()  # compile and warm up
                    out = os.path.join(req["out"], variant.replace(" ", "_") + ".npy")
                    np.save(out, np.asarray(result(), dtype=np.float32))
                except Exception as e:  # a peer that cannot run a workload says why; the bench goes on
                    traceback.print_exc(file=sys.stderr)
                    errors[variant] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                    continue
                runs[variant], results[variant] = run, out
            say({"results": results, "errors": errors})
        elif req["cmd"] == "time":
            run = runs[req["variant"]]
            t0 = time.perf_counter()
            run()
            say({"seconds": time.perf_counter() - t0})
        else:
            raise ValueError(f"unknown request {req!r}")


def main() -> int:
    p = argparse.ArgumentParser(description="a peer framework's side of bench/peers.py (JSON lines on stdin/stdout)")
    p.add_argument("framework", choices=sorted(VARIANTS))
    p.add_argument("--workloads", default=None, help="the workloads module (default: workloads.py beside this file)")
    p.add_argument("--device", default="cpu", help="where torch and jax compute: cpu, cuda or mps")
    args = p.parse_args()
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # library chatter must not corrupt the protocol
    serve(args.framework, _load_workloads(args.workloads), sys.stdin, proto, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
