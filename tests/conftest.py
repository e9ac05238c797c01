"""Shared fixtures: ``device`` runs a test on every device whose compiler and runtime work here.

A new backend plugin gets the whole front-end suite for free. ``UOPS_TEST_DEVICES=CPU,PYTHON``
restricts the list.
"""

from __future__ import annotations

import os

import pytest


def available_devices() -> list[str]:
    """Every installed device that can compile and run on this machine (PYTHON always)."""
    from uops.plugins import Device

    names = {row.device for row in Device.status() if row.status == "ok"} | {"PYTHON"}
    only = os.environ.get("UOPS_TEST_DEVICES", "").strip()
    if only:
        names &= {d.strip().upper() for d in only.split(",")}
    return sorted(names)


DEVICES = available_devices()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    return str(request.param)
