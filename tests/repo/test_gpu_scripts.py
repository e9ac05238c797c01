"""gpu/common.sh, the install-and-run half every gpu/check_<backend>.sh shares, run here without a GPU.

The check scripts only run in full on a lent GPU machine; what they share must already work:
the core and a plugin installed into a throwaway venv without a registry (pip, or linked in by
hand when pip cannot build), plugin discovery seeing the plugin's devices, a step's output and
exit status in the summary file, and the venv removed at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)


def _base_has_the_core_dependencies() -> bool:
    r = subprocess.run([BASE_PYTHON, "-c", "import numpy, pluggy"], capture_output=True)
    return r.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _base_has_the_core_dependencies(), reason="the base interpreter lacks numpy or pluggy")
def test_common_install_and_steps_without_a_gpu(tmp_path: Path) -> None:
    script = f"""
set -uo pipefail
source {REPO}/gpu/common.sh
check_begin TEST
check_install plugins/cuda
check_versions uops uops-cuda no-such-dist
run_step devices 60 UOPS_CHECK_MARK=seen -- "$VPY" -c "import os, uops_cuda; from uops.plugins import Device; \\
print(sorted(Device.names()), os.environ['UOPS_CHECK_MARK'], uops_cuda.__file__.startswith('$VENV'))"
run_step failing 60 -- "$VPY" -c "raise SystemExit(3)"
echo "VENV=$VENV" >"{tmp_path}/venv.txt"
check_end
"""
    env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": BASE_PYTHON, "CHECK_DEADLINE_S": "240"}
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (tmp_path / "out" / "gpu-summary.txt").read_text().splitlines()
    assert summary[0].startswith("== uops TEST check: ")
    assert any(line.startswith(("install: pip ok", "install: linked")) for line in summary), summary
    versions = next(line for line in summary if line.startswith("versions: "))
    assert "uops=" in versions and "uops-cuda=" in versions and "no-such-dist" not in versions
    assert "devices: rc=0" in "\n".join(summary)
    listed = next(line for line in summary if line.startswith("devices: ["))
    assert listed == "devices: ['CUDA', 'CUDA_EMU', 'PYTHON'] seen True", "the venv's own uops_cuda, no other plugin"
    assert any(line.startswith("failing: rc=3") for line in summary), summary
    assert (tmp_path / "out" / "devices.log").is_file() and summary[-1].startswith("== done in ")
    venv = (tmp_path / "venv.txt").read_text().strip().removeprefix("VENV=")
    assert venv.startswith("/tmp/uops-gpu-venv.") and not Path(venv).exists(), "the throwaway venv is removed"
