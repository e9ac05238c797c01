"""Loaded programs are bounded (issue 11, finding 15): an LRU of UOPS_PROGRAM_CACHE programs, unloading what falls out.

Each test runs in a fresh interpreter, so the count of memory maps and of loaded kernel
libraries is this test's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from uops.plugins import Device

NATIVE = {"CPU", "CUDA_EMU"}  # devices whose kernels are dlopened shared libraries

PROBE = """
import gc, json, re, sys, weakref
import numpy as np
from uops import Tensor
from uops.frontend import realize

def kernel_libs():
    # mapped kernel libraries: their temp files are named uops-<kernel>-... and deleted once mapped
    return len({m.group(0) for l in open("/proc/self/maps") if (m := re.search(r"/\\S*/uops-\\S*\\.so", l))})

def maps():
    return sum(1 for _ in open("/proc/self/maps"))

device, n = sys.argv[1], int(sys.argv[2])
x = Tensor(np.arange(8, dtype=np.float32), device=device)
(x + 0.5).numpy()
m0, k0 = maps(), kernel_libs()
progs = []
ok = True
for k in range(n):
    t = x + float(k)
    (item,) = t.schedule()
    progs.append(weakref.ref(realize.get_runner(item.ast, device)[1]))
    ok &= bool(np.array_equal(t.numpy(), np.arange(8, dtype=np.float32) + k))
gc.collect()
print(json.dumps({"ok": ok, "cached": len(realize._programs), "maxsize": realize._programs.maxsize,
                  "alive": sum(p() is not None for p in progs), "maps": maps() - m0, "libs": kernel_libs() - k0}))
"""


def probe(device: str, n: int, cache: int) -> dict[str, int]:
    env = {**os.environ, "UOPS_PROGRAM_CACHE": str(cache)}
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), device, str(n)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr[-3000:]}"
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def test_evicted_programs_are_unloaded(device: str) -> None:
    got = probe(device, 24, cache=6)
    assert got["ok"], "every kernel still computes x + k"
    assert got["maxsize"] == 6 and got["cached"] == 6
    assert got["alive"] <= 6, f"{got['alive']} of 24 programs are still loaded with a cache of 6"
    if device in NATIVE:
        assert got["libs"] <= 6, f"{got['libs']} kernel libraries are still mapped with a cache of 6"


def test_400_kernels_leave_a_bounded_number_of_maps() -> None:
    """The probe of the finding: 400 distinct kernels on the CPU (1,300 maps when nothing was evicted)."""
    if "CPU" not in [r.device for r in Device.status() if r.status == "ok"]:
        pytest.skip("CPU unavailable")
    got = probe("CPU", 400, cache=16)
    assert got["ok"] and got["cached"] == 16
    assert got["libs"] <= 16, f"{got['libs']} kernel libraries still mapped"
    assert got["maps"] < 16 * 8, f"400 kernels left {got['maps']} new memory maps"


def test_bad_cache_size_is_named() -> None:
    env = {**os.environ, "UOPS_PROGRAM_CACHE": "lots"}
    r = subprocess.run(
        [sys.executable, "-c", "import uops.frontend.realize"], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode != 0 and "UOPS_PROGRAM_CACHE must be a positive integer, got 'lots'" in r.stderr
