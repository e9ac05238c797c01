"""``Dialect``: what the GPU emulation must know about one GPU language, declared by its plugin.

Why a value and not code: CUDA, HIP-with-amdgcn-builtins and MSL differ only in spelling —
how a kernel is declared and bounded, which names give the launch indices, what the barrier is
called, which toolkit headers the source includes, and a header mapping the rest of the
vocabulary (qualifiers, 16-bit floats, vector types, atomics) onto ``gpu_shim.h``. A plugin
states those facts; the compiler and runtime in this package do the rest the same way for all.

A sketch of the three (each a small ``emulated.py`` in its plugin):
  CUDA   ``__global__ void __launch_bounds__(N) k(``; ``threadIdx`` -> thread_idx ...;
         ``__syncthreads()``; stubs ``cuda_fp16.h``.
  HIP    ``__attribute__((global)) void __attribute__((amdgpu_flat_work_group_size(1, N))) k(``;
         ``__builtin_amdgcn_workitem_id_x()`` -> thread_idx.x ...; ``__builtin_amdgcn_s_barrier()``;
         a rewrite turns ``__attribute__((shared))`` into block-shared storage.
  MSL    ``kernel void k(``; rewrites drop the ``[[thread_position_in_threadgroup]]`` parameters,
         whose (renderer-chosen) names become index macros; ``threadgroup_barrier(flags)``;
         ``threadgroup`` -> block-shared storage in the header.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SHIM_CONTEXT", "Dialect", "KernelDecl"]

# the shim's launch context fields a dialect's index spellings map onto (see gpu_shim.h)
SHIM_CONTEXT = ("thread_idx", "block_idx", "block_dim", "grid_dim")


@dataclass(frozen=True)
class KernelDecl:
    """One kernel found in a source: its name and the most threads per block it was compiled for."""

    name: str
    bound: int


@dataclass(frozen=True)
class Dialect:
    """How one GPU language maps onto the shim.

    ``kernel_pattern`` is a regex matching a kernel's declaration up to its ``(``, with a group
    ``name`` and optionally a group ``bound`` (threads per block the kernel was compiled for;
    ``max_threads`` when absent). ``indices`` pairs each launch-index spelling of the dialect
    (an identifier or a call such as ``f()``) with a shim expression over ``uops_shim_cur``.
    ``barrier`` is the dialect's barrier call (``__syncthreads()``, ``threadgroup_barrier(f)``).
    ``max_block``/``max_grid`` bound each launch dimension (an empty tuple: unchecked).
    ``rewrites`` are regex substitutions applied to the source before compiling; each must keep
    the line count, so compiler messages point at the source's own lines. ``exchange_tokens`` name the
    dialect's warp shuffles (``__shfl_xor_sync``): the shim runs them with barriers, so they need fibers too.
    """

    name: str
    kernel_pattern: str
    indices: tuple[tuple[str, str], ...]
    barrier: str
    header: Path | None = None
    stub_headers: tuple[str, ...] = ()
    rewrites: tuple[tuple[str, str], ...] = ()
    exchange_tokens: tuple[str, ...] = ()
    max_threads: int = 1024
    max_block: tuple[int, ...] = (1024, 1024, 1024)
    max_grid: tuple[int, ...] = (2**31 - 1, 65535, 65535)
    _kernel_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rx = re.compile(self.kernel_pattern)
        if "name" not in rx.groupindex:
            raise ValueError(f"dialect {self.name}: kernel_pattern needs a group named 'name'")
        for spelling, _ in self.indices:
            if not re.fullmatch(r"[A-Za-z_]\w*(\(\))?", spelling):
                raise ValueError(f"dialect {self.name}: launch index {spelling!r} is not an identifier or f()")
        object.__setattr__(self, "_kernel_re", rx)

    @property
    def barrier_token(self) -> str:
        """The barrier's name: a source that contains it needs fibers."""
        return self.barrier.split("(", 1)[0].strip()

    def needs_fibers(self, src: str) -> bool:
        """Whether ``src`` synchronizes its threads: it calls the barrier or a warp shuffle."""
        return any(token in src for token in (self.barrier_token, *self.exchange_tokens))

    def kernels(self, src: str) -> list[KernelDecl]:
        """The kernels declared in ``src``, in order, with their launch bounds."""
        out = []
        for m in self._kernel_re.finditer(src):
            bound = m.groupdict().get("bound")
            out.append(KernelDecl(m.group("name"), int(bound) if bound else self.max_threads))
        return out

    def rewrite(self, src: str) -> str:
        """``src`` with the dialect's rewrites applied (ValueError if one changed the line count)."""
        for pattern, repl in self.rewrites:
            new = re.sub(pattern, repl, src)
            if new.count("\n") != src.count("\n"):
                raise ValueError(f"dialect {self.name}: rewrite {pattern!r} changed the number of lines")
            src = new
        return src

    def macros(self) -> str:
        """The launch-index and barrier macros that map this dialect's spellings onto the shim."""
        lines = [f"/* dialect {self.name} */"]
        lines += [f"#define {spelling} ({expr})" for spelling, expr in self.indices]
        head, _, rest = self.barrier.partition("(")
        lines.append(f"#define {head.strip()}({rest.rstrip(')').strip()}) uops_shim_barrier()")
        return "\n".join(lines) + "\n"

    def prelude(self, shim: Path) -> str:
        """The text force-included before a kernel: the shim, the macros, the dialect's header."""
        header = f'#include "{self.header}"\n' if self.header is not None else ""
        return f'#include "{shim}"\n{self.macros()}{header}'

    def digest(self, shim: Path) -> str:
        """A hash of everything the dialect feeds the host compiler (not where it is installed)."""
        h = hashlib.sha256(shim.read_bytes())
        h.update(self.macros().encode())
        if self.header is not None:
            h.update(self.header.read_bytes())
        h.update(repr((self.kernel_pattern, self.stub_headers, self.rewrites, self.max_threads)).encode())
        h.update(repr(self.exchange_tokens).encode())
        return h.hexdigest()[:16]
