"""The kit's ``device`` parameter: the devices of ``--uops-device``, else every available one."""

from __future__ import annotations

import pytest

from uops.testing import devices_from_env
from uops.testing.plugin import selected_devices


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        chosen = selected_devices(metafunc.config)
        metafunc.parametrize("device", chosen if chosen is not None else devices_from_env())
