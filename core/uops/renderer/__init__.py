"""The Renderer contract (linear uops -> source text for one compile target) and the compile `Target` value.

A renderer also tells the lowering what the target can do (launch grid, local memory, which
ALU ops and dtypes it renders natively), so that kernels are shaped for it before rendering.
A subclass must implement ``render``; Python refuses to instantiate one that does not.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, NamedTuple

from uops.dtypes import DType
from uops.errors import UopsError
from uops.ir.ops import GroupOp, Ops
from uops.ir.rewrite import PatternMatcher
from uops.ir.uop import UOp

if TYPE_CHECKING:
    from uops.compiler import Compiler

__all__ = ["DTypeNotSupportedError", "Renderer", "Target"]


class DTypeNotSupportedError(UopsError, TypeError):
    """A device cannot hold or compute a dtype: raised before any kernel is built, and by renderers."""


class Renderer(ABC):
    """Linear uops -> source for one target. Configured one way: ``Renderer(target, device)``."""

    device: str = ""
    target: str = ""
    # None: CPU-style, every output axis is a loop. Else: the launch grid limits per dimension.
    global_max: tuple[int, ...] | None = None
    # workgroup (block) limits per dimension; None: no local dimensions
    local_max: tuple[int, ...] | None = None
    local_threads_max: int = 0  # threads per workgroup, all dimensions together
    shared_max: int = 0  # bytes of local memory per workgroup
    supported_ops: frozenset[Ops] = GroupOp.ALU | {Ops.CAST, Ops.BITCAST}
    # scalar dtypes the target computes in; others are computed in float32 and stored in their own type
    unsupported_dtypes: frozenset[DType] = frozenset()
    # target-specific lowering rules, applied after the generic ones
    extra_matcher: PatternMatcher | None = None
    # lanes a run of contiguous, aligned global loads or stores may become one vector access of (widest first)
    vector_widths: tuple[int, ...] = ()
    vector_max_bytes: int = 16  # the widest vector access, in bytes
    # local arrays start at a vector_max_bytes boundary, so aligned runs of local loads may be vector accesses too
    aligned_locals: bool = False
    # vector accesses may start at any element (the vector pointer type is element-aligned): the rows of an
    # odd-sized matrix are then stored whole, not split into scalar and shorter runs at each row's misalignment
    unaligned_vectors: bool = False
    # vector values take +, * and multiply-add in the kernel language (clang's ext_vector_type): a vector store
    # of lanes that each add lane k of two vectors stores the vectors' sum (an accumulator update stays a vector)
    vector_alu: bool = False
    # work-items per warp (SIMD-group) that SHUFFLE exchanges 32-bit values among, every lane taking part; 0: no
    # shuffle, and a grouped reduction combines in a tree through local memory (the portable default)
    shuffle_width: int = 0

    def vector_ok(self, dt: DType) -> bool:
        """Whether a global load or store of vector type ``dt`` is rendered as one access."""
        return dt.count in self.vector_widths and dt.nbytes <= self.vector_max_bytes

    def __init__(self, target: str | None = None, device: str | None = None) -> None:
        """``target`` / ``device`` override the class defaults (one class serves CUDA and CUDA_EMU, many archs)."""
        if target is not None:
            self.target = target
        if device is not None:
            self.device = device

    @abstractmethod
    def render(self, name: str, uops: list[UOp]) -> str:
        """The source of kernel ``name`` from its linearized uops."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(device={self.device!r}, target={self.target!r})"


class Target(NamedTuple):
    """One compile target: a device, its architecture, and the renderer and compiler made for it (immutable).

    What ``get_program`` needs, and all of it: a target works without the hardware. ``arch`` is
    what was asked for (``None``: the backend's default); ``renderer.target`` names what it
    resolved to (e.g. the GPU's own ``sm_XY``). Made by ``Device[name].target(arch)``.
    """

    device: str
    arch: str | None
    renderer: Renderer
    compiler: Compiler
