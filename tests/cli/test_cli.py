"""The `uops` command, run as a subprocess from its installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO
from uops.plugins import Device

UOPS = shutil.which("uops", path=str(Path(sys.executable).parent)) or "uops"


def uops(*args: str, timeout: int = 300, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "UOPS_DEVICE"}
    return subprocess.run([UOPS, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.mark.parametrize("command", [[], ["devices"], ["demo"], ["compile"], ["bench"]])
def test_help_everywhere(command: list[str]) -> None:
    r = uops(*command, "--help")
    assert r.returncode == 0, r.stderr
    assert "usage: uops" in r.stdout


def test_no_command_prints_help_and_fails() -> None:
    r = uops()
    assert r.returncode == 2 and "COMMAND" in r.stdout


def test_demo_on_python_checks_against_numpy() -> None:
    r = uops("demo", "--devices", "PYTHON")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "DEVICE" in out and "PYTHON" in out  # the device table comes first
    assert out.count("ok  ") >= 3 and "FAIL" not in out
    assert "kernel(s)" in out and "cached" in out
    for stage in ("SINK", "LINEAR", "SOURCE", "BINARY"):
        assert f"===== {stage}" in out
    assert "all results agree with numpy" in out


def test_compile_prints_the_four_stages_and_saves_a_spec(tmp_path: Path) -> None:
    device = "CPU" if "CPU" in Device.names() else "PYTHON"
    spec_file = tmp_path / "k.json"
    r = uops("compile", "--device", device, "(a+b).sum(axis=1)", "--shape", "a=8,4", "--shape", "b=8,4",
             "--stages", "--out", str(spec_file))  # fmt: skip
    assert r.returncode == 0, r.stderr
    for stage in ("SINK", "LINEAR", "SOURCE", "BINARY"):
        assert f"===== {stage}" in r.stdout
    assert f"on {device}" in r.stdout
    saved = json.loads(spec_file.read_text())
    assert saved["device"] == device and saved["lib"]
    shown = uops("compile", str(spec_file))
    assert shown.returncode == 0 and saved["name"] in shown.stdout and "===== SOURCE" in shown.stdout


def test_compile_for_cuda_without_a_gpu() -> None:
    if "CUDA" not in Device.names():
        pytest.skip("the uops-cuda plugin is not installed")
    r = uops("compile", "--device", "CUDA", "(a*b).sum(axis=1).relu()", "--stages")
    assert r.returncode == 0, r.stderr
    assert "__global__" in r.stdout and "on CUDA (sm_" in r.stdout


def test_compile_arch_selects_the_target() -> None:
    """--arch becomes the device's compile Target: the renderer, the compiler and the saved spec all use it."""
    if "CUDA" in Device.names() and Device["CUDA"].compile_reason is None:
        device, arch, flag = "CUDA", "sm_80", "--gpu-architecture=sm_80"
    else:
        device, arch, flag = "CPU", "x86_64", "-march=x86-64"
    r = uops("compile", "--device", device, "--arch", arch, "a*2")
    assert r.returncode == 0, r.stderr
    assert f"for {device} ({arch})" in r.stderr and f"on {device} ({arch})" in r.stdout
    assert flag in Device[device].target(arch).compiler.flags


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["compile", "a+"], "not valid Python"),
        (["compile", "--device", "NOPE", "a+b"], "unknown device 'NOPE'"),
        (["compile", "a.__class__"], "private attribute"),
        (["compile", "--shape", "a=x", "a+1"], "--shape expects"),
        (["compile", "a @ b", "--shape", "a=3,4", "--shape", "b=5,6"], "cannot build"),
        (["bench", "nosuch"], "unknown bench suite"),
        (["compile", "/nonexistent/k.json"], "no saved ProgramSpec at /nonexistent/k.json"),
    ],
)
def test_errors_are_one_plain_sentence(args: list[str], message: str) -> None:
    r = uops(*args)
    assert r.returncode == 1, r.stdout + r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert len([line for line in r.stderr.splitlines() if "error:" in line]) == 1


def test_debug_flag_shows_the_traceback() -> None:
    r = uops("compile", "--debug", "--device", "NOPE", "a+b")
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_bench_finds_the_suites_from_a_checkout() -> None:
    r = uops("bench", "startup", "--quick", cwd=REPO, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "== bench/startup.py" in r.stdout


def test_bench_finds_the_checkouts_suites_from_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from uops.cli import BenchSuitesNotFoundError, bench_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UOPS_BENCH_DIR", raising=False)
    assert bench_dir() == REPO / "bench"
    monkeypatch.setenv("UOPS_BENCH_DIR", str(tmp_path))
    with pytest.raises(BenchSuitesNotFoundError, match="UOPS_BENCH_DIR"):
        bench_dir()
    r = uops("bench", "rewrite", cwd=tmp_path)  # the environment above: UOPS_BENCH_DIR without suites
    assert r.returncode != 0 and "no bench suites" in r.stderr and "Traceback" not in r.stderr
