"""The README's two commands, run from a fresh clone in a fresh virtual environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO

pytestmark = pytest.mark.slow


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```\n(.*?)```", text, re.S)
    assert block, "README.md must open with a code block holding the two commands"
    cmds = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert len(cmds) == 2, cmds
    return cmds


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("fresh") / "uops"
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, timeout=120)
    return dest


def run(cmd: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UOPS_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return subprocess.run(
        [*cmd.split(), *extra], cwd=cwd, capture_output=True, text=True, timeout=1200, env=env, check=False
    )


def test_readme_names_demo_and_tests() -> None:
    demo, tests = readme_commands()
    assert demo == "bash setup.sh demo" and tests == "bash setup.sh test"


def test_demo_command_from_a_fresh_clone(clone: Path) -> None:
    demo, _ = readme_commands()
    r = run(demo, clone)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "PYTHON" in r.stdout and "all results agree with numpy" in r.stdout
    assert "===== SOURCE" in r.stdout
    # the core and each plugin were installed as separate distributions, not editable
    listing = subprocess.run([str(clone / ".venv/bin/python"), "-m", "pip", "list"], capture_output=True, text=True)
    for dist in ("uops ", "uops-cpu-clang", "uops-cuda"):
        assert dist in listing.stdout, listing.stdout


def test_test_command_from_a_fresh_clone(clone: Path) -> None:
    _, tests = readme_commands()
    # a small part of the suite: running all of it here would run this test again
    r = run(tests, clone, "tests/ir/test_uop.py", "-p", "no:cacheprovider")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"\d+ passed", r.stdout)


def test_first_program_in_the_readme_runs() -> None:
    from uops.plugins import Device

    if "CPU" not in Device.names():
        pytest.skip("the README's first program uses the CPU plugin")
    block = re.search(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, "README.md has a first program"
    proc = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "kernels" in proc.stdout
