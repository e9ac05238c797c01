"""Backend plugins: the contract (`backend`, and its pluggy side `hooks`), entry-point discovery
(`discovery`), the registry with quarantine and default-device policy (`registry`), and `Device`
with its handles (`device`).

This package re-exports the public names, so plugins write ``from uops.plugins import Backend, hookimpl``.
The pluggy names (``hookspec``, ``UopsHookSpec``) load when first asked for, so listing devices and
choosing one import no pluggy, and ``Target`` loads the renderer layer (and the IR under it) when first asked for.
"""

from uops._lazy import lazy_attributes
from uops.plugins.backend import PRIORITY, Backend, PluginError, hookimpl
from uops.plugins.device import Device, DeviceHandle, Devices, register_backend, unregister_backend
from uops.plugins.registry import PluginStatus, Registry, canonical_device

TYPE_CHECKING = False
if TYPE_CHECKING:
    from uops.plugins.hooks import UopsHookSpec, hookspec
    from uops.renderer import Target

#: public name -> the module that defines it, imported on first use
_LAZY = {
    "hookspec": "uops.plugins.hooks",
    "UopsHookSpec": "uops.plugins.hooks",
    "Target": "uops.renderer",
}


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


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
