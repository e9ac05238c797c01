"""The pluggy side of the plugin contract: the hook spec a plugin implements, and the manager that reads it.

Imported when a plugin module needs more than the registry reads by itself (see
`uops.plugins.registry`), and by the conformance kit, which checks every plugin through pluggy;
listing devices and choosing the usual device import no pluggy. The implementation marker,
`hookimpl`, lives in `uops.plugins.backend`, so a plugin module imports no pluggy either.
"""

from __future__ import annotations

import types

import pluggy

from uops.plugins.backend import HOOKIMPL_ATTR, PRIORITY, PROJECT, Backend, PluginError, hookimpl

__all__ = ["PRIORITY", "Backend", "HookManager", "PluginError", "UopsHookSpec", "hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker(PROJECT)


class UopsHookSpec:
    """The hooks a plugin module may implement (mark them with ``@uops.plugins.hookimpl``)."""

    @hookspec
    def uops_backends(self) -> list[Backend]:  # type: ignore[empty-body]
        """Return the backends this plugin provides, one per device name it declared as an entry point."""


def _marker_attribute_holds() -> bool:
    """Whether pluggy's HookimplMarker still leaves its options where `hookimpl` does (a plugin may use either)."""

    def marked() -> None:
        """A function to mark."""

    pluggy.HookimplMarker(PROJECT)(marked)
    return isinstance(marked.__dict__.get(HOOKIMPL_ATTR), dict)


class HookManager(pluggy.PluginManager):
    """pluggy's PluginManager for project ``uops``, with the hook spec added, that registers a module quickly.

    ``register`` asks `parse_hookimpl_opts` about every name in the plugin's namespace, and pluggy's
    answer looks each one up with ``inspect.getattr_static`` (about 10 us a name, a millisecond or
    two per start over the plugins' modules). A plain function in a module's namespace that carries
    no marker options cannot be a hookimpl, so it is skipped here, and so is a value that is neither a
    function, a method nor a static or class method (pluggy skips those too); every other name (a
    marked function, with or without ``specname``; a name the namespace lacks) gets pluggy's own answer.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT)
        self._fast = _marker_attribute_holds()  # a pluggy that marks hookimpls otherwise gets no shortcut
        self.add_hookspecs(UopsHookSpec)

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        if self._fast and type(plugin) is types.ModuleType and name in plugin.__dict__:
            value = plugin.__dict__[name]
            if type(value) is types.FunctionType:
                if HOOKIMPL_ATTR not in value.__dict__:
                    return None
            elif not isinstance(value, (staticmethod, classmethod, types.MethodType)):
                return None
        return super().parse_hookimpl_opts(plugin, name)

    def parse_hookspec_opts(self, module_or_class: types.ModuleType | type, name: str) -> pluggy.HookspecOpts | None:
        """A plain class's names that only `object` defines (slot wrappers, builtin methods) are no hookspecs."""
        if type(module_or_class) is type and all(
            name not in klass.__dict__ for klass in module_or_class.__mro__ if klass is not object
        ):
            return None
        return super().parse_hookspec_opts(module_or_class, name)
