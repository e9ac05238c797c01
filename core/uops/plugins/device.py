"""`Device`: the registry plus one handle per usable device.

``Device["CPU"]`` loads the CPU plugin (once) and returns its `DeviceHandle`, whose renderer,
compiler and runtime are created on first use. ``Device["CUDA"].target("sm_80")`` is a
`uops.renderer.Target`: what ``get_program`` needs to compile for that architecture, no hardware needed.
"""

from __future__ import annotations

import _thread  # threading's RLock without importing threading (~1 ms at every start)
from functools import cached_property

from uops.plugins.backend import Backend, PluginError
from uops.plugins.registry import Registry, _Record

TYPE_CHECKING = False  # typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from uops.compiler import Compiler
    from uops.renderer import Renderer, Target
    from uops.runtime import Allocator, Runtime

__all__ = ["Device", "DeviceHandle", "Devices", "register_backend", "unregister_backend"]


class DeviceHandle:
    """A usable device: its backend and lazily created renderer, compiler and runtime."""

    def __init__(self, rec: _Record) -> None:
        assert rec.backend is not None
        self._rec = rec
        self.name: str = rec.device
        self.backend: Backend = rec.backend
        self.compile_reason: str | None = rec.compile_reason  # None: this machine can compile for the device
        self.runtime_reason: str | None = rec.runtime_reason  # None: this machine can run on the device
        self._targets: dict[str | None, Target] = {}
        self._lock = _thread.RLock()

    def __repr__(self) -> str:
        return f"<DeviceHandle {self.name} from {self._rec.who()}>"

    @property
    def targets(self) -> tuple[str, ...]:
        """Known compile architectures, the default first."""
        return self.backend.targets

    def _make(self, what: str, factory: Callable[[], Any]) -> Any:
        try:
            return factory()
        except PluginError:
            raise
        except Exception as e:
            raise PluginError(
                f"{self._rec.who()} failed to create its {what}: {type(e).__name__}: {e}. "
                f"Upgrade or reinstall the plugin, or choose another device."
            ) from e

    def _need_compile(self) -> None:
        if self.compile_reason is not None:
            raise PluginError(f"{self.name} cannot compile on this machine: {self.compile_reason}")

    @cached_property
    def renderer(self) -> Renderer:
        """The renderer for the default target (rendering needs no toolchain)."""
        return self._make("renderer", lambda: self.backend.renderer(None))

    @cached_property
    def compiler(self) -> Compiler:
        """The compiler for the default target; raises PluginError when the toolchain is missing."""
        self._need_compile()
        return self._make("compiler", lambda: self.backend.compiler(None))

    @cached_property
    def runtime(self) -> Runtime:
        """The runtime; raises PluginError when the hardware or driver is missing."""
        if self.runtime_reason is not None:
            raise PluginError(f"{self.name} cannot run on this machine: {self.runtime_reason}")
        return self._make("runtime", self.backend.runtime)

    @property
    def loaded_runtime(self) -> Runtime | None:
        """The runtime if something has already made it, else None (asking never loads a driver)."""
        made: Runtime | None = self.__dict__.get("runtime")  # where cached_property keeps what it made
        return made

    @property
    def allocator(self) -> Allocator:
        """The runtime's allocator."""
        return self.runtime.allocator

    def _check_arch(self, arch: str | None) -> None:
        """An architecture must be one of the backend's `targets` (the factories are only promised those)."""
        if arch is None or arch in self.targets:
            return
        known = ", ".join(self.targets) if self.targets else "none (it compiles only for its default: pass no arch)"
        raise PluginError(f"{self.name} has no target {arch!r}; its targets are: {known}")

    def target(self, arch: str | None = None) -> Target:
        """The compile target for `arch` (None: the default one): cross-compiling, without the hardware.

        Raises PluginError naming the valid ones when `arch` is not one of the backend's `targets`.
        """
        with self._lock:
            t = self._targets.get(arch)
            if t is None:
                self._check_arch(arch)
                self._need_compile()
                from uops.renderer import Target  # the IR it needs loads when a target is made, not at start-up

                if arch is None:
                    renderer, compiler = self.renderer, self.compiler
                else:
                    renderer = self._make(f"renderer for target {arch!r}", lambda: self.backend.renderer(arch))
                    compiler = self._make(f"compiler for target {arch!r}", lambda: self.backend.compiler(arch))
                t = self._targets[arch] = Target(self.name, arch, renderer, compiler)
            return t


class Devices(Registry):
    """The registry with a `DeviceHandle` per usable device: ``Device["CPU"]``."""

    def __init__(self) -> None:
        super().__init__()
        self._handles: dict[str, DeviceHandle] = {}

    def __getitem__(self, device: str) -> DeviceHandle:
        """The handle of a device; loads its plugin on first use. Raises PluginError if it is unusable."""
        rec = self._record(device)
        handle = self._handles.get(rec.device)
        if handle is not None:
            return handle
        rec = self._usable(device)
        with self._lock:
            return self._handles.setdefault(rec.device, DeviceHandle(rec))

    def refresh(self) -> None:
        with self._lock:
            super().refresh()
            self._handles.clear()

    def _forget(self, name: str) -> None:
        super()._forget(name)
        self._handles.pop(name, None)


Device = Devices()


def register_backend(backend: Backend, *, replace: bool = False) -> None:
    """Register a backend at run time, without packaging (tests, experiments).

    Raises PluginError if the device already exists, unless `replace` is true.
    """
    Device.register(backend, replace=replace)


def unregister_backend(device: str) -> None:
    """Undo `register_backend` (for tests)."""
    Device.unregister(device)
