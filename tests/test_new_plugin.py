"""`uops new-plugin` and the plugin author's path: the template builds, installs and passes the kit.

The slow tests write the template's plugin into a temporary directory outside the repository,
pip-install it (not editable) into one fresh venv next to the core alone, and run `uops
conformance` on it; broken variants of it are reinstalled into the same venv and must fail the
kit with a message naming the problem. The fast tests cover the guide's code fixes in-process:
the CLI's compile-error line, `--arch` checked against `targets`, `--debug devices` tracebacks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from uops.backends.python.renderer import PythonRenderer
from uops.cli import error_summary, main
from uops.cli.new_plugin import api_range, plugin_names, write_plugin
from uops.compiler import CompileError, Compiler
from uops.plugins import Backend, Device, register_backend, unregister_backend

GCC_MESSAGE = (
    "kernel.c:3:3: error: unknown type name '__fp16'\n    3 |   __fp16 val0 = *(data1+ridx0);\n      |   ^~~~~~"
)


class _RejectingCompiler(Compiler):
    """A compiler that rejects every source the way gcc rejects clang's __fp16."""

    def __init__(self, arch: str | None = None) -> None:
        self.arch = arch

    def compile(self, src: str) -> bytes:
        raise CompileError(GCC_MESSAGE, src, compiler="gcc")


def _explode() -> str | None:
    raise RuntimeError("probe exploded while asking the driver")


@pytest.fixture
def fake_devices() -> Iterator[None]:
    """GUIDEDEV compiles through a compiler that always fails; GUIDEBAD's probe raises."""
    register_backend(
        Backend(
            "GUIDEDEV",
            lambda a: PythonRenderer(a, "GUIDEDEV"),
            _RejectingCompiler,
            object,
            lambda: None,
            lambda: None,
            targets=("t0", "t1"),
        )  # fmt: skip
    )
    register_backend(Backend("GUIDEBAD", PythonRenderer, _RejectingCompiler, object, _explode, lambda: None))
    yield
    unregister_backend("GUIDEDEV")
    unregister_backend("GUIDEBAD")


# ---------------------------------------------------------------------------------------------
# guide gaps fixed in code
# ---------------------------------------------------------------------------------------------


def test_cli_shows_the_compilers_own_message(fake_devices: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--device", "GUIDEDEV", "a+b"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "uops compile: error: gcc failed: kernel.c:3:3: error: unknown type name '__fp16' (details: rerun with --debug)"
    )


def test_error_summary_of_other_errors() -> None:
    assert error_summary(ValueError("one line")) == ("one line", False)
    assert error_summary(ValueError("first\nsecond")) == ("first", True)
    assert error_summary(CompileError("", "int x;", compiler=None)) == ("the compiler failed: (no message)", True)


def test_arch_is_checked_against_the_targets(fake_devices: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "--device", "GUIDEDEV", "--arch", "bogus", "a+b"]) == 1
    assert "GUIDEDEV has no target 'bogus'; its targets are: t0, t1" in capsys.readouterr().err
    assert Device["GUIDEDEV"].target("t1").arch == "t1"
    with pytest.raises(Exception, match="GUIDEBAD"):
        Device["GUIDEBAD"].target("t0")  # quarantined: its probe raised


def test_debug_devices_shows_the_quarantined_traceback(fake_devices: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devices"]) == 0
    plain = capsys.readouterr()
    assert "probe exploded" in plain.out and "Traceback" not in plain.err
    assert main(["--debug", "devices", "--json"]) == 0
    out = capsys.readouterr()
    assert "--- GUIDEBAD: the error that quarantined it ---" in out.err
    assert "Traceback" in out.err and "in _explode" in out.err and "RuntimeError: probe exploded" in out.err
    assert out.out.lstrip().startswith("{")  # --json stays parseable: tracebacks go to stderr


# ---------------------------------------------------------------------------------------------
# uops new-plugin: names and files
# ---------------------------------------------------------------------------------------------


def test_api_range_is_the_minor_series() -> None:
    assert api_range("0.1.0") == "uops>=0.1,<0.2"
    assert api_range("1.4.2.dev3") == "uops>=1.4,<1.5"


@pytest.mark.parametrize("bad", ["1gcc", "my-dev", "my dev", "", "class", "dév"])
def test_name_must_be_an_identifier(bad: str) -> None:
    with pytest.raises(ValueError, match="is not usable"):
        plugin_names(bad, [])


def test_name_must_not_be_an_installed_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-plugin", "python", "--dest", str(tmp_path)]) == 1
    assert "device PYTHON already exists" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("like", ["cpu", "gpu"])
def test_new_plugin_writes_a_distribution(tmp_path: Path, like: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-plugin", "my_dev", "--like", like, "--dest", str(tmp_path)]) == 0
    root = tmp_path / "uops-my-dev"
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    four = [f"uops_my_dev/{m}.py" for m in ("__init__", "compiler", "renderer", "runtime")]
    assert set(four + ["pyproject.toml", "README.md", "tests/test_conformance.py"]) <= set(files)
    pyproject = (root / "pyproject.toml").read_text()
    assert 'MY_DEV = "uops_my_dev"' in pyproject and f'"{api_range()}"' in pyproject
    for f in files:
        assert not re.search(r"@[A-Za-z_]+@", (root / f).read_text()), f  # every placeholder filled
    for f in four + ["tests/test_conformance.py"]:
        compile((root / f).read_text(), f, "exec")  # valid Python
    assert f"wrote {root / 'pyproject.toml'}" in capsys.readouterr().out
    with pytest.raises(FileExistsError, match="already exists"):
        write_plugin("my_dev", like=like, dest=tmp_path, existing=[])


def test_doc_links_stay_in_the_repository() -> None:
    """Every relative link in the docs names a file of the repository (no design notes kept outside it)."""
    repo = Path(__file__).resolve().parent.parent
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md")), *sorted(repo.glob("plugins/*/README.md"))]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            assert repo in path.parents and path.exists(), f"{page.relative_to(repo)} links to {target}"
            checked += 1
    assert checked >= 3
