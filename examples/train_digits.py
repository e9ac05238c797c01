"""Train a small CNN (conv-relu-pool twice, then linear) on scikit-learn's bundled 8x8 digits.

pip install "uops[examples]"        # scikit-learn: the digits ship inside it, nothing is downloaded
python examples/train_digits.py --device CPU --epochs 30
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from uops import Jit, Tensor, jit, nn
from uops.nn.optim import Adam, Optimizer


def load(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): images (N, 1, 8, 8) scaled to [0, 1], a fixed 80/20 split."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(y))
    n_train = int(0.8 * len(y))
    tr, te = order[:n_train], order[n_train:]
    return x[tr], y[tr], x[te], y[te]


def make_model(device: str) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, device=device),
        Tensor.relu,
        lambda x: x.max_pool2d(2),  # 8x8 -> 4x4
        nn.Conv2d(16, 32, 3, padding=1, device=device),
        Tensor.relu,
        lambda x: x.max_pool2d(2),  # 4x4 -> 2x2
        lambda x: x.flatten(1),
        nn.Linear(32 * 2 * 2, 10, device=device),
    )


def make_step(model: nn.Sequential, opt: Optimizer) -> Jit[Tensor]:
    """One training step (forward, backward, optimizer update) returning the loss, under ``jit``: the first
    call runs plainly, the second is captured, every later one replays the captured kernels."""

    @jit
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = model(x).cross_entropy(y)
        loss.backward()
        # the loss with the gradients, in one schedule: they share the forward pass, and once nothing lazy reads
        # the old weights (detach drops the loss's graph) the update writes them with no copy kept aside
        loss = loss.detach().realize(*(p.grad for p in opt.params if p.grad is not None))
        opt.step()
        return loss

    return step


def accuracy(model: nn.Sequential, x: np.ndarray, y: np.ndarray, device: str, batch: int = 512) -> float:
    hits = 0
    with Tensor.no_grad():
        for i in range(0, len(y), batch):
            pred = model(Tensor(x[i : i + batch], device=device)).argmax(1).numpy()
            hits += int((pred == y[i : i + batch]).sum())
    return hits / len(y)


def train(
    device: str = "CPU", epochs: int = 30, seed: int = 0, batch: int = 64, lr: float = 3e-3, log: bool = True
) -> dict[str, list[float] | float]:
    """Train and return the per-epoch losses and train accuracies and the held-out accuracy."""
    Tensor.manual_seed(seed)
    xtr, ytr, xte, yte = load(seed)
    model = make_model(device)
    opt = Adam(nn.get_parameters(model), lr=lr)
    rng = np.random.default_rng(seed)
    losses, accs = [], []
    steps = len(ytr) // batch
    step = make_step(model, opt)
    for epoch in range(epochs):
        order = rng.permutation(len(ytr))
        t0, step_losses = time.perf_counter(), []
        for s in range(steps):
            idx = order[s * batch : (s + 1) * batch]
            step_losses.append(step(Tensor(xtr[idx], device=device), Tensor(ytr[idx], device=device)))
        total = sum(float(t.item()) for t in step_losses)  # read back once the epoch's kernels have run
        dt = time.perf_counter() - t0
        losses.append(total / steps)
        accs.append(accuracy(model, xtr, ytr, device))
        if log:
            print(f"epoch {epoch + 1:3d}  loss {losses[-1]:.4f}  train acc {accs[-1]:.3f}  {steps / dt:7.1f} steps/s")
    test = accuracy(model, xte, yte, device)
    if log:
        print(f"held-out accuracy {test:.4f} ({len(yte)} images)")
    return {"loss": losses, "train_acc": accs, "test_acc": test}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    a = ap.parse_args()
    train(a.device, a.epochs, a.seed, a.batch, a.lr)


if __name__ == "__main__":
    main()
