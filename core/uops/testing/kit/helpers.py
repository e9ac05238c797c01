"""Shared pieces of the kit's checks: seeded inputs, numpy comparison, and running a hand-built kernel."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uops import Ops, Tensor, UOp, dtypes
from uops.codegen.program import ProgramSpec, get_program
from uops.dtypes import DType
from uops.plugins import Device

if TYPE_CHECKING:
    import pytest

__all__ = [
    "built_for", "close", "glob", "private_compile_cache", "require_api", "rnd", "run_child", "run_kernel",
    "supports_dtype",
]  # fmt: skip

RNG = np.random.default_rng(0)


def built_for(device: str) -> tuple[int, int]:
    """The plugin API ``device``'s plugin was built for (`Backend.plugin_api`; 1.0 when it declares none)."""
    from uops.plugins.api import LEGACY_API

    return Device[device].backend.plugin_api or LEGACY_API


def require_api(device: str, api: tuple[int, int], what: str) -> None:
    """Skip a check of a requirement that plugin API ``api`` added when ``device`` was built for an older one.

    Why: a minor release of the API only adds, also to what plugins are held to, so a plugin built for 1.0
    is checked against 1.0's contract (the frozen plugin in the core's ``tests/compat`` is)."""
    import pytest

    built = built_for(device)
    if built < api:
        pytest.skip(
            f"{what} is required since plugin API {api[0]}.{api[1]}; {device} was built for {built[0]}.{built[1]}"
        )


def rnd(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    """Uniform float32 inputs from the kit's seeded generator."""
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def close(t: Tensor, ref: np.ndarray | float, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``t`` realized equals numpy's ``ref`` in shape and, within tolerance, in value."""
    got = t.numpy()
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"shape {got.shape} != numpy's {ref.shape}"
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


def supports_dtype(device: str, dtype: DType | Any) -> bool:
    """Whether ``device``'s renderer computes ``dtype`` (a DType or a numpy dtype): not in its unsupported_dtypes."""
    from uops.dtypes import from_numpy

    dt = dtype if isinstance(dtype, DType) else from_numpy(dtype)
    return dt not in Device[device].renderer.unsupported_dtypes


def glob(slot: int, dt: DType = dtypes.float32) -> UOp:
    """The kernel parameter of buffer ``slot``."""
    return UOp(Ops.DEFINE_GLOBAL, dt.ptr(), (), slot)


def run_kernel(
    ast: UOp,
    device: str,
    inputs: list[np.ndarray],
    out_shape: tuple[int, ...],
    out_dtype: Any = np.float32,
    var_vals: dict[str, int] | None = None,
    spec: ProgramSpec | None = None,
) -> tuple[np.ndarray, ProgramSpec]:
    """Compile ``ast`` for ``device`` (unless ``spec`` is given), run it through the runtime's own
    allocator and loader (no frontend in between) and return slot 0's contents and the spec."""
    d = Device[device]
    spec = spec or get_program(ast, d.renderer, d.compiler)
    al = d.runtime.allocator
    out = np.zeros(out_shape, dtype=out_dtype)
    handles = [al.alloc(max(out.nbytes, 1))] + [al.alloc(max(x.nbytes, 1)) for x in inputs]
    for h, x in zip(handles[1:], inputs):
        al.copyin(h, memoryview(np.ascontiguousarray(x).tobytes()))
    g, loc = spec.launch_dims(var_vals)
    d.runtime.load(spec.name, spec.lib)(*handles, global_size=g, local_size=loc, vals=spec.vals(var_vals))
    d.runtime.synchronize()
    res = np.zeros(max(out.nbytes, 1), dtype=np.uint8)
    al.copyout(memoryview(res.data), handles[0])
    return res[: out.nbytes].view(out_dtype).reshape(out_shape), spec


def run_child(code: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (this one's: the same plugins); ``env`` overrides variables."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


@contextlib.contextmanager
def private_compile_cache(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The disk cache moved to ``directory`` (on, whatever the caller's environment says) and an
    empty in-process memo, while the block runs: a test sees only the entries it made."""
    from uops.compiler import clear_memory_cache

    monkeypatch.setenv("UOPS_CACHE_DIR", str(directory))
    monkeypatch.delenv("UOPS_CACHE", raising=False)
    clear_memory_cache()
    try:
        yield directory
    finally:
        clear_memory_cache()
