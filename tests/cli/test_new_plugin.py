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

from tests import REPO
from tests.venv_helpers import Venv, make_venv
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


def test_api_range_is_this_core_or_later() -> None:
    assert api_range("0.2.0") == "uops>=0.2"
    assert api_range("1.4.2.dev3") == "uops>=1.4"


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
    assert set(four + ["pyproject.toml", "README.md", "tests/test_my_dev_conformance.py"]) <= set(files)
    pyproject = (root / "pyproject.toml").read_text()
    assert 'MY_DEV = "uops_my_dev"' in pyproject and f'"{api_range()}"' in pyproject
    for f in files:
        assert not re.search(r"@[A-Za-z_]+@", (root / f).read_text()), f  # every placeholder filled
    for f in four + ["tests/test_my_dev_conformance.py"]:
        compile((root / f).read_text(), f, "exec")  # valid Python
    assert f"wrote {root / 'pyproject.toml'}" in capsys.readouterr().out
    with pytest.raises(FileExistsError, match="already exists"):
        write_plugin("my_dev", like=like, dest=tmp_path, existing=[])


def test_doc_links_stay_in_the_repository() -> None:
    """Every relative link in the docs names a file of the repository (no design notes kept outside it)."""
    repo = REPO
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


# ---------------------------------------------------------------------------------------------
# the template out of tree: pip install (not editable) next to the core alone, then the kit
# ---------------------------------------------------------------------------------------------

# one mistake each that a plugin author could make, and the kit must catch: (file, old text, new text)
BROKEN: dict[str, list[tuple[str, str, str]]] = {
    "gccwrong": [
        ("renderer.py", "PatternMatcher([(UPat(Ops.BITCAST",
         "PatternMatcher([(UPat(Ops.SQRT, name='x'), lambda ctx, x: f'({ctx[x.src[0]]}*0.5f)'), (UPat(Ops.BITCAST"),
    ],
    "gccprobe": [
        ("__init__.py", "def probe_runtime() -> str | None:\n",
         "def probe_runtime() -> str | None:\n    raise RuntimeError('the driver handshake failed')\n"),
    ],
    "gccheavy": [("__init__.py", "import os\n", "import os\n\nimport numpy  # noqa: F401\n")],
    "gccdecl": [
        ("__init__.py", "            plugin_api=(1, 1),",
         "            unsupported={'test_tensor.py::test_unary': 'no libm here'},\n"
         "            expected_failures={'test_plugin_imports_only_the_plugin_api': 'fixed in 0.1.1'},\n"
         "            plugin_api=(1, 1),"),
    ],
    "gccprivate": [
        ("compiler.py", "import tempfile\n", "import tempfile\n\nfrom uops.runtime.elf import host_machine\n"),
    ],
}  # fmt: skip


def _break(root: Path, module: str, edits: list[tuple[str, str, str]]) -> None:
    for file, old, new in edits:
        path = root / module / file
        text = path.read_text()
        assert old in text, f"the template changed: {old!r} is no longer in {file}"
        path.write_text(text.replace(old, new, 1))


@pytest.fixture(scope="module")
def kit_venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """One venv: the core (with pytest) and, from one pip call, the template's plugins built out of tree."""
    root = tmp_path_factory.mktemp("new-plugin")
    src = root / "src"
    dirs = [
        write_plugin("gcc", like="cpu", dest=src, existing=[]),
        write_plugin("gpuex", like="gpu", dest=src, existing=[]),
    ]
    for name, edit in BROKEN.items():
        dirs.append(write_plugin(name, like="cpu", dest=src, existing=[]))
        _break(dirs[-1], f"uops_{name}", edit)
    venv = make_venv(root / "venv", extra=("pytest", "setuptools"))
    venv.pip_install("--no-build-isolation", *dirs)
    return venv


def _conformance(venv: Venv, device: str, *pytest_args: str, alone: bool = True) -> tuple[int, str]:
    others = [d for d in ("GCC", "GPUEX", *(n.upper() for n in BROKEN)) if d != device]
    env = {"UOPS_CACHE_DIR": str(venv.path / "cache"), **({"UOPS_DISABLE_PLUGINS": ",".join(others)} if alone else {})}
    r = venv.uops("conformance", device, *pytest_args, env=env)
    return r.returncode, r.stdout + r.stderr


@pytest.mark.slow
def test_template_plugin_passes_the_kit(kit_venv: Venv) -> None:
    rows = kit_venv.devices_json(env={"UOPS_DISABLE_PLUGINS": "GCCPROBE"})
    assert rows["GCC"]["status"] == "ok" and rows["GCC"]["distribution"] == "uops-gcc", rows["GCC"]
    assert set(rows["GCC"]["api_range"].split(",")) == set(api_range().removeprefix("uops").split(","))
    site = kit_venv.run_python("import uops_gcc; print(uops_gcc.__file__)").stdout
    assert "site-packages" in site  # installed, not a checkout on the path
    rc, out = _conformance(kit_venv, "GCC")
    assert rc == 0, out
    assert " passed" in out and " failed" not in out


