"""The pluggy side of the plugin contract: the hook spec a plugin implements, and the manager that reads it.

Imported when a plugin module needs more than the registry reads by itself (see
`uops.plugins.registry`), and by the conformance kit, which checks every plugin through pluggy;
listing devices and choosing the usual device import no pluggy. The implementation marker,
`hookimpl`, lives in `uops.plugins.backend`, so a plugin module imports no pluggy either.
"""

from __future__ import annotations

import pluggy

from uops.plugins.backend import PRIORITY, PROJECT, Backend, PluginError, hookimpl

__all__ = ["PRIORITY", "Backend", "HookManager", "PluginError", "UopsHookSpec", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker(PROJECT)


class UopsHookSpec:
    """The hooks a plugin module may implement (mark them with ``@uops.plugins.hookimpl``)."""

    @hookspec
    def uops_backends(self) -> list[Backend]:  # type: ignore[empty-body]
        """Return the backends this plugin provides, one per device name it declared as an entry point."""


class HookManager(pluggy.PluginManager):
    """pluggy's PluginManager for project ``uops``, with the hook spec added."""

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self.add_hookspecs(UopsHookSpec)
