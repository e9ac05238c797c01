"""The conformance kit: the checks every backend must pass, shipped in the core so a vendor can run them.

``pytest --uops-device=NAME`` (the ``pytest11`` plugin in `uops.testing.plugin`) or
``uops conformance NAME`` runs the kit's test modules (`uops.testing.kit`) on one installed
device. Without ``--uops-device`` the kit runs on every device that can compile and run here
(``UOPS_TEST_DEVICES=CPU,PYTHON`` narrows that), which is how the core's own suite uses it.
This module imports neither pytest nor numpy: the device lists below are cheap.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["KIT_DIR", "available_devices", "devices_from_env", "kit_files", "unusable_reason"]

#: the folder of the kit's test modules (inside the installed package)
KIT_DIR = Path(__file__).resolve().parent / "kit"


def kit_files() -> list[Path]:
    """The kit's test modules, in a fixed order."""
    return sorted(KIT_DIR.glob("test_*.py"))


def available_devices() -> list[str]:
    """Every installed device that can compile and run on this machine (PYTHON always)."""
    from uops.plugins import Device

    return sorted({row.device for row in Device.status() if row.status == "ok"} | {"PYTHON"})


def devices_from_env() -> list[str]:
    """The available devices, narrowed by ``UOPS_TEST_DEVICES`` (comma-separated) when it is set."""
    names = available_devices()
    only = os.environ.get("UOPS_TEST_DEVICES", "").strip()
    if only:
        wanted = {d.strip().upper() for d in only.split(",") if d.strip()}
        names = [n for n in names if n in wanted]
    return names


def unusable_reason(device: str) -> str | None:
    """None when ``device`` is installed and can compile and run here, else a sentence naming it and why not."""
    from uops.plugins import Device, canonical_device

    name = canonical_device(device)
    rows = {row.device: row for row in Device.status()}
    row = rows.get(name)
    if row is None:
        known = ", ".join(sorted(rows)) or "none"
        return f"no device {device!r} is installed (installed devices: {known}); `uops devices` shows why"
    if row.status == "ok":
        return None
    why = row.reason or row.runtime_reason or row.compile_reason or "unknown reason"
    fix = f" ({row.fix})" if row.fix else ""
    return f"device {name} cannot run here: it is {row.status}: {why}{fix}"
