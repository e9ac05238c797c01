"""A GPT-2-style decoder generating tokens greedily under ``uops.jit``, checked against numpy.

    python examples/gpt.py [--layers 2 --heads 2 --width 64 --vocab 256 --context 64]
                           [--weights model.safetensors] [--tokens 32] [--device CPU] [--check]

The weights are read from a safetensors file with GPT-2's tensor names (``wte.weight``,
``h.0.attn.c_attn.weight``, ...; GPT-2's Conv1D layout, ``x @ W``); when the file does not exist it is
written first from a fixed seed. The prompt goes through the model in one call (the prefill); then each
decode step is one jitted call: it reads the token and the position (a bound ``Variable``, so one capture
serves every position), writes the step's keys and values into the KV cache and returns the next token;
tokens/s is printed as it generates. ``--check`` runs the
same model in numpy (no cache: the whole sequence at every step) and compares the first 32 tokens
(identical) and the final logits (within 1e-3); it exits non-zero when they differ.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

import uops
from uops import Tensor, Variable
from uops.nn import Embedding, state


@dataclass(frozen=True)
class Config:
    layers: int = 2
    heads: int = 2
    width: int = 64
    vocab: int = 256
    context: int = 64

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


# ----- weights: a safetensors file (uops.nn.state reads and writes the format) -----


def save_weights(path: str, weights: dict[str, np.ndarray]) -> None:
    state.safe_save({k: Tensor(v, device="CPU") for k, v in weights.items()}, path)


def load_weights(path: str) -> dict[str, np.ndarray]:
    """Every tensor of the file as float32 (the numpy check reads them too)."""
    return {k: t.cast("float32").numpy() for k, t in state.safe_load(path, device="CPU").items()}


def random_weights(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Normal weights scaled by 1/sqrt(fan in), so that the blocks, not the token's own (tied) embedding, decide
    the next token: greedy decoding of a random model then wanders instead of repeating one token."""
    rng = np.random.default_rng(seed)
    d = cfg.width

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {"wte.weight": normal(cfg.vocab, d, std=0.5), "wpe.weight": normal(cfg.context, d, std=0.5)}
    fan, proj = 1 / math.sqrt(d), 1 / math.sqrt(d * cfg.layers)
    for i in range(cfg.layers):
        p = f"h.{i}."
        w[p + "ln_1.weight"] = 1 + normal(d, std=0.1)
        w[p + "ln_1.bias"] = normal(d)
        w[p + "attn.c_attn.weight"] = normal(d, 3 * d, std=2 * fan)
        w[p + "attn.c_attn.bias"] = normal(3 * d)
        w[p + "attn.c_proj.weight"] = normal(d, d, std=4 * proj)
        w[p + "attn.c_proj.bias"] = normal(d)
        w[p + "ln_2.weight"] = 1 + normal(d, std=0.1)
        w[p + "ln_2.bias"] = normal(d)
        w[p + "mlp.c_fc.weight"] = normal(d, 4 * d, std=fan)
        w[p + "mlp.c_fc.bias"] = normal(4 * d)
        w[p + "mlp.c_proj.weight"] = normal(4 * d, d, std=4 * proj)
        w[p + "mlp.c_proj.bias"] = normal(d)
    w["ln_f.weight"] = 1 + normal(d, std=0.1)
    w["ln_f.bias"] = normal(d)
    return w


# ----- the model in uops: one token per step, a KV cache per layer -----


