"""`uops demo`: a small real program on every usable device, checked against numpy.

It lists the devices, runs an MLP forward pass, a softmax and a matmul on each device that
can run, prints timings (first run includes compiling; the second costs only launches) and
kernel counts, and shows the four PROGRAM stages of one kernel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uops.codegen.program import format_stages, program_stages
from uops.frontend.tensor import Tensor
from uops.plugins import Device


@dataclass
class Case:
    name: str
    build: Callable[[dict[str, Tensor]], Tensor]
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    inputs: dict[str, tuple[int, ...]]
    rtol: float = 1e-4
    atol: float = 1e-4


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


CASES = [
    Case(
        "mlp forward 64x128 -> 256 -> 10",
        lambda t: (t["x"] @ t["w1"] + t["b1"]).relu() @ t["w2"] + t["b2"],
        lambda a: np.maximum(a["x"] @ a["w1"] + a["b1"], 0) @ a["w2"] + a["b2"],
        {"x": (64, 128), "w1": (128, 256), "b1": (256,), "w2": (256, 10), "b2": (10,)},
    ),
    Case(
        "softmax 128x512", lambda t: t["x"].softmax(axis=-1), lambda a: _softmax(a["x"]), {"x": (128, 512)}, 1e-4, 1e-6
    ),
    Case(
        "matmul 128x128 @ 128x128",
        lambda t: t["a"] @ t["b"],
        lambda a: a["a"] @ a["b"],
        {"a": (128, 128), "b": (128, 128)},
    ),
]


def usable_devices() -> list[str]:
    return [s.device for s in Device.status() if s.status == "ok" and s.runtime_ok]


def _run_case(case: Case, device: str, rng: np.random.Generator) -> tuple[bool, int, float, float, str]:
    arrays = {k: (rng.standard_normal(shape) * 0.5).astype(np.float32) for k, shape in case.inputs.items()}
    expected = case.reference(arrays)
    times = []
    kernels = 0
    got = np.empty(0)
    for _ in range(2):
        tensors = {k: Tensor(v, device=device).realize() for k, v in arrays.items()}
        out = case.build(tensors)
        kernels = len(out.schedule())
        t0 = time.perf_counter()
        got = out.numpy()
        times.append(time.perf_counter() - t0)
    ok = got.shape == expected.shape and bool(np.allclose(got, expected, rtol=case.rtol, atol=case.atol))
    err = float(np.max(np.abs(got - expected))) if got.shape == expected.shape and got.size else float("nan")
    detail = (
        f"max abs error {err:.2e}" if ok else f"MISMATCH: max abs error {err:.2e}, shapes {got.shape}/{expected.shape}"
    )
    return ok, kernels, times[0], times[1], detail


def show_stages(device: str) -> str:
    """The four stages of `(a + b).sum(axis=1)`'s kernel, rendered for ``device``."""
    a = Tensor(np.arange(32, dtype=np.float32).reshape(4, 8), device=device)
    b = Tensor(np.ones((4, 8), dtype=np.float32), device=device)
    items = [si for si in (a + b).sum(axis=1).schedule() if si.kind == "kernel"]
    if not items or items[-1].ast is None:
        raise RuntimeError("the demo expression produced no kernel")
    d = Device[device]
    return format_stages(program_stages(items[-1].ast, d.renderer, d.compiler))


def run(
    devices: list[str] | None = None,
    stages_device: str | None = None,
    show_devices: Callable[[], object] | None = None,
    echo: Callable[[str], None] = print,
) -> int:
    """Returns 0 when every case agrees with numpy on every device, else 1."""
    if show_devices is not None:
        show_devices()
    chosen = devices or usable_devices()
    if not chosen:
        echo("no device can run kernels; see `uops devices` for why")
        return 1
    failures = 0
    rng = np.random.default_rng(0)
    for device in chosen:
        echo(f"\n[{device}]")
        for case in CASES:
            echo(f"  {case.name:<34} ...")
            ok, kernels, first, second, detail = _run_case(case, device, rng)
            failures += not ok
            mark = "ok " if ok else "FAIL"
            echo(
                f"  {mark} {case.name:<33} {kernels} kernel(s)  first {first * 1e3:8.1f} ms"
                f"  cached {second * 1e3:8.2f} ms  {detail}"
            )
    target = stages_device or ("CPU" if "CPU" in chosen else chosen[0])
    echo(f"\nThe four stages of one kernel, (a + b).sum(axis=1) on {target}:")
    echo(show_stages(target))
    echo(f"\n{'all results agree with numpy' if not failures else f'{failures} result(s) disagree with numpy'}")
    return 0 if not failures else 1
