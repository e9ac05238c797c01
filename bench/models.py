"""Model benchmarks: GPT-2-style greedy decoding, uops (``uops.jit``) vs tinygrad (``TinyJit``) vs torch eager.

The model is examples/gpt.py's (6 layers, width 384, 6 heads, vocab 4096, context 256 by default), with the
same random weights in every framework; each decode step feeds one token, updates the KV cache and reads
the next (greedy) token back to the host, as a generating program does. Times are the best of ``--runs``
rounds of ``--steps`` steps after warm-up (compiling and capturing are not timed); the frameworks take
turns round by round, so a busy spell on a shared machine slows every side of a ratio. The generated tokens
of every framework are compared (they must agree: the same model).

Also measured: the JIT's replay cost per launched kernel (a chain of ``--chain`` tiny kernels, replayed,
over the chain length) against the front end's cost per op without the JIT (building, scheduling and
launching the same chain eagerly).

Training (``--only train``, or in every full run): the digits CNN of examples/train_digits.py (conv-relu-pool
twice, then linear; Adam; batch 64), steps/s of a jitted step (forward, backward, update; a fresh batch
uploaded each step) in uops vs the same model in tinygrad (``TinyJit``) and in torch eager; and one conv2d
3x3 64->64 on 8x64x56x56 forward plus the gradients of input and weight (uops and tinygrad jitted), results
compared. torch and tinygrad are optional peers, used when this interpreter can import them. On a GPU
backend (``--device CUDA``, AMD, METAL) torch trains and convolves on that GPU (``cuda``/``mps``); tinygrad and
the decoding peers run on the CPU only. Without scikit-learn, random images of the digits' shape stand in.

    python bench/models.py [--device CPU] [--steps 32] [--runs 3] [--small] [--only decode|train]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_worker import torch_synchronize  # noqa: E402
from peers import peer_device, settled_seconds  # noqa: E402  (sibling scripts of bench/)

_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gpt.py"
_DIGITS = _EXAMPLE.parent / "train_digits.py"


def _gpt_module() -> Any:
    spec = importlib.util.spec_from_file_location("uops_example_gpt", _EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


# ----- one decoder per framework: decode(steps) generates from the current state and returns the tokens -----


def _uops_decoder(gpt: Any, cfg: Any, w: dict[str, np.ndarray], device: str) -> Callable[[int, list[int]], list[int]]:
    from uops import Tensor

    model = gpt.GPT(cfg, w, device)

    def decode(start: int, prompt: list[int], steps: int = 0) -> list[int]:
        nxt, _ = model.run(Tensor(np.array(prompt, np.int32), device=device), start)
        out = [int(nxt.item())]
        for p in range(start + len(prompt), start + len(prompt) + steps):
            nxt, _ = model.run(nxt, p)
            out.append(int(nxt.item()))
        return out

    return decode


def _tinygrad_decoder(cfg: Any, w: dict[str, np.ndarray]) -> Callable[[int, list[int]], list[int]] | None:
    try:
        from tinygrad import Tensor as TT
        from tinygrad import TinyJit, UOp
    except ImportError:
        return None
    h, hd, d, ctx = cfg.heads, cfg.head_dim, cfg.width, cfg.context
    tw = {k: TT(np.ascontiguousarray(v.T) if v.ndim == 2 and k.startswith("h.") else v).realize() for k, v in w.items()}
    caches = [TT.zeros(2, h, ctx, hd).contiguous().realize() for _ in range(cfg.layers)]

    def ln(x: Any, g: Any, b: Any) -> Any:
        return x.layernorm(eps=1e-5) * g + b

    def forward(tok: Any, pos: Any) -> Any:
        t = tok.shape[0]
        x = tw["wte.weight"][tok] + tw["wpe.weight"].shrink(((pos, pos + t), None))  # (T, d)
        mask = TT.full((t, t), -math.inf).triu(1).pad((None, (pos, 0))) if t > 1 else None
        for i in range(cfg.layers):
            p = f"h.{i}."
            a = ln(x, tw[p + "ln_1.weight"], tw[p + "ln_1.bias"]).linear(
                tw[p + "attn.c_attn.weight"].T, tw[p + "attn.c_attn.bias"]
            )
            q, k, v = (a[:, j * d : (j + 1) * d].reshape(t, h, hd).transpose(0, 1) for j in range(3))
            caches[i][:, :, pos : pos + t, :].assign(TT.stack(k, v)).realize()
            keys, values = caches[i][0, :, 0 : pos + t, :], caches[i][1, :, 0 : pos + t, :]
            s = q @ keys.transpose(-1, -2) * (1.0 / math.sqrt(hd))
            att = (s if mask is None else s + mask).softmax(-1) @ values  # (h, T, hd)
            o = att.transpose(0, 1).reshape(t, d)
            x = x + o.linear(tw[p + "attn.c_proj.weight"].T, tw[p + "attn.c_proj.bias"])
            m = ln(x, tw[p + "ln_2.weight"], tw[p + "ln_2.bias"]).linear(
                tw[p + "mlp.c_fc.weight"].T, tw[p + "mlp.c_fc.bias"]
            )
            x = x + m.gelu().linear(tw[p + "mlp.c_proj.weight"].T, tw[p + "mlp.c_proj.bias"])
        x = ln(x[t - 1 :], tw["ln_f.weight"], tw["ln_f.bias"])
        return (x @ tw["wte.weight"].T).argmax(-1).realize()

    step, prefill = TinyJit(forward), TinyJit(forward)
    var = UOp.variable("pos", 0, ctx - 1)

    def decode(start: int, prompt: list[int], steps: int = 0) -> list[int]:
        if len(prompt) > 1:  # a prefill is only ever at position 0 here: a constant, not a variable
            tok = prefill(TT(prompt).realize(), start)
        else:
            tok = step(TT(prompt).realize(), var.bind(start))
        out = [int(tok.item())]
        for p in range(start + len(prompt), start + len(prompt) + steps):
            tok = step(TT([out[-1]]).realize(), var.bind(p))
            out.append(int(tok.item()))
        return out

    return decode


def _torch_decoder(cfg: Any, w: dict[str, np.ndarray]) -> Callable[[int, list[int]], list[int]] | None:
    try:
        import torch
    except ImportError:
        return None
    h, hd, d, ctx = cfg.heads, cfg.head_dim, cfg.width, cfg.context
    tw = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}
    caches = [torch.zeros(2, h, ctx, hd) for _ in range(cfg.layers)]
    f = torch.nn.functional

    @torch.inference_mode()
    def forward(tokens: list[int], pos: int) -> int:
        t = len(tokens)
        x = tw["wte.weight"][torch.tensor(tokens)] + tw["wpe.weight"][pos : pos + t]
        mask = torch.full((t, pos + t), -math.inf).triu(pos + 1)
        for i in range(cfg.layers):
            p = f"h.{i}."
            a = f.layer_norm(x, (d,), tw[p + "ln_1.weight"], tw[p + "ln_1.bias"], 1e-5)
            a = a @ tw[p + "attn.c_attn.weight"] + tw[p + "attn.c_attn.bias"]
            q, k, v = (a[:, j * d : (j + 1) * d].reshape(t, h, hd).transpose(0, 1) for j in range(3))
            caches[i][0, :, pos : pos + t] = k
            caches[i][1, :, pos : pos + t] = v
            keys, values = caches[i][0, :, : pos + t], caches[i][1, :, : pos + t]
            att = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(hd) + mask, -1) @ values
            x = x + att.transpose(0, 1).reshape(t, d) @ tw[p + "attn.c_proj.weight"] + tw[p + "attn.c_proj.bias"]
            m = f.layer_norm(x, (d,), tw[p + "ln_2.weight"], tw[p + "ln_2.bias"], 1e-5)
            m = f.gelu(m @ tw[p + "mlp.c_fc.weight"] + tw[p + "mlp.c_fc.bias"], approximate="tanh")
            x = x + m @ tw[p + "mlp.c_proj.weight"] + tw[p + "mlp.c_proj.bias"]
        x = f.layer_norm(x[t - 1 :], (d,), tw["ln_f.weight"], tw["ln_f.bias"], 1e-5)
        return int((x @ tw["wte.weight"].T).argmax(-1).item())

    def decode(start: int, prompt: list[int], steps: int = 0) -> list[int]:
        out = [forward(prompt, start)]
        for p in range(start + len(prompt), start + len(prompt) + steps):
            out.append(forward([out[-1]], p))
        return out

    return decode


# ----- the JIT's replay cost per kernel -----


def replay_overhead(device: str, chain: int, runs: int) -> tuple[float, float]:
    """(seconds per kernel replayed, seconds per op run eagerly) for a chain of tiny dependent kernels."""
    import uops
    from uops import Tensor

    def f(x: Any) -> Any:
        for _ in range(chain):
            x = (x + 1).contiguous()
        return x

    jf = uops.jit(f)
    x = Tensor(np.zeros(4, np.float32), device=device).realize()
    for _ in range(3):
        jf(x).realize()
    want = np.full(4, chain, np.float32)
    assert np.array_equal(jf(x).numpy(), want) and jf.captures == 1
    f(x).realize()
    best_jit = best_eager = math.inf
    for _ in range(runs):
        t0 = time.perf_counter()
        jf(x)
        best_jit = min(best_jit, time.perf_counter() - t0)
        t0 = time.perf_counter()
        f(x).realize()
        best_eager = min(best_eager, time.perf_counter() - t0)
    return best_jit / chain, best_eager / chain


def _digits_module() -> Any:
    spec = importlib.util.spec_from_file_location("train_digits", _DIGITS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _uops_trainer(device: str) -> Callable[[np.ndarray, np.ndarray], float]:
    from uops import Tensor, nn
    from uops.nn.optim import Adam

    td = _digits_module()
    model = td.make_model(device)
    step = td.make_step(model, Adam(nn.get_parameters(model), lr=3e-3))

    def run(xs: np.ndarray, ys: np.ndarray) -> float:
        losses = [step(Tensor(x, device=device), Tensor(y, device=device)) for x, y in zip(xs, ys)]
        return float(losses[-1].item())

    return run


def _tinygrad_trainer() -> Callable[[np.ndarray, np.ndarray], float] | None:
    try:
        from tinygrad import Tensor as TT
        from tinygrad import TinyJit
        from tinygrad import nn as tnn
        from tinygrad.helpers import Context
    except ImportError:
        return None
    layers = [tnn.Conv2d(1, 16, 3, padding=1), tnn.Conv2d(16, 32, 3, padding=1), tnn.Linear(32 * 2 * 2, 10)]

    def model(x: Any) -> Any:
        x = layers[0](x).relu().max_pool2d(2)
        x = layers[1](x).relu().max_pool2d(2)
        return layers[2](x.flatten(1))

    opt = tnn.optim.Adam(tnn.state.get_parameters(layers), lr=3e-3)

    @TinyJit
    def step(x: Any, y: Any) -> Any:
        with Context(TRAINING=1):  # tinygrad's optimizers step only in training mode
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    def run(xs: np.ndarray, ys: np.ndarray) -> float:
        losses = [step(TT(x), TT(y)) for x, y in zip(xs, ys)]
        return float(losses[-1].item())

    return run


def _torch_on(device: str) -> tuple[Any, str] | None:
    """(torch, its device name) to compare with uops on ``device``: the CPU, or the GPU of a GPU backend; None where
    uops runs elsewhere (an emulator: nothing to compare), torch is not installed or lacks that device (a line says
    so). An optional peer, imported only here."""
    where = peer_device(device)
    if device != "CPU" and where == "cpu":
        return None
    try:
        import torch
    except ImportError:
        return None
    ok = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}[where]
    if not ok:
        print(f"  (torch {torch.__version__} has no {where} device: no torch peer for {device})")
        return None
    return torch, where


def _torch_trainer(device: str) -> Callable[[np.ndarray, np.ndarray], float] | None:
    """The same CNN, loss and Adam in torch eager, on the CPU or on the GPU uops runs on."""
    found = _torch_on(device)
    if found is None:
        return None
    torch, where = found
    tnn = torch.nn
    model = tnn.Sequential(
        tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(), tnn.Linear(32 * 2 * 2, 10),
    ).to(where)  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def run(xs: np.ndarray, ys: np.ndarray) -> float:
        loss = None
        for x, y in zip(xs, ys):
            opt.zero_grad()
            tx, ty = torch.from_numpy(x).to(where), torch.from_numpy(y).long().to(where)
            loss = tnn.functional.cross_entropy(model(tx), ty)
            loss.backward()
            opt.step()
        assert loss is not None
        return float(loss.item())

    return run


def _torch_conv(device: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], list[np.ndarray]] | None:
    found = _torch_on(device)
    if found is None:
        return None
    torch, where = found

    def run(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
        tx = torch.from_numpy(x).to(where).requires_grad_()
        tw = torch.from_numpy(w).to(where).requires_grad_()
        y = torch.nn.functional.conv2d(tx, tw, padding=1)
        gx, gw = torch.autograd.grad((y * torch.from_numpy(g).to(where)).sum(), (tx, tw))
        torch_synchronize(torch, where)
        return [y.detach().cpu().numpy(), gx.cpu().numpy(), gw.cpu().numpy()]

    return run


def _uops_conv(device: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], list[np.ndarray]]:
    from uops import Tensor, jit

    @jit
    def f(x: Tensor, w: Tensor, g: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y = x.conv2d(w, padding=1)
        gx, gw = (y * g).sum().gradient(x, w)
        return y, gx, gw

    def run(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
        out = f(
            Tensor(x, device=device, requires_grad=True),
            Tensor(w, device=device, requires_grad=True),
            Tensor(g, device=device),
        )
        return [t.numpy() for t in out]

    return run


def _tinygrad_conv() -> Callable[[np.ndarray, np.ndarray, np.ndarray], list[np.ndarray]] | None:
    try:
        from tinygrad import Tensor as TT
        from tinygrad import TinyJit
    except ImportError:
        return None

    @TinyJit
    def f(x: Any, w: Any, g: Any) -> list[Any]:
        y = x.conv2d(w, padding=1)
        gx, gw = (y * g).sum().gradient(x, w)
        return [y.realize(), gx.realize(), gw.realize()]

    def run(x: np.ndarray, w: np.ndarray, g: np.ndarray) -> list[np.ndarray]:
        return [t.numpy() for t in f(TT(x), TT(w), TT(g))]

    return run


def training(device: str, steps: int, runs: int) -> bool:
    """Print the training section; returns whether the conv results of the frameworks agree."""
    rng = np.random.default_rng(0)
    try:
        x, y, _, _ = _digits_module().load(0)
    except ImportError as e:  # a GPU machine without scikit-learn: the step's speed does not depend on the pixels
        print(f"  ({e}: random 8x8 images and labels stand in for the digits)")
        x, y = rng.random((1437, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 1437).astype(np.int32)
    batches = [rng.permutation(len(y))[:64] for _ in range(steps)]
    xs, ys = np.stack([x[i] for i in batches]), np.stack([y[i] for i in batches])
    trainers: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {"uops": _uops_trainer(device)}
    tg = _tinygrad_trainer() if device == "CPU" else None
    if tg is not None:
        trainers["tinygrad"] = tg
    th = _torch_trainer(device)
    if th is not None:
        trainers["torch"] = th
    print(f"training the digits CNN on {device} (batch 64, Adam): steps/s, best of {runs} rounds of {steps} steps")
    for run in trainers.values():
        run(xs[:3], ys[:3])  # warm-up: compile, capture
    best = dict.fromkeys(trainers, math.inf)
    for _ in range(runs):
        for name, run in trainers.items():
            best[name] = min(best[name], settled_seconds(lambda run=run: run(xs, ys)))
    _report_faster(best, lambda t: f"{steps / t:8.1f} steps/s")
    cx = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    cw = (rng.standard_normal((64, 64, 3, 3), dtype=np.float32) / 24).astype(np.float32)
    cg = rng.standard_normal((8, 64, 56, 56), dtype=np.float32)
    convs: dict[str, Callable[..., list[np.ndarray]]] = {"uops": _uops_conv(device)}
    tc = _tinygrad_conv() if device == "CPU" else None
    if tc is not None:
        convs["tinygrad"] = tc
    tt = _torch_conv(device)
    if tt is not None:
        convs["torch"] = tt
    print(f"conv2d 3x3 64->64, 8x64x56x56, forward + input and weight gradients on {device}: ms, best of {runs}")
    outs = {k: [f(cx, cw, cg), f(cx, cw, cg)][-1] for k, f in convs.items()}  # warm-up: compile, capture
    best = dict.fromkeys(convs, math.inf)
    for _ in range(runs):
        for name, f in convs.items():
            best[name] = min(best[name], settled_seconds(lambda f=f: f(cx, cw, cg)))
    _report_faster(best, lambda t: f"{t * 1e3:8.1f} ms")
    agree = all(
        np.allclose(a, b, rtol=1e-3, atol=1e-2 * float(np.abs(b).max()))
        for o in outs.values()
        for a, b in zip(o, outs["uops"])
    )
    print(f"  conv results agree across frameworks: {agree}")
    return agree


def _report_faster(best: dict[str, float], fmt: Callable[[float], str]) -> None:
    """Like ``_report``, the ratio written as uops' speed over the peer's (>1: uops is faster)."""
    for name, t in best.items():
        vs = "" if name == "uops" else f"   uops speed / {name}: {t / best['uops']:.2f}x"
        print(f"  {name:9s} {fmt(t)}{vs}")


def _report(best: dict[str, float], fmt: Callable[[float], str]) -> None:
    for name, t in best.items():
        vs = "" if name == "uops" else f"   uops is {t / best['uops']:.2f}x {name}"
        print(f"  {name:9s} {fmt(t)}{vs}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="CPU")
    p.add_argument("--steps", type=int, default=32, help="decode steps per timed round")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--chain", type=int, default=200, help="kernels in the replay-overhead chain")
    p.add_argument("--prefill", type=int, default=None, help="prompt length of the prefill (default: the context)")
    p.add_argument("--small", action="store_true", help="a 2-layer, 128-wide model (a quick look)")
    p.add_argument("--only", choices=["decode", "train"], default=None, help="run one section")
    args = p.parse_args(argv)
    print("(a shared machine: other jobs slow some rounds; each number is the best round)")
    trained = True
    if args.only != "decode":
        trained = training(args.device, args.steps, args.runs)
        if args.only == "train":
            return 0 if trained else 1
    gpt = _gpt_module()
    cfg = gpt.Config(2, 2, 128, 1024, 128) if args.small else gpt.Config(6, 6, 384, 4096, 256)
    if 3 + args.runs * args.steps > cfg.context:
        p.error(f"--runs x --steps must fit the context ({cfg.context}) after 3 warm-up steps")
    args.prefill = args.prefill or cfg.context
    if not 1 < args.prefill <= cfg.context:
        p.error(f"--prefill must be in [2, {cfg.context}]")
    w = gpt.random_weights(cfg, seed=0)
    decoders: dict[str, Callable[..., list[int]]] = {"uops": _uops_decoder(gpt, cfg, w, args.device)}
    tg = _tinygrad_decoder(cfg, w) if args.device == "CPU" else None
    if tg is not None:
        decoders["tinygrad"] = tg
    th = _torch_decoder(cfg, w) if args.device == "CPU" else None
    if th is not None:
        decoders["torch"] = th
    print(f"decode, {cfg} on {args.device}: tokens/s, best of {args.runs} rounds of {args.steps} steps")
    tokens: dict[str, list[int]] = {k: dec(0, [1], 2) for k, dec in decoders.items()}  # warm-up: compile, capture
    pos = 3
    best = dict.fromkeys(decoders, math.inf)
    for _ in range(args.runs):
        for name, dec in decoders.items():
            step = functools.partial(dec, pos, steps=args.steps - 1)
            best[name] = min(best[name], settled_seconds(lambda s=step, t=tokens[name]: t.extend(s(t[-1:])), 2))
        pos += args.steps
    _report(best, lambda t: f"{args.steps / t:8.1f} tokens/s")
    agree = all(t == tokens["uops"] for t in tokens.values())
    n = args.prefill
    prompt = [int(t) for t in np.random.default_rng(1).integers(0, cfg.vocab, n)]
    print(f"prefill of {n} tokens: ms, best of {args.runs} after 2 warm-up calls")
    first = {k: [dec(0, prompt), dec(0, prompt)] for k, dec in decoders.items()}
    best = dict.fromkeys(decoders, math.inf)
    for _ in range(args.runs):
        for name, dec in decoders.items():
            best[name] = min(best[name], settled_seconds(lambda d=dec, f=first[name]: f.append(d(0, prompt)[0]), 2))
    _report(best, lambda t: f"{t * 1e3:8.1f} ms")
    agree = agree and all(v == first["uops"] for v in first.values())
    print(f"  tokens agree across frameworks: {agree}")
    per_kernel, per_op = replay_overhead(args.device, args.chain, max(args.runs, 5))
    print(
        f"JIT replay: {per_kernel * 1e6:.1f} us per kernel (a chain of {args.chain}); "
        f"without the JIT: {per_op * 1e6:.1f} us per op"
    )
    return 0 if agree and trained else 1


if __name__ == "__main__":
    sys.exit(main())
