"""The plugin contract: the pluggy hook a plugin implements, the `Backend` it returns, and `PluginError`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import pluggy

if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.renderer import Renderer
    from uops.runtime import Runtime

__all__ = ["PRIORITY", "Backend", "PluginError", "UopsHookSpec", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("uops")
hookimpl = pluggy.HookimplMarker("uops")


class PluginError(RuntimeError):
    """A backend cannot be used: which plugin, what went wrong, and what to do about it."""


#: Documented priorities for `Device.DEFAULT` (highest usable wins; PYTHON is always last).
PRIORITY = {"CUDA": 100, "AMD": 90, "METAL": 80, "CPU": 50, "EMULATED": 20, "PYTHON": 0}


class Backend(NamedTuple):
    """One device's factories and probes (a named tuple: cheaper to define than a dataclass, at every start).

    The factories are called lazily, so a plugin imports its heavy dependencies only when the
    device is used. ``renderer(arch)`` / ``compiler(arch)`` take an architecture from
    ``targets`` (``None`` = the backend's default, normally the host or the first target) and
    must work without the hardware, so cross-compiling works anywhere the toolchain does.
    ``probe_compile`` / ``probe_runtime`` return ``None`` when the toolchain / the hardware and
    driver are present, else a reason that says how to fix it. Probes run to choose
    `Device.DEFAULT`, so they must be cheap: no vendor bindings, no numpy (see docs/plugin-guide.md).

    ``priority`` picks `Device.DEFAULT` among the usable devices: CUDA 100, AMD 90, METAL 80,
    CPU 50, emulated devices 20, PYTHON 0 (always last). Unlisted real hardware: pick by analogy.
    """

    device: str
    renderer: Callable[[str | None], Renderer]
    compiler: Callable[[str | None], Compiler]
    runtime: Callable[[], Runtime]
    probe_compile: Callable[[], str | None]
    probe_runtime: Callable[[], str | None]
    targets: tuple[str, ...] = ()
    priority: int = 10


class UopsHookSpec:
    """The hooks a plugin module may implement (mark them with ``@uops.plugins.hookimpl``)."""

    @hookspec
    def uops_backends(self) -> list[Backend]:  # type: ignore[empty-body]
        """Return the backends this plugin provides, one per device name it declared as an entry point."""
