"""Shared fixtures: ``device`` runs a core test on every device whose compiler and runtime work here.

The per-device conformance checks are the kit's (`uops.testing.kit`, collected through
``testpaths``); this fixture is for the core's own tests that also sweep the devices (ALU
semantics, fuzzing, scheduling). ``UOPS_TEST_DEVICES=CPU,PYTHON`` restricts both; a module
that needs the list itself calls `uops.testing.devices_from_env`.
"""

from __future__ import annotations

import pytest

from uops.testing import devices_from_env

DEVICES = devices_from_env()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return str(request.param)
