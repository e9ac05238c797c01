"""Choosing a device is cheap: what listing devices and `Device.DEFAULT` import and read, the probes,
the compile `Target`, and the contracts as abstract base classes.

Import checks run in a fresh interpreter (``sys.modules`` of this one is full of everything).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uops.compiler import Compiler
from uops.plugins import Device, Target
from uops.plugins.probes import which
from uops.plugins.versions import _parsed_contains, _plain_contains, specifier_contains
from uops.renderer import Renderer
from uops.runtime import Allocator, Program, Runtime

HEAVY = ("numpy", "cuda", "cuda.bindings", "importlib.metadata", "email")


def _run(code: str, env: dict[str, str] | None = None, path: list[str] | None = None) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("UOPS_")}
    if path:
        base["PYTHONPATH"] = os.pathsep.join([*path, base.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env={**base, **(env or {})}
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


_PROBE_IMPORTS = """
    import json, sys
    import uops
    from uops.plugins import Device
    out = {{}}
    def loaded():
        plugin_parts = [m for m in sys.modules if m.startswith("uops_") and m.count(".") == 1]
        return sorted([m for m in {heavy!r} if m in sys.modules] + plugin_parts)
    {action}
    out["imported"] = loaded()
    out["plugins"] = sorted(m for m in sys.modules if m.startswith("uops_"))
    print(json.dumps(out))
"""


@pytest.mark.parametrize(
    "action",
    [
        "out['names'] = Device.names()",
        "out['default'] = Device.DEFAULT",
        "out['rows'] = [(s.device, s.status) for s in Device.status()]",
        "out['cpu'] = Device['CPU'].name if 'CPU' in Device else None",
    ],
    ids=["names", "default", "status", "cpu-handle"],
)
def test_choosing_a_device_imports_nothing_heavy(action: str) -> None:
    """Listing, probing every backend and picking the default import no numpy, no cuda, and none of
    a plugin's renderer/compiler/runtime/emulated modules (only the hook modules themselves)."""
    out = _run(_PROBE_IMPORTS.format(heavy=HEAVY, action=action))
    assert out["imported"] == [], out
    if "default" in out:
        assert out["default"] in Device.names()
    if "rows" in out:
        assert ("PYTHON", "ok") in [tuple(r) for r in out["rows"]]


def test_the_heavy_import_check_can_fail() -> None:
    """The same check reports a plugin's runtime module once a runtime is made."""
    if "CPU" not in Device.names() or Device["CPU"].runtime_reason is not None:
        pytest.skip("the CPU backend cannot run here")
    out = _run(_PROBE_IMPORTS.format(heavy=HEAVY, action="Device['CPU'].runtime"))
    assert "uops_cpu_clang.runtime" in out["imported"] and "numpy" in out["imported"]


# ---------------------------------------------------------------------------------------------
# a disabled plugin costs nothing: its module and its METADATA are never read
# ---------------------------------------------------------------------------------------------

_AUDIT_OPENS = """
    import json, sys
    opened = []
    def hook(event, args):
        if event == "open" and isinstance(args[0], str) and "uops_secret" in args[0]:
            opened.append(args[0])
    sys.addaudithook(hook)
    from uops.plugins import Device
    out = {"names": Device.names(), "default": Device.DEFAULT}
    out["rows"] = {s.device: [s.status, s.distribution, s.version] for s in Device.status()}
    out["opened"] = sorted({p.rsplit("/", 1)[-1] for p in opened})
    out["imported"] = "uops_secret_mod" in sys.modules
    print(json.dumps(out))
"""


@pytest.fixture
def secret_site(tmp_path: Path) -> Path:
    """A plugin whose module refuses to be imported, installed as a .dist-info on a sys.path directory."""
    info = tmp_path / "uops_secret-2.5.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: uops-secret\nVersion: 2.5\nRequires-Dist: uops>=0.1\n")
    (info / "entry_points.txt").write_text("[uops.backends]\nSECRET = uops_secret_mod\n")
    (tmp_path / "uops_secret_mod.py").write_text("raise RuntimeError('a disabled plugin was imported')\n")
    return tmp_path


@pytest.mark.parametrize("disable", ["SECRET", "uops-secret", "UOPS_SECRET"])
def test_disabled_plugin_module_and_metadata_are_not_read(secret_site: Path, disable: str) -> None:
    out = _run(_AUDIT_OPENS, env={"UOPS_DISABLE_PLUGINS": disable}, path=[str(secret_site)])
    assert "SECRET" not in out["names"] and out["imported"] is False
    assert out["opened"] == ["entry_points.txt"]  # found (to be listed as disabled), never loaded
    assert out["rows"]["SECRET"] == ["disabled", "uops-secret", "2.5"]  # from the directory's name


