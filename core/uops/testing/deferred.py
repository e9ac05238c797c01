"""A runtime wrapper whose launches and uploads run only when waited on, so a read that does not wait fails.

Why: every in-repo runtime finishes a launch before it returns, which hides a core that reads results
without waiting; a real GPU queue does not. Wrapped in `DeferredRuntime`, any runtime queues each launch
and each ``copyin`` in order (one in-order stream, as a CUDA stream or an OpenCL in-order queue) and returns
an `Event`; waiting on it runs the queue up to it, and ``synchronize`` runs all of it. A ``copyout`` of a
handle that queued work still names is refused, so a read before the wait fails on every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uops.errors import UopsError
from uops.runtime import Allocator, Event, Program, Runtime
from uops.testing.poison import _key
from uops.testing.wrapped import Launch, WrappedAllocator, WrappedProgram, WrappedRuntime

__all__ = ["DeferredAllocator", "DeferredEvent", "DeferredProgram", "DeferredRuntime", "NotWaitedError"]


class NotWaitedError(UopsError, AssertionError):
    """The core read a buffer that queued work still writes: it did not wait on the work's event."""


class _Queue:
    """Work not run yet, in submission order; ``done`` counts the items already run."""

    def __init__(self) -> None:
        self.items: list[tuple[Callable[[], Any], tuple[object, ...]]] = []
        self.done = 0
        self.waits = 0  # event waits that found work still queued
        self.syncs = 0

    def submit(self, work: Callable[[], Any], handles: tuple[Any, ...]) -> DeferredEvent:
        self.items.append((work, tuple(_key(h) for h in handles)))
        return DeferredEvent(self, self.done + len(self.items))

    def run_until(self, seq: int) -> None:
        while self.items and self.done < seq:
            work, _ = self.items.pop(0)
            self.done += 1
            work()

    def names(self, handle: Any) -> bool:
        key = _key(handle)
        return any(key in keys for _, keys in self.items)


class DeferredEvent:
    """The completion of one queued launch or copy: ``wait()`` runs the queue up to it."""

    def __init__(self, queue: _Queue, seq: int) -> None:
        self.queue, self.seq = queue, seq

    def done(self) -> bool:
        return self.queue.done >= self.seq

    def wait(self) -> None:
        if not self.done():
            self.queue.waits += 1
        self.queue.run_until(self.seq)


class DeferredAllocator(WrappedAllocator):
    """``inner`` with ``copyin`` queued (it returns an event) and ``copyout`` refused while work names the handle."""

    def __init__(self, inner: Allocator, queue: _Queue, device: str) -> None:
        super().__init__(inner, device)
        self.queue = queue

    def free(self, handle: Any, nbytes: int) -> None:
        self._refuse_pending(handle, "free")
        self.inner.free(handle, nbytes)

    def copyin(self, handle: Any, src: memoryview) -> Event:
        return self.queue.submit(lambda: self.inner.copyin(handle, src), (handle,))

    def copyout(self, dest: memoryview, handle: Any) -> Event | None:
        self._refuse_pending(handle, "copyout")
        return self.inner.copyout(dest, handle)

    def as_memoryview(self, handle: Any, nbytes: int) -> memoryview | None:
        self._refuse_pending(handle, "as_memoryview")
        return self.inner.as_memoryview(handle, nbytes)

    def _refuse_pending(self, handle: Any, what: str) -> None:
        if self.queue.names(handle):
            raise NotWaitedError(
                f"{self.device}: {what} of a buffer queued work still uses (its event was not waited on)"
            )


class DeferredProgram(WrappedProgram):
    def __init__(self, inner: Program, queue: _Queue, name: str) -> None:
        super().__init__(inner, name)
        self.queue = queue

    def launch(self, bufs: tuple[Any, ...], kw: Launch) -> float | Event | None:
        def run() -> Any:
            return self.inner(*bufs, **kw)

        if kw["wait"]:  # a timed launch is done when it returns: what came before it runs first
            self.queue.run_until(self.queue.done + len(self.queue.items))
            return run()
        return self.queue.submit(run, bufs)


class DeferredRuntime(WrappedRuntime):
    """``inner`` with its launches and uploads queued until an event or ``synchronize`` runs them."""

    allocator: DeferredAllocator

    def __init__(self, inner: Runtime) -> None:
        self.queue = _Queue()
        super().__init__(inner, DeferredAllocator(inner.allocator, self.queue, inner.device))

    def wrap(self, program: Program, name: str) -> Program:
        return DeferredProgram(program, self.queue, name)

    def synchronize(self) -> None:
        self.queue.syncs += 1
        self.queue.run_until(self.queue.done + len(self.queue.items))
        self.inner.synchronize()
