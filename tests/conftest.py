"""Shared fixtures: ``device`` runs a test on every device whose compiler and runtime work here.

A new backend plugin gets the whole front-end suite for free. ``UOPS_TEST_DEVICES=CPU,PYTHON``
restricts the list. The compiler's checks of its own stages (``UOPS_SPEC``, off in release runs) are
on for every test and every subprocess a test starts.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("UOPS_SPEC", "1")


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


def supports_dtype(device: str, dtype: object) -> bool:
    """Whether ``device``'s renderer can compute ``dtype`` (a DType or numpy dtype; Metal has no double).
    The unsupported case is tested on its own, as a clear DTypeNotSupportedError (tests/test_tensor.py)."""
    from uops.dtypes import DType, from_numpy
    from uops.plugins import Device

    dt = dtype if isinstance(dtype, DType) else from_numpy(dtype)
    return dt not in Device[device].renderer.unsupported_dtypes


def require_dtype(device: str, dtype: object) -> None:
    """Skip a test of ``dtype`` on a device without it."""
    if not supports_dtype(device, dtype):
        pytest.skip(f"{device} does not support {dtype}")
