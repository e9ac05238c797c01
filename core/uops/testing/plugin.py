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


def _declared(item: pytest.Item, entries: tuple[tuple[str, str], ...]) -> str | None:
    """The reason of the first declaration naming this kit check, else None.

    A declaration names a check by its function (``test_local_opts``), its module and function
    (``test_opts.py::test_local_opts``), or one parametrized case as ``--list`` shows it without the path
    (``test_opts.py::test_opts_match_numpy[CPU-matmul 7x13x5]``)."""
    module = Path(str(item.fspath)).name
    function = getattr(item, "originalname", item.name)
    names = {function, f"{module}::{function}", f"{module}::{item.name}"}
    for name, reason in entries:
        if name in names:
            return reason
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each backend's own declarations, next to its code (`Backend.unsupported`, `Backend.expected_failures`):
    an unsupported check is skipped with its reason; an expected failure is a strict xfail, so one that passes
    again fails the run as stale (remove the entry)."""
    from uops.plugins import Device

    for item in items:
        callspec = getattr(item, "callspec", None)
        device = callspec.params.get("device") if callspec is not None else None
        if not isinstance(device, str) or not _inside_kit(str(item.fspath)):
            continue
        backend = Device[device].backend
        reason = _declared(item, backend.unsupported)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"unsupported on {device} (Backend.unsupported): {reason}"))
            continue
        reason = _declared(item, backend.expected_failures)
        if reason is not None:
            why = f"expected failure on {device} (Backend.expected_failures; remove the entry once it passes): {reason}"
            item.add_marker(pytest.mark.xfail(reason=why, strict=True))
