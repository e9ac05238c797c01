"""The op benchmarks' workloads, each defined once over a small namespace of array ops, so that uops, numpy,
tinygrad, jax and torch all compute the very same math from the very same inputs.

A workload is ``fn(xp, *inputs)``; ``xp`` is one framework's namespace below (``namespace(name)``), which
spells the few calls whose names differ (``exp``, ``softmax``, ``gelu``, ``sum``, ``mean``...) and leaves
``+``, ``*`` and ``@`` to the arrays. Each framework uses its own softmax and GELU, as its users would.
The module imports only numpy at the top: it is loaded by peer interpreters that have no uops.

Inputs come from ``inputs(workload, seed)`` (float32 standard normals); ``agrees`` is the one check every
result is held to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

FRAMEWORKS = ("numpy", "uops", "tinygrad", "jax", "torch")


@dataclass(frozen=True)
class Workload:
    """One case: its inputs' shapes, its math, and the work it does (for GFLOP/s, GB/s and the roofline).

    ``roof`` names the ceiling it is held to: ``read`` (reductions: bytes over the read bandwidth), ``triad``
    (streams that write as much as they read: bytes over the triad bandwidth) or ``fma`` (matmul-like: flops
    over the FMA peak). ``impl`` spells it differently for a framework where the common ``fn`` cannot.
    """

    name: str
    shapes: list[tuple[int, ...]]
    fn: Callable[..., Any]
    flops: float
    out_elems: int
    roof: str
    impl: dict[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Bytes of the inputs and the output, each moved once (float32)."""
        return 4 * (sum(math.prod(s) for s in self.shapes) + self.out_elems)

    def for_framework(self, framework: str) -> Callable[..., Any]:
        """The workload as a function of the inputs alone, for ``framework``'s arrays."""
        fn = self.impl.get(framework, self.fn)
        xp = namespace(framework)
        return lambda *xs: fn(xp, *xs)


def inputs(w: Workload, seed: int = 0) -> list[np.ndarray]:
    """The workload's inputs: float32 standard normals; the same seed gives the same arrays everywhere."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in w.shapes]


def agrees(got: np.ndarray, want: np.ndarray) -> bool:
    """The tolerance every framework's result is held to against numpy's."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return False
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    return bool(np.allclose(got, want, rtol=1e-3, atol=1e-3 * scale))


def max_error(got: np.ndarray, want: np.ndarray) -> str:
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    return f"max abs error {float(np.abs(got.astype(np.float64) - want).max()):.3g}"


def _gelu_tanh(xp: Any, x: Any) -> Any:
    return 0.5 * x * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _numpy() -> Any:
    def softmax(x: np.ndarray, axis: int) -> np.ndarray:
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    ns = SimpleNamespace(
        exp=np.exp,
        tanh=np.tanh,
        sqrt=np.sqrt,
        relu=lambda x: np.maximum(x, 0),
        softmax=softmax,
        sum=lambda x, axis=None: x.sum(axis=axis),
        mean=lambda x, axis, keepdims=False: x.mean(axis=axis, keepdims=keepdims),
        reshape=lambda x, shape: x.reshape(shape),
    )
    ns.gelu = lambda x: _gelu_tanh(ns, x)
    return ns


def _tensor() -> Any:
    """uops' and tinygrad's Tensor: the same method names."""
    return SimpleNamespace(
        exp=lambda x: x.exp(),
        tanh=lambda x: x.tanh(),
        sqrt=lambda x: x.sqrt(),
        relu=lambda x: x.relu(),
        gelu=lambda x: x.gelu(),
        softmax=lambda x, axis: x.softmax(axis=axis),
        sum=lambda x, axis=None: x.sum(axis=axis),
        mean=lambda x, axis, keepdims=False: x.mean(axis=axis, keepdim=keepdims),
        reshape=lambda x, shape: x.reshape(*shape),
    )


def _jax() -> Any:
    import jax
    import jax.numpy as jnp

    return SimpleNamespace(
        exp=jnp.exp,
        tanh=jnp.tanh,
        sqrt=jnp.sqrt,
        relu=jax.nn.relu,
        gelu=lambda x: jax.nn.gelu(x, approximate=True),
        softmax=lambda x, axis: jax.nn.softmax(x, axis=axis),
        sum=lambda x, axis=None: jnp.sum(x, axis=axis),
        mean=lambda x, axis, keepdims=False: jnp.mean(x, axis=axis, keepdims=keepdims),
        reshape=jnp.reshape,
    )