def test_disabled_plugin_row_claims_nothing_about_its_metadata(secret_site: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("UOPS_")}, "UOPS_DISABLE_PLUGINS": "SECRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(secret_site), env.get("PYTHONPATH", "")])
    code = "import sys; from uops.cli import main; sys.exit(main(['devices']))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("SECRET")]
    assert row.split()[1:4] == ["uops-secret", "2.5", "-"] and "disabled by UOPS_DISABLE_PLUGINS" in row


def test_enabled_plugin_metadata_is_read(secret_site: Path) -> None:
    """The contrast: without UOPS_DISABLE_PLUGINS the same plugin's METADATA is read and its import fails."""
    out = _run(_AUDIT_OPENS, path=[str(secret_site)])
    assert "SECRET" in out["names"] and "METADATA" in out["opened"]
    assert out["rows"]["SECRET"][:2] == ["broken", "uops-secret"]


def test_metadata_is_parsed_without_importlib_metadata(tmp_path: Path) -> None:
    from uops.plugins.discovery import parse_metadata, scan_sys_path

    text = (
        "Metadata-Version: 2.1\nName: uops-x\nVersion: 1.2rc1\nRequires-Dist: numpy\n"
        "Requires-Dist: uops (>=0.1,\n <0.2)\nRequires-Dist: pytest; extra == 'test'\n\nRequires-Dist: not-a-header\n"
    )
    meta = parse_metadata(text)
    assert (meta.name, meta.version) == ("uops-x", "1.2rc1")
    assert meta.requires == ("numpy", "uops (>=0.1, <0.2)", "pytest; extra == 'test'")
    info = tmp_path / "uops_x-1.2rc1.dist-info"
    info.mkdir()
    # (importlib.metadata keeps a folded line's indentation and newline: compare on unfolded ones)
    (info / "METADATA").write_text(text.replace(",\n <0.2", ",<0.2"))
    (info / "entry_points.txt").write_text("[uops.backends]\nXDEV = uops_x\n")
    sys.path.insert(0, str(tmp_path))
    try:
        (ep,) = [e for e in scan_sys_path("uops.backends") or [] if e.name == "XDEV"]
    finally:
        sys.path.remove(str(tmp_path))
    assert (ep.dist_name, ep.dist_version) == ("uops_x", "1.2rc1")
    full = ep.distribution()  # importlib.metadata agrees with the hand parser
    assert ep.dist is None and ep.metadata() == type(meta)(full.metadata["Name"], full.version, list(full.requires))
    assert ep.metadata().requires == ("numpy", "uops (>=0.1,<0.2)", "pytest; extra == 'test'")


def test_egg_info_requirements_match_importlib_metadata(tmp_path: Path) -> None:
    from uops.plugins.discovery import scan_sys_path

    info = tmp_path / "uops_egg.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: uops-egg\nVersion: 0.4\n\nlong description\n")
    (info / "requires.txt").write_text("uops<0.2,>=0.1\nnumpy\n\n[test]\npytest\n")
    (info / "entry_points.txt").write_text("[uops.backends]\nEGGDEV = uops_egg\n")
    sys.path.insert(0, str(tmp_path))
    try:
        (ep,) = [e for e in scan_sys_path("uops.backends") or [] if e.name == "EGGDEV"]
    finally:
        sys.path.remove(str(tmp_path))
    meta, full = ep.metadata(), ep.distribution()
    assert meta is not None and (meta.name, meta.version) == ("uops-egg", "0.4")
    assert (full.metadata["Name"], full.version) == ("uops-egg", "0.4")
    assert list(meta.requires) == [r for r in full.requires if "extra" not in r] == ["uops<0.2,>=0.1", "numpy"]


# ---------------------------------------------------------------------------------------------
# probes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", ["sh", "clang", "python3", "/bin/sh", "no-such-command-uops", "/nonexistent/cc"])
def test_which_agrees_with_shutil(cmd: str) -> None:
    assert which(cmd) == shutil.which(cmd)


def test_cpu_probes_say_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    uops_cpu_clang = pytest.importorskip("uops_cpu_clang")
    monkeypatch.setenv("UOPS_CLANG", "/nonexistent/clang")
    reason = uops_cpu_clang.probe_compile()
    assert reason is not None and "/nonexistent/clang" in reason and "apt-get install clang" in reason
    missing = tmp_path / "missing"
    monkeypatch.setenv("TMPDIR", str(missing))
    reason = uops_cpu_clang.probe_runtime()
    assert reason is not None and str(missing) in reason and "TMPDIR" in reason
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert uops_cpu_clang.probe_runtime() is None


