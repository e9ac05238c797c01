"""`uops conformance DEVICE [pytest args]`: the conformance kit (`uops.testing`) on one installed device.

It runs pytest in this interpreter over the kit's modules, which ship inside the core, so no
checkout is needed; pytest (``pip install "uops[testing]"``) is imported only here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence

from uops.errors import UopsError

__all__ = ["NotRunnable", "pytest_args", "run"]


class NotRunnable(UopsError):
    """The kit cannot run: the device is not installed or not usable here, or pytest is missing."""


def pytest_args(device: str, extra: Sequence[str], list_only: bool) -> list[str]:
    """The pytest command line for the kit on ``device`` (kit modules, the device, then ``extra``)."""
    from uops.testing import kit_files

    args = [str(p) for p in kit_files()]
    args += [f"--uops-device={device}", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args += ["-p", "uops.testing.plugin"]
    args += ["--collect-only", "-q"] if list_only else ["-q", "-rfEsxX"]  # skips and xfails listed apart
    return [*args, *extra]


def run(device: str, extra: Sequence[str] = (), list_only: bool = False) -> int:
    """Run (or with ``list_only``, list) the kit's checks on ``device``; pytest's exit status (0: all passed).

    Raises NotRunnable, naming the device or the missing package, before pytest starts.
    """
    from uops.plugins import canonical_device
    from uops.testing import unusable_reason

    if importlib.util.find_spec("pytest") is None:
        raise NotRunnable('the conformance kit needs pytest: pip install "uops[testing]"')
    name = canonical_device(device)
    reason = unusable_reason(name)
    if reason is not None:
        raise NotRunnable(reason)
    import pytest

    print(f"uops conformance: the kit on {name} ({sys.executable})", flush=True)
    return int(pytest.main(pytest_args(name, extra, list_only)))
