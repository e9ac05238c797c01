"""Layers, state and optimizers: plain Python over Tensor."""