def test_cuda_probes_use_no_bindings(monkeypatch: pytest.MonkeyPatch) -> None:
    uops_cuda = pytest.importorskip("uops_cuda")
    reason = uops_cuda.probe_runtime()
    if not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg")):
        assert reason is not None and reason.startswith("no NVIDIA driver/GPU: ") and "/dev/nvidiactl" in reason
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "cuda"))])
    missing = uops_cuda.probe_compile()
    assert missing is not None and "cuda-bindings" in missing and "pip install" in missing
    monkeypatch.setenv("UOPS_CXX", "/nonexistent/c++")
    emu = uops_cuda.emulation_probe()
    assert emu is not None and "UOPS_CXX='/nonexistent/c++'" in emu


# ---------------------------------------------------------------------------------------------
# version ranges: the regex-free fast path agrees with the full parser
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [">=0.1,<0.2", ">=0.1", "<0.2", "==0.1", "!=0.1.0", "<=0.1", ">0.1", "> 0.0.9, <1"])
@pytest.mark.parametrize("version", ["0.1", "0.1.0", "0.1.5", "0.2", "0.0.9", "1.0", "10"])
def test_plain_ranges_agree_with_the_parser(spec: str, version: str) -> None:
    assert _plain_contains(spec, version) == _parsed_contains(spec, version) == specifier_contains(spec, version)


@pytest.mark.parametrize(("spec", "version"), [("~=0.1", "0.1.3"), ("==0.1.*", "0.1.2"), (">=0.1", "0.2rc1")])
def test_non_plain_ranges_use_the_parser(spec: str, version: str) -> None:
    assert _plain_contains(spec, version) is None and specifier_contains(spec, version) is True


# ---------------------------------------------------------------------------------------------
# the compile Target
# ---------------------------------------------------------------------------------------------


def test_target_is_a_frozen_value_per_arch() -> None:
    from uops.cli.compile import compile_expression

    if "CPU" not in Device.names() or Device["CPU"].compile_reason is not None:
        pytest.skip("the CPU backend cannot compile here")
    cpu = Device["CPU"]
    t = cpu.target("x86_64")
    assert isinstance(t, Target) and (t.device, t.arch, t.renderer.target) == ("CPU", "x86_64", "x86_64")
    assert "-march=x86-64" in t.compiler.flags and cpu.target("x86_64") is t
    assert cpu.target() is cpu.target(None) and cpu.target().renderer is cpu.renderer
    with pytest.raises(AttributeError):
        t.arch = "aarch64"  # type: ignore[misc]
    ((spec, stages),) = compile_expression("(a+b).sum()", t, {}, (4, 4))
    assert spec.device == "CPU" and spec.target == "x86_64" and spec.lib.startswith(b"\x7fELF") and "SOURCE" in stages


def test_cuda_target_cross_compiles_without_a_gpu() -> None:
    from uops.cli.compile import compile_expression

    if "CUDA" not in Device.names() or Device["CUDA"].compile_reason is not None:
        pytest.skip("NVRTC is not installed")
    t = Device["CUDA"].target("sm_80")
    ((spec, _),) = compile_expression("a*2", t, {}, (8,))
    assert (t.arch, t.renderer.target, t.compiler.arch, spec.target) == ("sm_80", "sm_80", "sm_80", "sm_80")


# ---------------------------------------------------------------------------------------------
# contracts are abstract base classes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "missing"),
    [(Renderer, "render"), (Compiler, "compile"), (Allocator, "alloc"), (Program, "__call__"), (Runtime, "load")],
)
def test_incomplete_contract_is_refused(base: type, missing: str) -> None:
    incomplete = type(f"Incomplete{base.__name__}", (base,), {})
    with pytest.raises(TypeError, match=f"Can't instantiate abstract class Incomplete{base.__name__}.*{missing}"):
        incomplete()


def test_renderer_is_configured_by_its_constructor() -> None:
    class Tiny(Renderer):
        device, target = "TINY", "t1"

        def render(self, name: str, uops: list) -> str:
            return name

    assert (Tiny().device, Tiny().target) == ("TINY", "t1")
    assert (Tiny("t2", "TINY_EMU").device, Tiny("t2").target) == ("TINY_EMU", "t2")
