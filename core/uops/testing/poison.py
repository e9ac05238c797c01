"""A runtime wrapper that poisons freed handles, so a use after ``free`` fails on every backend.

Why: host memory hides a use-after-free (the bytes are still there, or numpy keeps them alive), device
memory does not (a driver aborts, or a kernel reads another buffer's data). Wrapped in `PoisonedRuntime`,
any runtime refuses a freed handle at the next copy or launch that names it, and the bytes of a freed
buffer are overwritten first where the allocator can reach them, so a read that slips past reads garbage.
"""

from __future__ import annotations

from typing import Any

from uops.runtime import Allocator, BufferFreedError, Event, Program, Runtime
from uops.testing.wrapped import Launch, WrappedAllocator, WrappedProgram, WrappedRuntime

__all__ = ["PoisonedAllocator", "PoisonedProgram", "PoisonedRuntime"]

_POISON = 0xFF  # every float made of these bytes is a NaN


def _key(handle: Any) -> object:
    """A freed handle's identity: its value for an int (a device address may come back), else the object."""
    return ("int", handle) if isinstance(handle, int) else ("obj", id(handle))


class PoisonedAllocator(WrappedAllocator):
    """``inner`` with every freed handle remembered (and its bytes poisoned): any later use raises."""

    def __init__(self, inner: Allocator, device: str) -> None:
        super().__init__(inner, device)
        self.freed: dict[object, Any] = {}  # the handle is kept, so its id is not reused while it is recorded
        self.frees = 0

    def check(self, handle: Any, what: str) -> None:
        if _key(handle) in self.freed:
            raise BufferFreedError(f"{self.device}: {what} with a handle that was freed (use after free)")

    def alloc(self, nbytes: int) -> Any:
        handle = self.inner.alloc(nbytes)
        self.freed.pop(_key(handle), None)  # an address the allocator hands out again is live again
        return handle

    def free(self, handle: Any, nbytes: int) -> None:
        self.check(handle, "free")
        view = self.inner.as_memoryview(handle, nbytes)
        if view is not None:
            view[:] = bytes([_POISON]) * nbytes
        elif nbytes:
            self.inner.copyin(handle, memoryview(bytes([_POISON]) * nbytes))
        self.inner.free(handle, nbytes)
        self.freed[_key(handle)] = handle
        self.frees += 1

    def copyin(self, handle: Any, src: memoryview) -> Event | None:
        self.check(handle, "copyin")
        return self.inner.copyin(handle, src)

    def copyout(self, dest: memoryview, handle: Any) -> Event | None:
        self.check(handle, "copyout")
        return self.inner.copyout(dest, handle)

    def as_memoryview(self, handle: Any, nbytes: int) -> memoryview | None:
        self.check(handle, "as_memoryview")
        return self.inner.as_memoryview(handle, nbytes)

    def view(self, handle: Any, offset: int, nbytes: int) -> Any | None:
        self.check(handle, "view")
        return self.inner.view(handle, offset, nbytes)


class PoisonedProgram(WrappedProgram):
    def __init__(self, inner: Program, allocator: PoisonedAllocator, name: str) -> None:
        super().__init__(inner, name)
        self.allocator = allocator

    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | Event | None:
        for i, b in enumerate(bufs):
            self.allocator.check(b, f"launching {self.name!r} (buffer {i})")
        return self.inner(*bufs, **kw)


class PoisonedRuntime(WrappedRuntime):
    """``inner`` with a `PoisonedAllocator`; its programs refuse freed handles."""

    allocator: PoisonedAllocator

    def __init__(self, inner: Runtime) -> None:
        super().__init__(inner, PoisonedAllocator(inner.allocator, inner.device))

    def wrap(self, program: Program, name: str) -> Program:
        return PoisonedProgram(program, self.allocator, name)
