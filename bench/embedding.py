"""Embedding backward: the gradient of a (vocab x dim) table through ``emb(tokens)``, uops vs numpy's ``np.add.at``.

The forward is a gather (one load per element); its gradient adds each token's row of the upstream gradient
into the table's row for that token (repeats add up). Times are the best of ``--runs`` after a warm-up
(compiling is not timed), uops and numpy taking turns; the gradients are compared.

    python bench/embedding.py [--device CPU] [--vocab 50000] [--dim 256] [--tokens 64,256,1024] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import time_in_turns  # noqa: E402  (a sibling script of bench/)


def _one(emb: Any, table: np.ndarray, tokens: np.ndarray, up: np.ndarray, device: str, runs: int) -> bool:
    """Time one token count; False when the gradients differ."""
    from uops import Tensor

    tok_t, up_t = Tensor(tokens, device=device).realize(), Tensor(up, device=device).realize()

    def uops_step() -> Tensor:
        emb.weight.grad = None
        (emb(tok_t) * up_t).sum().backward()
        return emb.weight.grad.realize()

    def numpy_step() -> np.ndarray:
        g = np.zeros_like(table)
        np.add.at(g, tokens, up)
        return g

    t_uops, t_np = time_in_turns([uops_step, numpy_step], [], runs)
    err = float(np.abs(uops_step().numpy() - numpy_step()).max())
    print(
        f"  {len(tokens):5d} tokens: uops {t_uops * 1e3:8.2f} ms   numpy {t_np * 1e3:8.2f} ms   "
        f"numpy/uops {t_np / t_uops:5.2f}x   max abs err {err:.1e}"
    )
    return err <= 1e-4


def main(argv: list[str] | None = None) -> int:
    from uops import Tensor
    from uops.nn import Embedding

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="CPU")
    p.add_argument("--vocab", type=int, default=50000)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--tokens", default="64,256,1024", help="comma-separated token counts")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    table = rng.standard_normal((args.vocab, args.dim)).astype(np.float32)
    emb = Embedding(args.vocab, args.dim, device=args.device)
    emb.weight = Tensor(table, device=args.device, requires_grad=True).realize()
    print(f"Embedding({args.vocab}, {args.dim}) backward on {args.device}: ms, best of {args.runs}")
    ok = True
    for n in (int(t) for t in args.tokens.split(",")):
        tokens = rng.integers(0, args.vocab, n).astype(np.int32)
        up = rng.standard_normal((n, args.dim)).astype(np.float32)
        ok = _one(emb, table, tokens, up, args.device, args.runs) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
