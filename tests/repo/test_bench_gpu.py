"""bench/gpu.py, the measuring half of gpu/check_cuda.sh: end to end on CUDA_EMU (tiny sizes), and its verdicts.

The real numbers come from an H200 (gpu/check_cuda.sh); here the script must run, check its
results against numpy, print the table and one GOAL line per goal, and write the same to --summary.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests import REPO

SCRIPT = REPO / "bench" / "gpu.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod


def _emu_ok() -> bool:
    from uops.plugins import Device

    return "CUDA_EMU" in {r.device for r in Device.status() if r.status == "ok"}


@pytest.mark.skipif(not _emu_ok(), reason="CUDA_EMU unavailable (no host C++ compiler)")
def test_runs_end_to_end_on_cuda_emu_and_writes_the_summary(tmp_path: Path) -> None:
    summary = tmp_path / "out" / "goals.txt"
    r = subprocess.run([sys.executable, str(SCRIPT), "--device", "CUDA_EMU", "--small", "--runs", "1",
                        "--summary", str(summary)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("device CUDA_EMU; uops ms = device time, best of 1; peaks 4300 GB/s, 67 TFLOP/s")
    assert out[1].split()[:4] == ["case", "kernels", "uops", "ms"]
    rows = {line.split(" [")[0]: line.split() for line in out[3:] if not line.startswith("GOAL")}
    assert set(rows) == {"a*2", "a+b", "((a+b)*c).exp()", "sum", "row sum", "matmul fp32"}, rows
    for name, cells in rows.items():
        kernels, ms = int(cells[-8]), float(cells[-7])
        assert kernels >= 1 and ms > 0, (name, cells)
    goals = [line for line in out if line.startswith("GOAL")]
    assert len(goals) == 5 and all(g.endswith(("MET", "MISSED")) for g in goals), goals
    assert "of 4300 GB/s (goal >= 85%)" in goals[0]
    assert "row sum [64^2]" in goals[3] and "x a*2 [64^2] at" in goals[3] and "(goal <= 2x)" in goals[3]
    assert "matmul fp32 [64^3]" in goals[4] and "(goal >= 0.5x)" in goals[4]
    assert summary.read_text().splitlines() == out


def test_verdicts_compare_against_the_goals() -> None:
    b = _bench()
    assert b.bandwidth_verdict("a+b", 3700.0, 4300.0).endswith("= 86.0% of 4300 GB/s (goal >= 85%): MET")
    assert b.bandwidth_verdict("a+b", 3600.0, 4300.0).endswith("= 83.7% of 4300 GB/s (goal >= 85%): MISSED")
    with_torch = b.matmul_verdict("mm", 20000.0, 45000.0, 67.0)
    assert "0.44x torch.matmul at 45000 GFLOP/s" in with_torch and with_torch.endswith("MISSED")
    without = b.matmul_verdict("mm", 17000.0, None, 67.0)
    assert "0.51x half the 67 TFLOP/s fp32 peak (torch not importable) at 33500 GFLOP/s" in without
    assert without.endswith("MET")
    assert b.rowsum_verdict("rs", 0.003, "copy", 0.002).endswith("= 1.50x copy at 2.000 ms (goal <= 2x): MET")
    assert b.rowsum_verdict("rs", 0.005, "copy", 0.002).endswith("(goal <= 2x): MISSED")


def test_a_device_that_cannot_run_here_is_named_not_a_traceback() -> None:
    from uops.plugins import Device

    row = next((r for r in Device.status() if r.device == "CUDA"), None)  # None: the plugin is not installed
    if row is not None and row.status == "ok":
        pytest.skip("CUDA runs here")
    r = subprocess.run([sys.executable, str(SCRIPT), "--device", "CUDA", "--small"], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("bench/gpu.py: CUDA cannot "), r.stderr
    assert "Traceback" not in r.stderr
