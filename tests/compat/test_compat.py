"""A plugin frozen at uops 0.1 (plugin API 1.0, ``tests/compat/uops-oldguide``) keeps working on this core.

It is pip-installed (not editable) next to the core and goes through the whole conformance kit; copies of
it show the two ways an old plugin may be refused, both at discovery and in one line: one that imports a
name the core removed, and one that keeps the upper bound the old guide suggested (``uops<0.2``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import uops
from tests.venv_helpers import Venv, make_venv

FROZEN = Path(__file__).resolve().parent / "uops-oldguide"
OTHERS = "OLDREMOVED,OLDBOUND"


def _variant(dest: Path, name: str, edits: list[tuple[str, str, str]]) -> Path:
    """A copy of the frozen plugin as ``uops-old<name>`` (device OLD<NAME>) with ``edits`` (file, old, new)."""
    src = dest / f"uops-old{name}"
    shutil.copytree(FROZEN, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    (src / "uops_oldguide").rename(src / f"uops_old{name}")
    for path in [src / "pyproject.toml", *(src / f"uops_old{name}").glob("*.py")]:
        text = path.read_text().replace("uops_oldguide", f"uops_old{name}").replace("uops-oldguide", f"uops-old{name}")
        path.write_text(text.replace('"OLDCPU"', f'"OLD{name.upper()}"').replace("OLDCPU =", f"OLD{name.upper()} ="))
    for file, old, new in edits:
        path = src / file.replace("PKG", f"uops_old{name}")
        assert old in path.read_text(), f"the frozen plugin changed: {old!r} is not in {file}"
        path.write_text(path.read_text().replace(old, new, 1))
    return src


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    if shutil.which("clang") is None:
        pytest.skip("the frozen plugin compiles with clang")
    root = tmp_path_factory.mktemp("compat")
    removed = _variant(
        root,
        "removed",
        [("PKG/runtime.py", "import numpy as np\n", "import numpy as np\n\nfrom uops.emulate import kernel_names\n")],
    )
    bounded = _variant(root, "bound", [("pyproject.toml", '"uops>=0.1"', '"uops>=0.1,<0.2"')])
    venv = make_venv(root / "venv", plugins=(FROZEN, removed), extra=("pytest",))
    venv.pip_install(
        bounded, no_deps=True
    )  # pip itself would refuse it next to uops 0.2: as after `pip install -U uops`
    return venv


def test_the_frozen_plugin_passes_the_whole_kit(venv: Venv) -> None:
    rows = venv.devices_json()
    assert rows["OLDCPU"]["status"] == "ok", rows["OLDCPU"]
    where = venv.run_python("import uops_oldguide; print(uops_oldguide.__file__)").stdout
    assert "site-packages" in where  # installed, not a checkout on the path
    r = venv.uops("conformance", "OLDCPU", env={"UOPS_DISABLE_PLUGINS": OTHERS, "UOPS_CACHE_DIR": str(venv.path / "c")})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert " passed" in out and " failed" not in out
    # its uops 0.1 imports are reported, with the uops.plugin import to use
    assert "`from uops.device import HostAllocator` imports uops.device" in out and "from uops.plugin import" in out


def test_the_old_paths_warn_once_naming_the_replacement(venv: Venv) -> None:
    r = venv.run_python(
        """
        import warnings
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            from uops.device import HostAllocator, Program, Runtime
            from uops.device import Buffer
        print(len(seen)); print(seen[0].category.__name__); print(seen[0].message)
        """
    )
    count, category, message = r.stdout.strip().splitlines()
    assert (count, category) == ("1", "DeprecationWarning")
    assert "from uops.plugin import HostAllocator" in message and "uops.device is deprecated" in message


def test_a_removed_name_is_refused_at_discovery_naming_the_replacement(venv: Venv) -> None:
    row = venv.devices_json()["OLDREMOVED"]
    assert row["status"] == "incompatible", row
    assert "built for plugin API 1.0" in row["reason"] and "uops.emulate.kernel_names was removed" in row["reason"]
    assert "runtime.py" in row["reason"] and "Dialect" in row["reason"]  # where, and what replaces it
    r = venv.run_python(
        """
        from uops import Device
        from uops.plugins import PluginError
        try:
            Device["OLDREMOVED"]
        except PluginError as e:
            print("refused:", e)
        """
    )
    assert "refused:" in r.stdout and "kernel_names" in r.stdout, r.stdout


def test_the_old_guides_upper_bound_is_refused_at_discovery(venv: Venv) -> None:
    row = venv.devices_json()["OLDBOUND"]
    assert row["status"] == "incompatible", row
    assert f"supports uops <0.2,>=0.1 but this is uops {uops.__version__}" in row["reason"]
