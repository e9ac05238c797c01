"""A runtime that hands every call to another one: the base of the kit's runtime wrappers.

Why: the kit checks the core's use of a runtime (freed handles, unwaited events) by wrapping the
device's own runtime; each wrapper overrides only the calls it watches, and a call the runtime contract
gains later is forwarded by default instead of being lost by one wrapper and not another.
"""

from __future__ import annotations

from typing import Any

from uops.runtime import Allocator, Event, Launch, LaunchProgram, Program, Runtime

__all__ = ["Launch", "WrappedAllocator", "WrappedProgram", "WrappedRuntime"]


class WrappedAllocator(Allocator):
    def __init__(self, inner: Allocator, device: str) -> None:
        self.inner, self.device = inner, device

    def alloc(self, nbytes: int) -> Any:
        return self.inner.alloc(nbytes)

    def free(self, handle: Any, nbytes: int) -> None:
        self.inner.free(handle, nbytes)

    def copyin(self, handle: Any, src: memoryview) -> Event | None:
        return self.inner.copyin(handle, src)

    def copyout(self, dest: memoryview, handle: Any) -> Event | None:
        return self.inner.copyout(dest, handle)

    def as_memoryview(self, handle: Any, nbytes: int) -> memoryview | None:
        return self.inner.as_memoryview(handle, nbytes)

    def view(self, handle: Any, offset: int, nbytes: int) -> Any | None:
        return self.inner.view(handle, offset, nbytes)


class WrappedProgram(LaunchProgram):
    """``inner``; a wrapper overrides `launch`, which sees the buffers and the keywords as one dict."""

    def __init__(self, inner: Program, name: str) -> None:
        self.inner, self.name = inner, name

    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | Event | None:
        return self.inner(*bufs, **kw)


class WrappedRuntime(Runtime):
    """``inner`` with ``allocator`` in place of its own; `wrap` makes each loaded program's wrapper."""

    def __init__(self, inner: Runtime, allocator: Allocator) -> None:
        self.inner, self.device, self.allocator = inner, inner.device, allocator

    def load(self, name: str, lib: bytes) -> Program:
        return self.wrap(self.inner.load(name, lib), name)

    def wrap(self, program: Program, name: str) -> Program:
        return WrappedProgram(program, name)

    def synchronize(self) -> None:
        self.inner.synchronize()