def layer_norm(x: Tensor, w: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """In its own buffer: a matmul reading it would otherwise recompute it for every output column."""
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    return (d * ((d * d).mean(-1, keepdim=True) + eps).rsqrt() * w + b).contiguous()


class GPT:
    """GPT-2's decoder for one sequence; ``step`` is jitted: after two calls it only replays kernels."""

    def __init__(self, cfg: Config, weights: dict[str, np.ndarray], device: str):
        self.cfg, self.device = cfg, device
        # GPT-2 stores its projections as (in, out) for x @ W; kept here as (out, in), x.linear(W) reads each
        # output's weights contiguously along the reduction, which a one-token step is bound by
        self.w = {
            k: Tensor(np.ascontiguousarray(v.T) if v.ndim == 2 and k.startswith("h.") else v, device=device).realize()
            for k, v in weights.items()
        }
        shape = (cfg.heads, cfg.context, cfg.head_dim)
        # from host zeros, not Tensor.zeros: equal lazy zeros are one node, realized into one shared buffer
        self.cache = [
            (Tensor(np.zeros(shape, np.float32), device=device), Tensor(np.zeros(shape, np.float32), device=device))
            for _ in range(cfg.layers)
        ]
        self.pos = Variable("pos", 0, cfg.context - 1)
        self.wte, self.wpe = Embedding(cfg.vocab, cfg.width, device), Embedding(cfg.context, cfg.width, device)
        self.wte.weight, self.wpe.weight = self.w["wte.weight"], self.w["wpe.weight"]  # wte: the output layer too
        self.positions = Tensor.arange(cfg.context, dtype="int32", device=device).realize()

    def attention(self, x: Tensor, i: int, slot: Tensor, seen: Tensor, written: Tensor) -> Tensor:
        """Causal self-attention of ``x`` (T, d) over the cache, after writing the T new keys and values into it.

        ``slot`` (1, ctx, 1) is, for cache row r, the index among the T new tokens of the one it now holds (out of
        range where it holds none: the gather reads zeros there), ``seen`` (T, ctx) where token t may attend to row r,
        ``written`` (ctx, 1) where a row is written now."""
        cfg, w = self.cfg, self.w
        p = f"h.{i}.attn."
        h, hd, t = cfg.heads, cfg.head_dim, x.shape[0]
        # realized first: the two in-place cache writes run now and would each compute it again
        qkv = x.linear(w[p + "c_attn.weight"], w[p + "c_attn.bias"]).realize()  # (T, 3d)
        q, k, v = (qkv[:, j * cfg.width : (j + 1) * cfg.width].reshape(t, h, hd).transpose(0, 1) for j in range(3))
        keys, values = self.cache[i]  # (h, ctx, hd), written in place: each element reads only itself
        keys.assign(written.where(k.gather(1, slot), keys))  # one gathered read per row, not a one-hot matmul
        values.assign(written.where(v.gather(1, slot), values))
        scores = seen.where((q @ keys.transpose(-1, -2)) * (1.0 / math.sqrt(hd)), -math.inf)  # (h, T, ctx)
        out = (scores.softmax(-1).contiguous() @ values).transpose(0, 1).reshape(t, cfg.width)
        return out.linear(w[p + "c_proj.weight"], w[p + "c_proj.bias"])

    def mlp(self, x: Tensor, i: int) -> Tensor:
        w, p = self.w, f"h.{i}.mlp."
        h = x.linear(w[p + "c_fc.weight"], w[p + "c_fc.bias"]).gelu().contiguous()
        return h.linear(w[p + "c_proj.weight"], w[p + "c_proj.bias"])

    def forward(self, tokens: Tensor, start: Tensor) -> tuple[Tensor, Tensor]:
        """The next token and the logits after ``tokens`` (T,) at positions ``start``..; the cache is updated.

        One token per call decodes; the whole prompt in one call is the prefill."""
        w, cfg = self.w, self.cfg
        t = tokens.shape[0]
        offsets = self.positions[:t] if t <= cfg.context else Tensor.arange(t, dtype="int32", device=self.device)
        pos = (offsets + start).reshape(t, 1)  # each token's position
        x = self.wte(tokens) + self.wpe(pos.reshape(t))
        rows = self.positions.reshape(-1, 1)
        slot = rows - start
        seen = rows.reshape(1, -1) <= pos
        written = (slot >= 0) & (slot < t)
        for i in range(cfg.layers):
            x = x + self.attention(
                layer_norm(x, w[f"h.{i}.ln_1.weight"], w[f"h.{i}.ln_1.bias"]), i, slot.reshape(1, -1, 1), seen, written
            )
            # realized: the next layer's cache writes run eagerly and would otherwise compute this layer again
            x = (x + self.mlp(layer_norm(x, w[f"h.{i}.ln_2.weight"], w[f"h.{i}.ln_2.bias"]), i)).realize()
        x = layer_norm(x[t - 1 :], w["ln_f.weight"], w["ln_f.bias"])
        logits = (x @ w["wte.weight"].T).reshape(cfg.vocab)
        return logits.argmax(0).reshape(1), logits

    step = uops.jit(forward)

    def run(self, tokens: Tensor, start: int) -> tuple[Tensor, Tensor]:
        """``step`` at position ``start``: the next token and the logits (both realized: a plain call returns
        them lazy, and reading one and then the other would compute the last layers twice)."""
        nxt, logits = self.step(tokens, self.pos.bind(start, device=self.device))
        return nxt.realize(logits), logits

    def generate(self, prompt: list[int], n: int, log: bool = True) -> tuple[list[int], np.ndarray]:
        """Greedy: the prompt in one step (the prefill), then one step per new token; returns the ``n`` new tokens
        and the last logits."""
        if len(prompt) + n > self.cfg.context:
            raise ValueError(f"{len(prompt)} prompt + {n} new tokens do not fit a context of {self.cfg.context}")
        nxt, logits = self.run(Tensor(np.array(prompt, np.int32), device=self.device), 0)
        out = [int(nxt.item())]
        t0 = time.perf_counter()
        for k in range(1, n):
            if k == 3:  # decode calls 1 and 2 run the front end (the second one captured); from here they replay
                t0 = time.perf_counter()
            nxt, logits = self.run(nxt, len(prompt) + k - 1)
            out.append(int(nxt.item()))
            if log and k >= 3 and (len(out) % 16 == 0 or len(out) == n):
                rate = (k - 2) / (time.perf_counter() - t0)
                print(f"  {len(out):4d} tokens  {rate:8.1f} tokens/s (replayed steps)", flush=True)
        return out, logits.numpy()


# ----- the same model in numpy, without a cache: the whole sequence at every step -----


def numpy_forward(cfg: Config, w: dict[str, np.ndarray], tokens: list[int]) -> np.ndarray:
    """The logits after the last of ``tokens``."""

    def ln(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def gelu(x: np.ndarray) -> np.ndarray:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    t, d, h, hd = len(tokens), cfg.width, cfg.heads, cfg.head_dim
    x = w["wte.weight"][tokens] + w["wpe.weight"][:t]
    causal = np.tril(np.ones((t, t), dtype=bool))
    for i in range(cfg.layers):
        p = f"h.{i}."
        qkv = ln(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"]) @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, j * d : (j + 1) * d].reshape(t, h, hd).transpose(1, 0, 2) for j in range(3))
        s = np.where(causal, q @ k.transpose(0, 2, 1) / math.sqrt(hd), -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        a = ((e / e.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(t, d)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = ln(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"]) @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]
        x = x + gelu(m) @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = ln(x, w["ln_f.weight"], w["ln_f.bias"])
    return (x[-1] @ w["wte.weight"].T).astype(np.float32)


def numpy_generate(cfg: Config, w: dict[str, np.ndarray], prompt: list[int], n: int) -> tuple[list[int], np.ndarray]:
    seq = list(prompt)
    logits = numpy_forward(cfg, w, seq)
    out = []
    for k in range(n):
        out.append(int(np.argmax(logits)))
        seq.append(out[-1])
        if k + 1 < n:
            logits = numpy_forward(cfg, w, seq)
    return out, logits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=Config.layers)
    p.add_argument("--heads", type=int, default=Config.heads)
    p.add_argument("--width", type=int, default=Config.width)
    p.add_argument("--vocab", type=int, default=Config.vocab)
    p.add_argument("--context", type=int, default=Config.context)
    p.add_argument("--weights", help="a safetensors file (written from --seed when missing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tokens", type=int, default=32, help="tokens to generate")
    p.add_argument("--prompt", default="1,2,3", help="comma-separated token ids")
    p.add_argument("--device", default=None, help="a uops device (default: the default device)")
    p.add_argument("--check", action="store_true", help="compare tokens and final logits with numpy")
    args = p.parse_args(argv)
    cfg = Config(args.layers, args.heads, args.width, args.vocab, args.context)
    if cfg.width % cfg.heads:
        p.error(f"--width {cfg.width} is not a multiple of --heads {cfg.heads}")
    prompt = [int(t) for t in args.prompt.split(",")]
    if any(not 0 <= t < cfg.vocab for t in prompt):
        p.error(f"prompt token ids must be in [0, {cfg.vocab})")
    path = args.weights or os.path.join(
        tempfile.gettempdir(),
        f"uops_gpt_{cfg.layers}x{cfg.width}h{cfg.heads}v{cfg.vocab}c{cfg.context}s{args.seed}.safetensors",
    )
    if not os.path.exists(path):
        save_weights(path, random_weights(cfg, args.seed))
        print(f"wrote {path}")
    weights = load_weights(path)
    device = args.device or uops.Device.DEFAULT
    model = GPT(cfg, weights, device)
    print(f"GPT {cfg} on {device}")
    t0 = time.perf_counter()
    tokens, logits = model.generate(prompt, args.tokens)
    dt = time.perf_counter() - t0
    print(f"generated {tokens}")
    print(f"{args.tokens} tokens in {dt:.2f} s (the prefill and the first two decode steps build their kernels)")
    if not args.check:
        return 0
    want_tokens, want_logits = numpy_generate(cfg, weights, prompt, args.tokens)
    n = min(32, args.tokens)
    err = float(np.abs(logits - want_logits).max())
    same = tokens[:n] == want_tokens[:n]
    ok = same and err <= 1e-3
    verdict = "ok" if ok else "MISMATCH"
    print(
        f"check vs numpy: {verdict}: first {n} tokens {'equal' if same else 'differ'}, "
        f"final logits max abs err {err:.2e}"
    )
    if not same:
        print(f"numpy generated {want_tokens[:n]}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
