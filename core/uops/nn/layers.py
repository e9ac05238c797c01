"""Layers: plain Python objects holding parameter Tensors, called on a Tensor like a function.

Why no base class: a model is any object; ``get_parameters`` and ``get_state_dict`` find its
tensors by walking its attributes, lists and dicts (as tinygrad does), so a user's own class
needs nothing from us.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from uops.errors import UopsError
from uops.frontend.tensor import Tensor


class StateDictError(UopsError, KeyError):
    """A state dict does not match the model: missing or unexpected keys, or a wrong shape."""


def _uniform(shape: tuple[int, ...], bound: float, device: str | None) -> Tensor:
    t = Tensor.uniform(*shape, low=-bound, high=bound, device=device).realize()
    t.requires_grad = True
    return t


def _param(t: Tensor) -> Tensor:
    t = t.contiguous().realize()
    t.requires_grad = True
    return t


class Linear:
    """``x @ weight.T + bias``, initialised as torch does (uniform in +-1/sqrt(in_features))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: str | None = None):
        bound = 1.0 / math.sqrt(in_features)
        self.weight = _uniform((out_features, in_features), bound, device)
        self.bias = _uniform((out_features,), bound, device) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight, self.bias)


class Conv2d:
    """A 2-D convolution layer (NCHW), initialised as torch does."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        dilation: int | tuple[int, int] = 1,
        groups: int = 1,
        bias: bool = True,
        device: str | None = None,
    ):
        ks = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1.0 / math.sqrt(in_channels // groups * math.prod(ks))
        self.weight = _uniform((out_channels, in_channels // groups, *ks), bound, device)
        self.bias = _uniform((out_channels,), bound, device) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class BatchNorm2d:
    """Batch normalisation over (N, H, W) per channel; running statistics updated while ``training``."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        device: str | None = None,
    ):
        self.eps, self.momentum, self.training = eps, momentum, True
        self.weight = _param(Tensor.ones(num_features, device=device)) if affine else None
        self.bias = _param(Tensor.zeros(num_features, device=device)) if affine else None
        self.running_mean = Tensor.zeros(num_features, device=device).contiguous().realize()
        self.running_var = Tensor.ones(num_features, device=device).contiguous().realize()

    def __call__(self, x: Tensor) -> Tensor:
        if not self.training:
            return x.batchnorm(self.weight, self.bias, self.running_mean, (self.running_var + self.eps).rsqrt())
        out, mean, var = x.batchnorm_train(self.weight, self.bias, self.eps)
        m = self.momentum
        self.running_mean.assign(self.running_mean * (1 - m) + mean.detach() * m)
        self.running_var.assign(self.running_var * (1 - m) + var.detach() * m)
        return out


class LayerNorm:
    """Normalise over the last ``len(normalized_shape)`` dims, with an elementwise affine."""

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        device: str | None = None,
    ):
        self.shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = _param(Tensor.ones(*self.shape, device=device)) if elementwise_affine else None
        self.bias = _param(Tensor.zeros(*self.shape, device=device)) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.shape[-len(self.shape) :] != self.shape:
            raise ValueError(f"LayerNorm{self.shape} got an input of shape {x.shape}")
        axes = tuple(range(-len(self.shape), 0))
        y = (x - x.mean(axes, keepdim=True)) * (x.var(axes, keepdim=True) + self.eps).rsqrt()
        if self.weight is not None and self.bias is not None:
            y = y * self.weight + self.bias
        return y


class Dropout:
    """Dropout with probability ``p`` while ``training`` (set it False for evaluation)."""

    def __init__(self, p: float = 0.5):
        self.p, self.training = p, True

    def __call__(self, x: Tensor) -> Tensor:
        return x.dropout(self.p, self.training)


class Sequential:
    """Layers (any callables) applied in order; ``model[i]`` is the i-th."""

    def __init__(self, *layers: Callable[[Tensor], Tensor]):
        self.layers = list(layers)

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, i: int) -> Callable[[Tensor], Tensor]:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    def train(self, mode: bool = True) -> Sequential:
        """Set ``training`` on every layer that has it (BatchNorm2d, Dropout)."""
        set_training(self, mode)
        return self

    def eval(self) -> Sequential:
        return self.train(False)

    def state_dict(self) -> dict[str, Tensor]:
        return get_state_dict(self)

    def load_state_dict(self, state: dict[str, Tensor | np.ndarray], strict: bool = True) -> None:
        load_state_dict(self, state, strict)


def _walk(obj: Any, prefix: str, out: dict[str, Tensor], seen: set[int]) -> None:
    if isinstance(obj, Tensor):
        out.setdefault(prefix.rstrip("."), obj)
        return
    if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool, type(None), np.ndarray)):
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _walk(v, f"{prefix}{i}.", out, seen)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _walk(v, f"{prefix}{k}.", out, seen)
    elif hasattr(obj, "__dict__"):
        items = vars(obj)
        if isinstance(obj, Sequential):  # torch's keys: "0.weight", not "layers.0.weight"
            items = {str(i): v for i, v in enumerate(obj.layers)}
        for k, v in items.items():
            _walk(v, f"{prefix}{k}.", out, seen)


def get_state_dict(model: Any) -> dict[str, Tensor]:
    """Every tensor reachable from ``model``'s attributes, lists and dicts, by dotted name."""
    out: dict[str, Tensor] = {}
    _walk(model, "", out, set())
    return out


def get_parameters(model: Any) -> list[Tensor]:
    """The trainable tensors of ``model``: its state without the running statistics of batch norms."""
    state = get_state_dict(model)
    return [t for k, t in state.items() if not k.rsplit(".", 1)[-1].startswith("running_")]


def set_training(model: Any, mode: bool) -> None:
    """Set ``training`` on every layer reachable from ``model`` that has the flag."""
    stack, seen = [model], set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, Tensor):
            continue
        seen.add(id(obj))
        if isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif hasattr(obj, "__dict__"):
            if "training" in vars(obj):
                obj.training = mode
            stack.extend(vars(obj).values())


def load_state_dict(model: Any, state: dict[str, Tensor | np.ndarray], strict: bool = True) -> None:
    """Copy ``state``'s values into the model's tensors (by name, with ``assign``: every holder sees them)."""
    own = get_state_dict(model)
    if strict:
        missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or extra:
            raise StateDictError(f"state dict does not match the model: missing {missing}, unexpected {extra}")
    with Tensor.no_grad():  # loading replaces the values gradients are taken at; it is not itself differentiated
        for k, t in own.items():
            if k not in state:
                continue
            v = state[k]
            if tuple(v.shape) != t.shape:
                raise StateDictError(f"{k}: the model's tensor has shape {t.shape}, the state dict's {tuple(v.shape)}")
            t.assign(
                (v.to(t.device) if isinstance(v, Tensor) else Tensor(np.asarray(v), device=t.device)).cast(t.dtype)
            )
            t.realize()
