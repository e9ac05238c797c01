"""Optimizers: SGD (momentum, nesterov, weight decay), Adam and AdamW.

Each ``step()`` builds every parameter's (and state's) update lazily and realizes them all in one
call, so the scheduler fuses each parameter's update into one kernel; ``assign`` gives every
holder of a parameter its new value.
"""

from __future__ import annotations

from uops.errors import UopsError
from uops.frontend.tensor import Tensor


class OptimizerError(UopsError, ValueError):
    """An optimizer got a bad setting or a parameter that cannot be trained."""


class Optimizer:
    """The parameters and ``zero_grad``; subclasses write ``_updates`` (the new value of each tensor)."""

    def __init__(self, params: list[Tensor], lr: float):
        if not params:
            raise OptimizerError("the optimizer got an empty parameter list")
        if lr < 0:
            raise OptimizerError(f"learning rate must be >= 0, got {lr}")
        for p in params:
            p.requires_grad = True
        self.params, self.lr = list(params), lr

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _updates(self) -> list[tuple[Tensor, Tensor]]:
        raise NotImplementedError

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient.

        Why the gradients are realized first, together: each ``assign`` runs when it is made, so a lazy gradient
        read by several updates (Adam's two moments, momentum and the weight) would be computed again in each
        of their kernels; one schedule of all gradients computes each once and shares the backward's work."""
        with Tensor.no_grad():
            grads = [p.grad for p in self.params if p.grad is not None]
            if grads:
                grads[0].realize(*grads[1:])
            pairs = self._updates()
            for t, v in pairs:
                t.assign(v)
            if pairs:
                pairs[0][0].realize(*(t for t, _ in pairs[1:]))


class SGD(Optimizer):
    """torch's SGD: ``g = grad + wd * p``; with momentum ``b = mu * b + g`` (the first step ``b = g``),
    ``g = b`` (or ``g + mu * b`` with nesterov); ``p -= lr * g``."""

    def __init__(
        self,
        params: list[Tensor],
        lr: float = 0.001,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        super().__init__(params, lr)
        if nesterov and momentum <= 0:
            raise OptimizerError("nesterov momentum needs momentum > 0")
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.bufs: list[Tensor | None] = [None] * len(self.params)

    def _updates(self) -> list[tuple[Tensor, Tensor]]:
        out = []
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad.detach()
            if self.weight_decay:
                g = g + self.weight_decay * p.detach()
            if self.momentum:
                b = self.bufs[i]
                if b is None:
                    b = self.bufs[i] = Tensor.zeros(*p.shape, dtype=p.dtype, device=p.device).contiguous().realize()
                    new_b = g
                else:
                    new_b = self.momentum * b + g
                out.append((b, new_b))
                g = g + self.momentum * new_b if self.nesterov else new_b
            out.append((p, p.detach() - self.lr * g))
        return out


class Adam(Optimizer):
    """Adam (``weight_decay`` added to the gradient, as torch's Adam); AdamW decays the weights instead."""

    decoupled = False
    #: ``weight_decay`` when it is not given: torch's default for each class
    default_weight_decay = 0.0

    def __init__(
        self,
        params: list[Tensor],
        lr: float = 0.001,
        b1: float = 0.9,
        b2: float = 0.999,
        eps: float = 1e-8,
        weight_decay: float | None = None,
    ):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps = b1, b2, eps
        self.weight_decay = self.default_weight_decay if weight_decay is None else weight_decay
        self.t = 0
        # b1**t and b2**t live on the device, so the update kernels keep one program for every step (no recompile
        # per step) and a jitted training step replays them with the right bias correction
        dev, dt = self.params[0].device, self.params[0].dtype
        self.b1_t = Tensor.ones(1, dtype=dt, device=dev).contiguous().realize()
        self.b2_t = Tensor.ones(1, dtype=dt, device=dev).contiguous().realize()
        self.m = [Tensor.zeros(*p.shape, dtype=p.dtype, device=p.device).contiguous().realize() for p in self.params]
        self.v = [Tensor.zeros(*p.shape, dtype=p.dtype, device=p.device).contiguous().realize() for p in self.params]

    def _updates(self) -> list[tuple[Tensor, Tensor]]:
        self.t += 1
        b1_t, b2_t = self.b1_t * self.b1, self.b2_t * self.b2
        c1, c2 = 1.0 - b1_t, 1.0 - b2_t
        out = []
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            g, w = p.grad.detach(), p.detach()
            if self.weight_decay and not self.decoupled:
                g = g + self.weight_decay * w
            new_m = self.b1 * m + (1.0 - self.b1) * g
            new_v = self.b2 * v + (1.0 - self.b2) * (g * g)
            upd = (self.lr / c1) * new_m / ((new_v / c2).sqrt() + self.eps)
            if self.weight_decay and self.decoupled:
                w = w * (1.0 - self.lr * self.weight_decay)
            out += [(m, new_m), (v, new_v), (p, w - upd)]
        return out + [(self.b1_t, b1_t), (self.b2_t, b2_t)]  # last: the updates above read the old values


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * wd`` before the step), torch's default wd 0.01."""

    decoupled = True
    default_weight_decay = 0.01


__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "OptimizerError"]