@pytest.mark.slow
def test_gpu_template_renders_builds_and_runs(kit_venv: Venv) -> None:
    r = kit_venv.uops("compile", "--device", "GPUEX", "(a*b).sum(axis=1).relu()", "--stages")
    assert r.returncode == 0, r.stderr
    assert 'extern "C" __kernel void __bounds__(' in r.stdout and "local_id.x" in r.stdout
    out = kit_venv.run_python(
        """
        import numpy as np
        from uops import Tensor
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        got = (Tensor(a, device="GPUEX") * 2).sum(axis=1).numpy()
        assert np.allclose(got, (a * 2).sum(axis=1)), got
        print("ok")
        """
    )
    assert out.stdout.strip() == "ok"


@pytest.mark.slow
def test_a_wrong_result_fails_the_kit_naming_the_op(kit_venv: Venv) -> None:
    rc, out = _conformance(kit_venv, "GCCWRONG", "-k", "unary")
    assert rc == 1, out
    assert re.search(r"FAILED \S*test_unary\[[^\]]*sqrt\]", out), out


@pytest.mark.slow
def test_a_raising_probe_fails_the_kit_naming_it(kit_venv: Venv) -> None:
    rc, out = _conformance(kit_venv, "GCCPROBE")
    assert rc != 0, out
    assert "probe_runtime() raised RuntimeError: the driver handshake failed" in out
    assert "uops-gccprobe" in out


@pytest.mark.slow
def test_a_heavy_import_fails_the_kit_naming_it(kit_venv: Venv) -> None:
    rc, listed = _conformance(kit_venv, "GCCHEAVY", "--list")
    assert rc == 0, listed
    if "test_plugin_contract.py::" not in listed:
        pytest.skip("the kit has no plugin-contract checks (test_plugin_contract) yet")
    rc, out = _conformance(kit_venv, "GCCHEAVY", "-k", "test_plugin_contract")
    assert rc == 1, out
    assert "numpy" in out and "uops_gccheavy" in out, out


@pytest.mark.slow
def test_declared_unsupported_checks_skip_and_a_stale_expected_failure_fails(kit_venv: Venv) -> None:
    rc, out = _conformance(kit_venv, "GCCDECL", "-k", "test_unary or imports_only_the_plugin_api")
    assert rc == 1, out  # the expected failure passes: a stale entry fails the run
    assert "XPASS(strict)" in out and "fixed in 0.1.1" in out, out
    assert "unsupported on GCCDECL (Backend.unsupported): no libm here" in out, out
    assert " failed" in out and "test_unary" not in out.split("short test summary")[-1].split("SKIPPED")[0], out


@pytest.mark.slow
def test_a_private_core_import_fails_the_kit_naming_it(kit_venv: Venv) -> None:
    rc, out = _conformance(kit_venv, "GCCPRIVATE", "-k", "imports_only_the_plugin_api")
    assert rc == 1, out
    assert "uops.runtime.elf" in out and "compiler.py" in out, out
    # the module named, and what to use instead: host_machine is not part of the plugin API
    assert "nothing in uops.plugin" in out, out
    rc, out = _conformance(kit_venv, "GCC", "-k", "imports_only_the_plugin_api")
    assert rc == 0, out


def test_the_guides_worked_example_is_what_the_template_writes(tmp_path: Path) -> None:
    """docs/plugin-guide.md section 0 runs `uops new-plugin gcc` and lists its files: both match the template."""
    guide = (REPO / "docs" / "plugin-guide.md").read_text()
    section = guide.split("## 0. ", 1)[1].split("\n## ", 1)[0]
    assert "$ uops new-plugin gcc --dest /tmp" in section and "$ uops conformance GCC" in section
    listed = set(re.findall(r"^\| `([\w./]+)` \|", section, re.M))
    root = write_plugin("gcc", dest=tmp_path, existing=[])
    written = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"README.md"}
    assert listed == written
    assert 'GCC = "uops_gcc"' in (root / "pyproject.toml").read_text()


@pytest.mark.slow
def test_gpu_template_plugin_passes_the_kit(kit_venv: Venv) -> None:
    """The kit's checks of what the gpu variant writes itself: its dialect's kernels, dtypes, specs, contract.

    Its opts and Tensor ops run through the core's GPU emulation, which CUDA_EMU, AMD_EMU and
    METAL_EMU put through the whole kit already (four minutes more here for no new code path).
    """
    selected = "test_kernels or test_dtypes or test_program_spec or test_plugin_contract"
    rc, out = _conformance(kit_venv, "GPUEX", "-k", selected)
    assert rc == 0, out
    assert " passed" in out and " failed" not in out
