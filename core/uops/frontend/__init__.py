"""The front end: lazy ``Tensor``, shape tracking, the scheduler (kernel fusion) and execution."""

from uops.frontend.tensor import Tensor

__all__ = ["Tensor"]
