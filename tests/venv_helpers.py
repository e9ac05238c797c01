"""Real virtual environments with the core and plugins installed by pip, for tests.

Why: plugin discovery goes through installed metadata and entry points, so tests of it must
install real distributions. A venv is created without pip (fast) and the test runner's pip
installs into it with ``pip --python``; sources are copied to a temp dir first so concurrent
builds never write into the working tree. Reuse ``make_venv`` in other test modules; create one
venv per module (a module-scoped fixture) and install everything you need in one call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import REPO as REPO_ROOT

PLUGINS_DIR = REPO_ROOT / "plugins"

_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest_cache", "*.so")
# variables of the outer environment that would leak into the venv's behaviour
_SCRUB = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONNOUSERSITE")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without Python/uops settings of the outer run, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB and not k.startswith("UOPS_")}
    env.update(extra)
    return env


@dataclass
class Venv:
    """A virtual environment: run Python, pip and the `uops` command in it."""

    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def pip_install(self, *args: str | Path, no_deps: bool = False) -> None:
        """pip install into this venv (raises with pip's output on failure)."""
        cmd = [sys.executable, "-m", "pip", "--python", str(self.python), "install", "-q"]
        cmd += ["--disable-pip-version-check", "--no-input", *(["--no-deps"] if no_deps else []), *map(str, args)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"pip install failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def pip_uninstall(self, *names: str) -> None:
        cmd = [sys.executable, "-m", "pip", "--python", str(self.python), "uninstall", "-y", "-q", *names]
        r = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(), timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"pip uninstall failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")

    def run_python(
        self, code: str, *, env: dict[str, str] | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run `code` with the venv's interpreter (in a neutral cwd, so the repo is not importable by accident)."""
        r = subprocess.run(
            [str(self.python), "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            env=clean_env(**(env or {})),
            cwd=self.path,
            timeout=300,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"python exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        return r

    def uops(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run the installed `uops` console script."""
        return subprocess.run(
            [str(self.bin / "uops"), *args],
            capture_output=True,
            text=True,
            env=clean_env(**(env or {})),
            cwd=self.path,
            timeout=300,
        )

    def devices_json(self, env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
        """`uops devices --json`, as {device: row}; asserts exit code 0."""
        r = self.uops("devices", "--json", env=env)
        assert r.returncode == 0, f"uops devices --json exited {r.returncode}: {r.stderr}"
        return {row["device"]: row for row in json.loads(r.stdout)["backends"]}


def copy_source(src: Path, dest_parent: Path) -> Path:
    """Copy a source tree (without build outputs) so pip builds it away from the working tree."""
    dest = dest_parent / src.name
    shutil.copytree(src, dest, ignore=_IGNORE)
    return dest


def core_source(dest_parent: Path) -> Path:
    """A copy of the core distribution's sources (pyproject.toml, README.md, core/)."""
    dest = dest_parent / "uops-core-src"
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        if (REPO_ROOT / name).exists():
            shutil.copy2(REPO_ROOT / name, dest / name)
    shutil.copytree(REPO_ROOT / "core", dest / "core", ignore=_IGNORE)
    return dest


def make_venv(
    path: Path, *, core: bool = True, plugins: tuple[str | Path, ...] = (), extra: tuple[str, ...] = ()
) -> Venv:
    """A fresh venv at `path` with the core (a copy of this checkout) and `plugins` installed by pip.

    `plugins` are names of directories under plugins/ (e.g. "cpu_clang") or paths to source
    trees; `extra` are more requirements (e.g. "numpy"). Everything goes in one pip call.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    venv = Venv(path)
    srcdir = path.parent / f"{path.name}-src"
    srcdir.mkdir(exist_ok=True)
    reqs: list[str | Path] = []
    if core:
        reqs.append(core_source(srcdir))
    for p in plugins:
        src = Path(p) if isinstance(p, Path) or "/" in str(p) else PLUGINS_DIR / str(p)
        reqs.append(copy_source(src, srcdir))
    reqs += extra
    if reqs:
        venv.pip_install(*reqs)
    return venv


def write_plugin(
    root: Path,
    *,
    dist: str,
    devices: tuple[str, ...],
    init_source: str,
    requires: str = "uops>=0.1",
    version: str = "0.1.0",
    module: str | None = None,
) -> Path:
    """Write a tiny plugin source tree (pyproject.toml + one module) under `root`; returns its directory.

    `init_source` is the module's __init__.py; every device in `devices` gets an entry point to it.
    """
    module = module or dist.replace("-", "_")
    src = root / dist
    (src / module).mkdir(parents=True)
    eps = "\n".join(f'{d} = "{module}"' for d in devices)
    (src / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "{version}"
        dependencies = ["{requires}"]

        [project.entry-points."uops.backends"]
        """)
        + eps
        + f'\n\n[tool.setuptools]\npackages = ["{module}"]\n'
    )
    (src / module / "__init__.py").write_text(textwrap.dedent(init_source))
    return src
