"""`uops conformance DEVICE`: the kit (`uops.testing`) run from outside any checkout, in a fresh process.

The kit itself runs in-process for every available device as part of this suite (``testpaths``);
here the command's round trip is checked on a few quick checks per device, plus ``--list``, the
exit codes and what `import uops` leaves out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from uops.testing import KIT_DIR, devices_from_env, kit_files

DEVICES = devices_from_env()

QUICK = "test_elementwise_1d or test_spec_runs_in_a_fresh_process"


def uops_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    main = "import sys, uops.cli; sys.exit(uops.cli.main())"
    return subprocess.run(
        [sys.executable, "-c", main, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.parametrize("device", ["CPU", "PYTHON", "CUDA_EMU"])
def test_conformance_passes_from_a_temp_dir(device: str, tmp_path: Path) -> None:
    if device not in DEVICES:
        pytest.skip(f"{device} cannot run here")
    r = uops_cli("conformance", device, "-k", QUICK, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"the kit on {device}" in r.stdout
    assert "2 passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    assert not list(tmp_path.iterdir()), "the kit left files in the working directory"


def test_list_shows_every_check_for_the_device(tmp_path: Path) -> None:
    r = uops_cli("conformance", "python", "--list", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ids = [ln for ln in r.stdout.splitlines() if "::" in ln]
    modules = {Path(i.split("::")[0]).name for i in ids}
    assert modules == {p.name for p in kit_files()}, modules
    assert all(i.endswith("[PYTHON]") or "[PYTHON-" in i for i in ids), [i for i in ids if "PYTHON" not in i][:5]
    assert any("test_tensor.py::test_cast[PYTHON]" in i for i in ids)
    assert " passed" not in r.stdout, "--list must not run the checks"


@pytest.mark.parametrize("device", ["NOPE", "CUDA"])
def test_a_device_that_cannot_run_is_a_clear_error(device: str, tmp_path: Path) -> None:
    if device in DEVICES:
        pytest.skip(f"{device} can run here")
    r = uops_cli("conformance", device, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "uops conformance: error: " in r.stderr and device in r.stderr
    if device == "NOPE":
        assert "no device 'NOPE' is installed" in r.stderr and "PYTHON" in r.stderr
    else:
        assert "cannot run here" in r.stderr


def test_exit_status_is_not_zero_when_no_check_passes(tmp_path: Path) -> None:
    r = uops_cli("conformance", "PYTHON", "-k", "no_such_check", cwd=tmp_path)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:])
    assert "deselected" in r.stdout


def test_import_uops_and_the_cli_parser_import_no_pytest() -> None:
    code = (
        "import json, sys, uops, uops.cli; uops.cli.build_parser(); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest', 'uops.testing'))))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_the_kit_ships_inside_the_package() -> None:
    import uops

    assert KIT_DIR.parent.parent == Path(uops.__file__).resolve().parent
    assert {p.name for p in kit_files()} >= {"test_tensor.py", "test_kernels.py", "test_program_spec.py"}
    assert (KIT_DIR / "conftest.py").is_file() and (KIT_DIR / "__init__.py").is_file()


def test_the_heavy_import_check_names_each_offender() -> None:
    from uops.testing.kit.test_plugin_contract import heavy_imports

    new = ["uops_x", "uops.plugins.probes", "numpy", "numpy.core", "uops_x.runtime", "uops.codegen", "subprocess", "re"]
    bad = heavy_imports(new, "uops_x")
    assert [b.split()[0] for b in bad] == ["numpy", "numpy.core", "uops_x.runtime", "uops.codegen", "subprocess"]
    assert "third-party" in bad[0] and "renderer/compiler/runtime" in bad[2] and "core module" in bad[3]
    assert heavy_imports(["uops.backends", "uops.backends.python"], "uops.backends.python") == []


def test_uops_device_adds_the_kit_to_a_vendors_own_run(tmp_path: Path) -> None:
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert 6 * 7 == 42\n")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--uops-device=python"]
    r = subprocess.run(
        [*cmd, "-k", "test_mine or test_elementwise_1d"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout, r.stdout[-2000:]
    bad = subprocess.run([*cmd, "--uops-device=NOPE"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 4 and "no device 'NOPE' is installed" in bad.stderr, bad.stderr
