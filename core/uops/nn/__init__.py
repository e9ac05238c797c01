"""``uops.nn``: layers, parameter and state walking, safetensors state (``uops.nn.state``) and
optimizers (``uops.nn.optim``) — plain Python over ``Tensor``, with no kernels of their own."""

from uops.nn import optim, state
from uops.nn.attention import Embedding, apply_rotary, precompute_freqs_cis, rms_norm, scaled_dot_product_attention
from uops.nn.layers import (
    BatchNorm2d,
    Conv2d,
    Dropout,
    LayerNorm,
    Linear,
    Sequential,
    StateDictError,
    get_parameters,
    get_state_dict,
    load_state_dict,
    set_training,
)

__all__ = [
    "BatchNorm2d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "LayerNorm",
    "Linear",
    "Sequential",
    "apply_rotary",
    "StateDictError",
    "get_parameters",
    "get_state_dict",
    "load_state_dict",
    "optim",
    "precompute_freqs_cis",
    "rms_norm",
    "scaled_dot_product_attention",
    "set_training",
    "state",
]
