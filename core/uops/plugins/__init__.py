"""Backend plugins: the contract (`hooks`), entry-point discovery (`discovery`), the registry with
quarantine and default-device policy (`registry`), and `Device` with its handles (`device`).

This package re-exports the public names, so plugins write ``from uops.plugins import Backend, hookimpl``.
"""

from uops.plugins.device import Device, DeviceHandle, Devices, register_backend, unregister_backend
from uops.plugins.hooks import PRIORITY, Backend, PluginError, UopsHookSpec, hookimpl, hookspec
from uops.plugins.registry import PluginStatus, Registry, canonical_device
from uops.renderer import Target

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
