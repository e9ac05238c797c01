"""Backend plugins: the contract (`hooks`), entry-point discovery (`discovery`), the registry with
quarantine and default-device policy (`registry`), and `Device` with its handles (`device`).

This package re-exports the public names, so plugins write ``from uops.plugins import Backend, hookimpl``.
"""

from uops.plugins.device import Device, DeviceHandle, Devices, register_backend, unregister_backend
from uops.plugins.hooks import PRIORITY, Backend, PluginError, UopsHookSpec, hookimpl, hookspec
from uops.plugins.registry import PluginStatus, Registry, canonical_device

TYPE_CHECKING = False
if TYPE_CHECKING:
    from uops.renderer import Target


def __getattr__(name: str) -> object:
    if name == "Target":  # the renderer layer (and the IR under it) is imported when first asked for
        from uops.renderer import Target

        return Target
    raise AttributeError(f"module 'uops.plugins' has no attribute {name!r}")


__all__ = [
    "PRIORITY",
    "Backend",
    "Device",
    "DeviceHandle",
    "Devices",
    "PluginError",
    "PluginStatus",
    "Registry",
    "Target",
    "UopsHookSpec",
    "canonical_device",
    "hookimpl",
    "hookspec",
    "register_backend",
    "unregister_backend",
]
