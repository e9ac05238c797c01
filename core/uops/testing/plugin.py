"""The pytest plugin of the conformance kit (registered through the ``pytest11`` entry point ``uops``).

``--uops-device=NAME[,NAME...]`` picks the devices the kit runs on and adds the kit's test
modules to the run, next to whatever the run collects anyway (a vendor's own tests). Without
the option the plugin changes nothing, except that the kit's modules, when collected, run on
every available device (see `uops.testing.devices_from_env`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from uops.testing import KIT_DIR, kit_files, unusable_reason

__all__ = ["selected_devices"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("uops", "uops conformance kit")
    group.addoption(
        "--uops-device",
        action="append",
        default=None,
        metavar="NAME",
        help="run the uops conformance kit on this installed device (repeatable, or comma-separated)",
    )


def selected_devices(config: pytest.Config) -> list[str] | None:
    """The devices named by ``--uops-device`` (canonical, in order, no repeats), or None when not given."""
    raw = config.getoption("uops_device", default=None)
    if not raw:
        return None
    from uops.plugins import canonical_device

    names = [canonical_device(d) for item in raw for d in str(item).split(",") if d.strip()]
    return list(dict.fromkeys(names))


def _inside_kit(arg: str) -> bool:
    """Whether a command-line argument already names the kit or a part of it (then nothing is added)."""
    if arg.startswith("uops.testing"):
        return True
    path = Path(arg.split("::", 1)[0]).resolve()
    return path == KIT_DIR or KIT_DIR in path.parents


def pytest_configure(config: pytest.Config) -> None:
    devices = selected_devices(config)
    if devices is None:
        return
    bad = [reason for d in devices if (reason := unusable_reason(d)) is not None]
    if bad:
        raise pytest.UsageError("uops conformance kit: " + "; ".join(bad))
    if not any(_inside_kit(a) for a in config.args):  # pytest collects a file reached twice only once
        config.args.extend(str(p) for p in kit_files())
