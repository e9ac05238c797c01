"""The claims of the docs a test can check: the devices' priorities, the environment variables in the README's
table, and the module list of docs/internals.md."""

from __future__ import annotations

import re
from pathlib import Path

from tests import REPO
from uops.plugins import Device

CORE = REPO / "core" / "uops"
# what reads an environment variable: os.environ.get / os.environ[...] / os.getenv / positive_int_from_env
_READS = re.compile(r"""(?:environ\.get|environ\[|getenv|_from_env)\(?\s*["'](UOPS_[A-Z0-9_]+)["']""")


def _variables(root: Path) -> set[str]:
    return {m for f in root.rglob("*.py") for m in _READS.findall(f.read_text())}


def test_every_environment_variable_is_in_a_readme_table() -> None:
    """The core's variables are in the README's table; a plugin's in that table or in the plugin's README."""
    readme = (REPO / "README.md").read_text()
    table = {m for m in re.findall(r"^\| `(UOPS_[A-Z0-9_]+)", readme, re.M)} | set(
        re.findall(r"`(UOPS_[A-Z0-9_]+)", readme)
    )
    core = _variables(CORE)
    assert {"UOPS_DEBUG", "UOPS_BEAM", "UOPS_DEVICE"} <= core
    assert not core - table, f"read by the core, not in README.md: {sorted(core - table)}"
    for plugin in sorted((REPO / "plugins").iterdir()):
        own = plugin / "README.md"
        documented = table | (set(re.findall(r"UOPS_[A-Z0-9_]+", own.read_text())) if own.exists() else set())
        missing = _variables(plugin) - documented
        assert not missing, f"read by {plugin.name}, in neither README: {sorted(missing)}"


def test_internals_module_table_names_every_module() -> None:
    """docs/internals.md has one line per module: every module of the core is in it, and nothing else."""
    text = (REPO / "docs" / "internals.md").read_text()
    named = {n.rstrip("/") for n in re.findall(r"^\| `([a-z_/]+)\*?` \|", text, re.M)}
    packages: set[str] = set()
    modules: set[str] = set()
    for f in CORE.rglob("*.py"):
        parts = f.relative_to(CORE).with_suffix("").parts
        if any(p.startswith("_") and p != "__init__" for p in parts) or "kit" in parts or "templates" in parts:
            continue
        if parts[-1] != "__init__":
            modules.add("/".join(parts))
        elif len(parts) > 1 and f.read_text().strip():
            packages.add("/".join(parts[:-1]))
    # a package's own code (its __init__) is listed by name unless the table lists modules inside it; a package
    # listed as a whole (``frontend/tensor/``, ``cli/*``) covers its modules
    modules |= {p for p in packages if not any(n.startswith(p + "/") for n in named)}
    wholes = {n for n in named if (CORE / n).is_dir()}
    unlisted = sorted(m for m in modules if m not in named and not any(m.startswith(w + "/") for w in wholes))
    assert not unlisted, f"modules missing from docs/internals.md: {unlisted}"
    stale = sorted(n for n in named if not ((CORE / f"{n}.py").exists() or (CORE / n).is_dir()))
    assert not stale, f"docs/internals.md names modules that do not exist: {stale}"


def test_plugin_guide_priorities_are_the_registered_ones() -> None:
    guide = (REPO / "docs" / "plugin-guide.md").read_text()
    claimed = dict(re.findall(r"\b([A-Z][A-Z_]*) (\d+)\b", guide[guide.index("highest priority:") :][:200]))
    registered = {s.device: s.priority for s in Device.status() if s.priority is not None}
    assert {"CUDA", "CPU", "PYTHON"} <= claimed.keys()
    for device, priority in registered.items():
        if device in claimed:
            assert int(claimed[device]) == priority, (device, claimed[device], priority)
    assert set(registered) <= claimed.keys(), sorted(set(registered) - claimed.keys())