def _torch() -> Any:
    import torch
    import torch.nn.functional as F

    return SimpleNamespace(
        exp=torch.exp,
        tanh=torch.tanh,
        sqrt=torch.sqrt,
        relu=torch.relu,
        gelu=lambda x: F.gelu(x, approximate="tanh"),
        softmax=lambda x, axis: torch.softmax(x, dim=axis),
        sum=lambda x, axis=None: x.sum() if axis is None else x.sum(dim=axis),
        mean=lambda x, axis, keepdims=False: x.mean(dim=axis, keepdim=keepdims),
        reshape=lambda x, shape: x.reshape(shape),
    )


_NAMESPACES: dict[str, Callable[[], Any]] = {
    "numpy": _numpy,
    "uops": _tensor,
    "tinygrad": _tensor,
    "jax": _jax,
    "torch": _torch,
}


def namespace(framework: str) -> Any:
    """The ops namespace of ``framework`` (one of ``FRAMEWORKS``); imports that framework."""
    try:
        return _NAMESPACES[framework]()
    except KeyError:
        raise ValueError(f"unknown framework {framework!r}; choose from {list(_NAMESPACES)}") from None


def _layernorm(xp: Any, x: Any) -> Any:
    m = xp.mean(x, axis=1, keepdims=True)
    return (x - m) / xp.sqrt(xp.mean((x - m) * (x - m), axis=1, keepdims=True) + 1e-5)


def _mlp(xp: Any, x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    return xp.relu(x @ w1 + b1) @ w2 + b2


def workloads(small: bool = False) -> list[Workload]:
    """Every workload, at the bench's sizes (``small``: a quick smoke run's)."""
    n = 16 * 1024 if small else 16 * 1024 * 1024
    s = 64 if small else 2048
    m = 64 if small else 1024
    om, ok, on = (63, 65, 67) if small else (1023, 1025, 1031)  # sizes no tile divides
    b, bm = (4, 32) if small else (16, 256)
    v = 128 if small else 4096
    mb, mi, mh = (32, 64, 256) if small else (512, 1024, 4096)  # MLP: batch, in/out features, hidden
    return [
        Workload(f"((a+b)*c).exp() [{n}]", [(n,)] * 3, lambda xp, a, b, c: xp.exp((a + b) * c), 3 * n, n, "triad"),
        Workload(f"gelu(x*y+x) [{n}]", [(n,)] * 2, lambda xp, x, y: xp.gelu(x * y + x), 12 * n, n, "triad"),
        Workload(f"sum [{n}]", [(n,)], lambda xp, x: xp.sum(x), n, 1, "read"),
        Workload(f"sum axis 0 [{s}^2]", [(s, s)], lambda xp, x: xp.sum(x, axis=0), s * s, s, "read"),
        Workload(f"sum axis 1 [{s}^2]", [(s, s)], lambda xp, x: xp.sum(x, axis=1), s * s, s, "read"),
        Workload(f"softmax rows [{s}^2]", [(s, s)], lambda xp, x: xp.softmax(x, axis=1), 5 * s * s, s * s, "triad"),
        Workload(f"layernorm rows [{s}^2]", [(s, s)], _layernorm, 7 * s * s, s * s, "triad"),
        Workload(f"matmul [{m}^3]", [(m, m), (m, m)], lambda xp, x, y: x @ y, 2 * m**3, m * m, "fma"),
        Workload(f"matmul [{om}x{ok}x{on}]", [(om, ok), (ok, on)], lambda xp, x, y: x @ y, 2 * om * ok * on,
                 om * on, "fma"),
        Workload(f"batched matmul [{b}x{bm}^3]", [(b, bm, bm), (b, bm, bm)], lambda xp, x, y: x @ y,
                 2 * b * bm**3, b * bm * bm, "fma"),
        Workload(f"matvec [{v}^2 @ {v}]", [(v, v), (v,)], lambda xp, x, y: x @ y, 2 * v * v, v, "read"),
        Workload(f"2x2 sum-pool [{s}^2]", [(s, s)],
                 lambda xp, x: xp.sum(xp.reshape(x, (s // 2, 2, s // 2, 2)), axis=(1, 3)), s * s, s * s // 4, "read"),
        Workload(f"MLP relu [{mb}x{mi}->{mh}->{mi}]", [(mb, mi), (mi, mh), (mh,), (mh, mi), (mi,)], _mlp,
                 4 * mb * mi * mh + 2 * mb * mh + mb * mi, mb * mi, "fma"),
    ]  # fmt: skip
