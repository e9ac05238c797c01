"""Shared fixtures: ``device`` runs a core test on every device whose compiler and runtime work here.

The per-device conformance checks are the kit's (`uops.testing.kit`, collected through
``testpaths``); this fixture is for the core's own tests that also sweep the devices (ALU
semantics, fuzzing, scheduling). ``UOPS_TEST_DEVICES=CPU,PYTHON`` restricts both. The
compiler's checks of its own stages (``UOPS_SPEC``, off in release runs) are on for every test
and every subprocess a test starts.
"""

from __future__ import annotations

import os

import pytest

from uops.testing import devices_from_env
from uops.testing.kit.helpers import supports_dtype

os.environ.setdefault("UOPS_SPEC", "1")

__all__ = ["DEVICES", "require_dtype", "supports_dtype"]

DEVICES = devices_from_env()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def require_dtype(device: str, dtype: object) -> None:
    """Skip a test of ``dtype`` on a device without it."""
    if not supports_dtype(device, dtype):
        pytest.skip(f"{device} does not support {dtype}")
