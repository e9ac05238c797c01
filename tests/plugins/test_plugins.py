"""Plugin discovery, API-range checks, lazy loading and quarantine, through real pip installs.

The venv tests install the core and tiny plugins (written here as source trees) into fresh
virtual environments, so discovery goes through real installed metadata and entry points.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import uops
import uops.plugin
from tests.venv_helpers import Venv, make_venv, write_plugin
from uops.plugins import (
    Backend,
    Device,
    Devices,
    PluginError,
    register_backend,
    unregister_backend,
)
from uops.plugins.versions import SpecifierError, specifier_contains

# ---------------------------------------------------------------------------------------------
# Fake plugins. Their factories return simple objects: these tests are about the plugin
# machinery, not about code generation.
# ---------------------------------------------------------------------------------------------

GOOD_PLUGIN = """
    from uops.plugins import Backend, hookimpl

    class FakeRenderer:
        def __init__(self, arch):
            self.device, self.target = "FAKE", arch or "fake1"

    class FakeCompiler:
        def __init__(self, arch):
            self.arch = arch or "fake1"
        def compile(self, src):
            return src.encode()

    class FakeRuntime:
        device = "FAKE"
        allocator = "fake-allocator"

    @hookimpl
    def uops_backends():
        return [
            Backend("FAKE", FakeRenderer, FakeCompiler, FakeRuntime, lambda: None, lambda: None,
                    targets=("fake1", "fake2"), priority=1),
            Backend("FAKEGPU", FakeRenderer, FakeCompiler, FakeRuntime, lambda: None,
                    lambda: "no FAKEGPU card found; plug one in", targets=("g1",), priority=99),
        ]
"""

IMPORT_FAILS = """
    import vendor_sdk_that_is_not_installed  # the plugin's heavy dependency is missing
"""

# never imported: the core must reject it from its metadata alone
FROM_THE_FUTURE = """
    raise RuntimeError("uops_future was imported although its API range excludes this core")
"""

PROBE_RAISES = """
    from uops.plugins import Backend, hookimpl

    def probe():
        raise OSError("driver exploded")

    @hookimpl
    def uops_backends():
        return [Backend("BADPROBE", str, str, object, probe, lambda: None)]
"""

BAD_DEVICES = {"IMPFAIL": "uops-impfail", "FUTURE": "uops-future", "BADPROBE": "uops-badprobe"}


@pytest.fixture(scope="module")
def core_only(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return make_venv(tmp_path_factory.mktemp("core-only") / "venv")


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """core + cpu_clang + the fake plugins (the incompatible one installed with --no-deps)."""
    root = tmp_path_factory.mktemp("full")
    src = root / "plugin-src"
    good = write_plugin(src, dist="uops-fake", devices=("FAKE", "FAKEGPU"), init_source=GOOD_PLUGIN)
    impfail = write_plugin(src, dist="uops-impfail", devices=("IMPFAIL",), init_source=IMPORT_FAILS)
    badprobe = write_plugin(src, dist="uops-badprobe", devices=("BADPROBE",), init_source=PROBE_RAISES)
    future = write_plugin(
        src, dist="uops-future", devices=("FUTURE",), init_source=FROM_THE_FUTURE, requires="uops>=9", version="0.3.0"
    )
    venv = make_venv(root / "venv", plugins=("cpu_clang", good, impfail, badprobe))
    venv.pip_install(future, no_deps=True)
    return venv


def _python_ok(venv: Venv) -> bool:
    return venv.devices_json()["PYTHON"]["status"] == "ok"


# ---------------------------------------------------------------------------------------------
# (a) the core alone
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_core_alone_lists_only_python(core_only: Venv) -> None:
    rows = core_only.devices_json()
    assert list(rows) == ["PYTHON"]
    py = rows["PYTHON"]
    assert py["builtin"] is True and py["distribution"] == "uops" and py["module"] == "uops.backends.python"
    # until the PYTHON backend lands it is quarantined with a reason, never a crash
    assert py["status"] in ("ok", "broken")
    assert (py["reason"] is None) == (py["status"] == "ok")
    table = core_only.uops("devices")
    assert table.returncode == 0, table.stderr
    assert "PYTHON" in table.stdout and "CPU" not in table.stdout


@pytest.mark.slow
def test_core_alone_unknown_device_lists_known(core_only: Venv) -> None:
    r = core_only.run_python(
        """
        from uops import Device
        try:
            Device["cpu"]
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    assert "PluginError" in r.stdout and "unknown device 'cpu'" in r.stdout and "PYTHON" in r.stdout
    assert "pip install uops-cpu-clang" in r.stdout


@pytest.mark.slow
def test_core_alone_runs_the_demo_on_python(core_only: Venv) -> None:
    r = core_only.uops("demo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[PYTHON]" in r.stdout and "[CPU]" not in r.stdout
    assert "all results agree with numpy" in r.stdout


# ---------------------------------------------------------------------------------------------
# (b) listing is lazy: metadata only, no plugin import
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_listing_imports_no_plugin(full: Venv) -> None:
    r = full.run_python(
        """
        import json, sys
        import uops
        before = sorted(m for m in sys.modules if m.startswith("uops_"))
        names = uops.Device.names()
        after = sorted(m for m in sys.modules if m.startswith("uops_"))
        fast = "importlib.metadata" not in sys.modules  # the fast path did not need it
        late = [m for m in ("pluggy", "typing", "inspect", "importlib") if m in sys.modules]  # a regular install
        from importlib.metadata import entry_points
        from uops.plugins.discovery import entry_points as _entry_points
        for group in ("uops.backends", "console_scripts"):  # the fast scan agrees with importlib.metadata
            assert sorted((e.name, e.value) for e in _entry_points(group)) == sorted(
                (e.name, e.value) for e in entry_points(group=group)), group
        print(json.dumps({"names": names, "before": before, "after": after, "fast": fast, "late": late,
                          "backends_python": "uops.backends.python" in sys.modules}))
        """
    )
    out = json.loads(r.stdout)
    assert out["fast"] is True and out["late"] == []
    assert out["names"] == ["BADPROBE", "CPU", "FAKE", "FAKEGPU", "FUTURE", "IMPFAIL", "PYTHON"]
    assert out["before"] == [] and out["after"] == []
    assert out["backends_python"] is False


@pytest.mark.slow
def test_first_use_imports_only_that_plugin(full: Venv) -> None:
    r = full.run_python(
        """
        import json, sys
        from uops import Device
        cpu = Device["cpu"]
        mods = sorted(m for m in sys.modules if m.startswith("uops_"))
        print(json.dumps({"name": cpu.name, "targets": list(cpu.targets), "mods": mods}))
        """
    )
    out = json.loads(r.stdout)
    assert out["name"] == "CPU" and len(out["targets"]) == 1
    assert "uops_cpu_clang" in out["mods"]
    assert not {"uops_fake", "uops_impfail", "uops_future", "uops_badprobe"} & set(out["mods"])
    # the renderer and the runtime load on first use of each, not with the plugin
    assert "uops_cpu_clang.runtime" not in out["mods"] and "uops_cpu_clang.renderer" not in out["mods"]


# ---------------------------------------------------------------------------------------------
# (c) quarantine: broken plugins are reported, the others keep working
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_devices_json_statuses(full: Venv) -> None:
    rows = full.devices_json()
    assert set(rows) == {"BADPROBE", "CPU", "FAKE", "FAKEGPU", "FUTURE", "IMPFAIL", "PYTHON"}

    imp = rows["IMPFAIL"]
    assert imp["status"] == "broken" and imp["distribution"] == "uops-impfail" and imp["version"] == "0.1.0"
    assert "vendor_sdk_that_is_not_installed" in imp["reason"] and "ModuleNotFoundError" in imp["reason"]
    assert "pip install -U uops-impfail" in imp["fix"] and "UOPS_DISABLE_PLUGINS=IMPFAIL" in imp["fix"]

    fut = rows["FUTURE"]
    assert fut["status"] == "incompatible" and fut["api_range"] == ">=9"
    assert "uops-future 0.3.0" in fut["reason"] and f"uops {uops.__version__}" in fut["reason"]
    assert "pip install -U uops-future" in fut["fix"] and 'pip install "uops>=9"' in fut["fix"]

    bad = rows["BADPROBE"]
    assert bad["status"] == "broken" and "probe_compile() raised OSError: driver exploded" in bad["reason"]

    fake = rows["FAKE"]
    assert fake["status"] == "ok" and fake["targets"] == ["fake1", "fake2"]
    assert fake["compile_ok"] is True and fake["runtime_ok"] is True and fake["api_range"] == ">=0.1"

    gpu = rows["FAKEGPU"]
    assert gpu["status"] == "unavailable" and gpu["compile_ok"] is True and gpu["runtime_ok"] is False
    assert "no FAKEGPU card found" in gpu["runtime_reason"]

    cpu = rows["CPU"]
    assert cpu["distribution"] == "uops-cpu-clang" and cpu["status"] in ("ok", "unavailable")
    if cpu["status"] == "unavailable":
        assert "clang" in cpu["reason"]


@pytest.mark.slow
def test_devices_table_exit_0_with_broken_plugins(full: Venv) -> None:
    r = full.uops("devices")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()[2:] if line and not line.startswith(" ")}
    assert "incompatible" in lines["FUTURE"] and "uops-future 0.3.0" in lines["FUTURE"]
    assert "broken" in lines["IMPFAIL"] and lines["FAKE"].rstrip().endswith("ok")
    assert "Traceback" not in r.stdout + r.stderr


@pytest.mark.slow
def test_other_backends_keep_working(full: Venv) -> None:
    r = full.run_python(
        """
        import json
        from uops import Device
        from uops.plugins import PluginError
        out = {}
        for name in ("IMPFAIL", "FUTURE", "BADPROBE"):
            try:
                Device[name]
            except PluginError as e:
                out[name] = str(e)
        fake = Device["fake"]
        t = fake.target("fake2")
        out["fake"] = [fake.renderer.target, fake.compiler.compile("x").decode(), t.renderer.target, t.compiler.arch,
                       fake.allocator, t.device, t.arch]
        gpu = Device["FAKEGPU"]
        out["gpu_compile"] = gpu.compiler.arch
        try:
            gpu.runtime
        except PluginError as e:
            out["gpu_runtime"] = str(e)
        print(json.dumps(out))
        """
    )
    out = json.loads(r.stdout)
    assert "uops-impfail 0.1.0" in out["IMPFAIL"] and "broken" in out["IMPFAIL"]
    assert "uops-future 0.3.0" in out["FUTURE"] and 'pip install "uops>=9"' in out["FUTURE"]
    assert "uops-badprobe 0.1.0" in out["BADPROBE"] and "driver exploded" in out["BADPROBE"]
    assert out["fake"] == ["fake1", "x", "fake2", "fake2", "fake-allocator", "FAKE", "fake2"]
    assert out["gpu_compile"] == "fake1"
    assert "FAKEGPU cannot run on this machine: no FAKEGPU card found" in out["gpu_runtime"]


@pytest.mark.slow
def test_default_picks_highest_priority_usable(full: Venv) -> None:
    rows = full.devices_json()
    ok = [r for r in rows.values() if r["status"] == "ok"]
    expected = min(ok, key=lambda r: (r["device"] == "PYTHON", -r["priority"], r["device"]))["device"]
    assert expected != "FAKEGPU"  # priority 99 but no runtime: never the default
    r = full.run_python("from uops import Device; print(Device.DEFAULT)")
    assert r.stdout.strip() == expected
    r = full.run_python("from uops import Device; print(Device.DEFAULT)", env={"UOPS_DEVICE": "fake"})
    assert r.stdout.strip() == "FAKE"


@pytest.mark.slow
@pytest.mark.parametrize("device", sorted(BAD_DEVICES))
def test_strict_mode_is_an_error(full: Venv, device: str) -> None:
    dist = BAD_DEVICES[device]
    others = [d for d in BAD_DEVICES if d != device] + ([] if _python_ok(full) else ["PYTHON"])
    env = {"UOPS_STRICT_PLUGINS": "1", "UOPS_DISABLE_PLUGINS": ",".join(others)}
    r = full.uops("devices", "--json", env=env)
    assert r.returncode != 0
    assert dist in r.stderr and "UOPS_STRICT_PLUGINS" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = full.run_python(f"from uops import Device; Device[{device!r}]", env=env, check=False)
    assert r.returncode != 0 and "PluginError" in r.stderr and dist in r.stderr
    # --debug shows the traceback
    r = full.uops("--debug", "devices", env=env)
    assert r.returncode != 0 and "Traceback" in r.stderr


@pytest.mark.slow
def test_strict_mode_passes_when_all_plugins_fit(full: Venv) -> None:
    disabled = list(BAD_DEVICES) + ([] if _python_ok(full) else ["PYTHON"])
    r = full.uops("devices", env={"UOPS_STRICT_PLUGINS": "1", "UOPS_DISABLE_PLUGINS": ",".join(disabled)})
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_disable_plugins_by_device_or_distribution(full: Venv) -> None:
    rows = full.devices_json(env={"UOPS_DISABLE_PLUGINS": "impfail, uops_future"})
    assert rows["IMPFAIL"]["status"] == "disabled" and rows["FUTURE"]["status"] == "disabled"
    assert rows["FAKE"]["status"] == "ok"
    r = full.run_python(
        """
        import sys
        from uops import Device
        from uops.plugins import PluginError
        print(Device.names())
        try:
            Device["IMPFAIL"]
        except PluginError as e:
            print(e)
        print("uops_impfail" in sys.modules)
        """,
        env={"UOPS_DISABLE_PLUGINS": "IMPFAIL,uops-future"},
    )
    names, message, imported = r.stdout.strip().splitlines()
    assert "IMPFAIL" not in names and "FUTURE" not in names and "FAKE" in names
    assert "disabled by UOPS_DISABLE_PLUGINS" in message
    assert imported == "False"


# ---------------------------------------------------------------------------------------------
# (d) in-process: register_backend, Device handles, DEFAULT
# ---------------------------------------------------------------------------------------------


class _Obj:
    def __init__(self, arch: str | None = None) -> None:
        self.arch = arch


def _backend(device: str, *, priority: int = 10, probe_compile=lambda: None, probe_runtime=lambda: None) -> Backend:
    return Backend(device, _Obj, _Obj, _Obj, probe_compile, probe_runtime, targets=("t0", "t1"), priority=priority)


@pytest.fixture
def registered():
    names: list[str] = []

    def add(backend: Backend, replace: bool = False) -> None:
        register_backend(backend, replace=replace)
        names.append(backend.device.upper())

    yield add
    for n in dict.fromkeys(names):
        if n in Device._registered:  # a test may have unregistered it itself
            unregister_backend(n)


def test_register_backend_in_process(registered) -> None:
    registered(_backend("testdev"))
    h = Device["TestDev"]
    assert h.name == "TESTDEV" and h is Device["testdev"] and "testdev" in Device and "TESTDEV" in Device.names()
    assert h.renderer.arch is None and h.compiler.arch is None and isinstance(h.runtime, _Obj)
    t = h.target("t1")
    assert (t.device, t.arch, t.renderer.arch, t.compiler.arch) == ("TESTDEV", "t1", "t1", "t1")
    assert h.target("t1") is t and h.target().renderer is h.renderer and h.target().compiler is h.compiler
    with pytest.raises(PluginError, match="already provided.*replace=True"):
        register_backend(_backend("TESTDEV"))
    registered(_backend("TESTDEV", probe_runtime=lambda: "no card"), replace=True)
    h2 = Device["TESTDEV"]
    assert h2 is not h and h2.runtime_reason == "no card"
    with pytest.raises(PluginError, match="TESTDEV cannot run on this machine: no card"):
        _ = h2.runtime
    row = next(s for s in Device.status() if s.device == "TESTDEV")
    assert row.status == "unavailable" and row.runtime_ok is False and row.compile_ok is True


def test_registered_backend_probe_raising_is_quarantined(registered) -> None:
    def boom() -> str | None:
        raise RuntimeError("toolchain probe crashed")

    registered(_backend("CRASHY", probe_compile=boom))
    with pytest.raises(
        PluginError, match="CRASHY.*broken.*probe_compile\\(\\) raised RuntimeError: toolchain probe crashed"
    ):
        Device["CRASHY"]


def test_register_rejects_non_backend() -> None:
    with pytest.raises(TypeError, match="takes a uops.plugins.Backend"):
        register_backend("CPU")  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="not added with register_backend"):
        unregister_backend("NEVER_REGISTERED")


def test_unknown_device_lists_known() -> None:
    with pytest.raises(PluginError, match="unknown device 'NOPE'; installed devices: .*PYTHON"):
        Device["NOPE"]


def test_default_prefers_priority_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Devices()
    reg.register(_backend("LOW", priority=1000))
    reg.register(_backend("HIGH", priority=2000))
    reg.register(_backend("NORUN", priority=3000, probe_runtime=lambda: "absent"))
    monkeypatch.delenv("UOPS_DEVICE", raising=False)
    monkeypatch.delenv("UOPS_STRICT_PLUGINS", raising=False)
    assert reg.DEFAULT == "HIGH"
    monkeypatch.setenv("UOPS_DEVICE", "low")
    assert reg.DEFAULT == "LOW"
    monkeypatch.setenv("UOPS_DEVICE", "nothing")
    with pytest.raises(PluginError, match="unknown device 'nothing'"):
        _ = reg.DEFAULT


def test_default_skips_the_compile_probe_of_a_device_that_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def compile_probe(device: str):
        return lambda: calls.append(device) or None

    reg = Devices()
    reg.register(_backend("NOGPU", priority=3000, probe_compile=compile_probe("NOGPU"), probe_runtime=lambda: "absent"))
    reg.register(_backend("HOST", priority=2000, probe_compile=compile_probe("HOST")))
    monkeypatch.delenv("UOPS_DEVICE", raising=False)
    monkeypatch.delenv("UOPS_STRICT_PLUGINS", raising=False)
    assert reg.DEFAULT == "HOST" and calls == ["HOST"]
    row = next(s for s in reg.status() if s.device == "NOGPU")  # the row is complete: the compile probe ran now
    assert calls == ["HOST", "NOGPU"]
    assert (row.status, row.compile_ok, row.runtime_ok) == ("unavailable", True, False)
    assert row.reason == "cannot run: absent"
    assert reg["NOGPU"].compile_reason is None and reg["NOGPU"].runtime_reason == "absent"
    assert calls == ["HOST", "NOGPU"]  # each probe runs once per record


def test_backend_is_an_immutable_value() -> None:
    import copy
    import pickle

    b = _backend("VAL", priority=7)
    assert b == _backend("VAL", priority=7) and hash(b) == hash(_backend("VAL", priority=7))
    assert b != _backend("VAL", priority=8) and b.targets == ("t0", "t1") and b.priority == 7
    assert copy.copy(b) == b and pickle.loads(pickle.dumps(Backend("P", str, str, object, str, str))).device == "P"
    assert repr(b).startswith("Backend(device='VAL', renderer=")
    with pytest.raises(AttributeError, match="Backend is immutable: cannot set 'priority'"):
        b.priority = 1  # type: ignore[misc]


def test_factory_error_names_the_backend(registered) -> None:
    def bad_runtime() -> object:
        raise OSError("libfake.so: cannot open shared object file")

    registered(Backend("BADRT", _Obj, _Obj, bad_runtime, lambda: None, lambda: None))  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="BADRT.*failed to create its runtime: OSError: libfake.so"):
        _ = Device["BADRT"].runtime


def test_cli_devices_in_process(registered, capsys: pytest.CaptureFixture[str]) -> None:
    from uops.cli import main

    registered(_backend("CLIDEV"))
    assert main(["devices", "--json"]) == 0
    rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)["backends"]}
    assert rows["CLIDEV"]["status"] == "ok" and rows["CLIDEV"]["targets"] == ["t0", "t1"]


# ---------------------------------------------------------------------------------------------
# version specifiers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec,version,expected",
    [
        (">=0.1,<0.2", "0.1.0", True),
        (">=0.1,<0.2", "0.1.7", True),
        (">=0.1,<0.2", "0.2.0", False),
        (">=0.1,<0.2", "0.0.9", False),
        ("<0.2", "0.2.0.dev1", False),  # a pre-release of an excluded version stays excluded
        ("<0.2", "0.1.9rc1", True),
        (">0.1", "0.1.post1", False),
        (">0.1", "0.1.1", True),
        ("<=0.1", "0.1.0", True),
        ("==0.1", "0.1.0", True),  # trailing zeros do not matter
        ("==0.1.*", "0.1.5", True),
        ("==0.1.*", "0.2.0", False),
        ("!=0.1.*", "0.1.3", False),
        ("!=0.1.3", "0.1.4", True),
        ("~=0.1", "0.9", True),
        ("~=0.1", "1.0", False),
        ("~=0.1.2", "0.1.9", True),
        ("~=0.1.2", "0.2.0", False),
        ("~=0.1.2", "0.1.1", False),
        (">=9", "0.1.0", False),
        ("", "0.1.0", True),
        ("==1.0+local", "1.0", True),
        (">=1.0a1", "1.0b2", True),
        (">=1.0", "1.0rc1", False),
        ("===0.1.0", "0.1.0", True),
        (">= 0.1 , < 0.2", "0.1.2", True),
    ],
)
def test_specifier_contains(spec: str, version: str, expected: bool) -> None:
    assert specifier_contains(spec, version) is expected


@pytest.mark.parametrize("spec", ["0.1", ">=", "~=1", "=>0.1", ">=0.1.*x", "==0.1a1.*"])
def test_specifier_errors(spec: str) -> None:
    with pytest.raises(SpecifierError):
        specifier_contains(spec, "0.1.0")


@pytest.mark.parametrize("group", ["uops.backends", "console_scripts", "pytest11"])
def test_fast_scan_agrees_with_importlib_metadata(group: str) -> None:
    from importlib.metadata import entry_points

    from uops.plugins.discovery import entry_points as _entry_points

    assert sorted((e.name, e.value) for e in _entry_points(group)) == sorted(
        (e.name, e.value) for e in entry_points(group=group)
    )


def test_zip_on_sys_path_falls_back_to_importlib_metadata(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    from uops.plugins.discovery import entry_points as _entry_points
    from uops.plugins.discovery import scan_sys_path as _scan_sys_path

    z = tmp_path / "plugins.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("uops_zipdev-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: uops-zipdev\nVersion: 1.0\n")
        f.writestr("uops_zipdev-1.0.dist-info/entry_points.txt", "[uops.backends]\nZIPDEV = uops_zipdev\n")
    monkeypatch.syspath_prepend(str(z))
    assert _scan_sys_path("uops.backends") is None
    eps = [e for e in _entry_points("uops.backends") if e.name == "ZIPDEV"]
    assert len(eps) == 1 and eps[0].value == "uops_zipdev" and eps[0].distribution().version == "1.0"


def test_uops_range_from_requires() -> None:
    from uops.plugins.versions import uops_range

    assert uops_range(["numpy>=1", "uops<0.2,>=0.1"]) == "<0.2,>=0.1"
    assert uops_range(["uops (>=0.1,<0.2)"]) == ">=0.1,<0.2"
    assert uops_range(['uops>=0.3; extra == "test"', "uops~=0.1"]) == "~=0.1"
    assert uops_range(["UOPS[x] >=0.1 ; python_version >= '3.11'"]) == ">=0.1"
    assert uops_range(["uops-extras>=1"]) is None
    assert uops_range(None) is None


# ---------------------------------------------------------------------------------------------
# in-process discovery from hand-made .dist-info directories on sys.path (cheap edge cases)
# ---------------------------------------------------------------------------------------------


def _fake_dist(site, dist: str, eps: dict[str, str], requires: str = "uops>=0.1", module_src: str | None = None):
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\nRequires-Dist: {requires}\n\n")
    (info / "entry_points.txt").write_text("[uops.backends]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()))
    if module_src is not None:
        mod = next(iter(eps.values()))
        (site / f"{mod}.py").write_text(module_src)


@pytest.fixture
def site(tmp_path, monkeypatch: pytest.MonkeyPatch):
    for var in ("UOPS_STRICT_PLUGINS", "UOPS_DISABLE_PLUGINS", "UOPS_DEVICE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_two_plugins_for_one_device_is_a_conflict(site) -> None:
    _fake_dist(site, "uops-dup-a", {"DUPDEV": "uops_dup_a"})
    _fake_dist(site, "uops-dup-b", {"DUPDEV": "uops_dup_b"})
    reg = Devices()
    assert "DUPDEV" in reg.names()
    dup = r"provides DUPDEV: uops-dup-. 1.0 \(module uops_dup_.\), uops-dup-. 1.0.*UOPS_DISABLE_PLUGINS=uops-dup-."
    with pytest.raises(PluginError, match=dup):
        reg["DUPDEV"]


def test_hook_for_the_wrong_device_is_broken(site) -> None:
    src = (
        "from uops.plugins import Backend, hookimpl\n"
        "@hookimpl\n"
        "def uops_backends():\n"
        "    return [Backend('OTHER', str, str, object, lambda: None, lambda: None)]\n"
    )
    _fake_dist(site, "uops-wrongdev", {"WRONGDEV": "uops_wrongdev_mod"}, module_src=src)
    reg = Devices()
    with pytest.raises(PluginError, match=r"uops-wrongdev 1.0.*names device WRONGDEV but .*\['OTHER'\]"):
        reg["wrongdev"]


def test_hook_named_by_specname_is_found(site) -> None:
    """pluggy's ``specname`` (the hook under another function name) is read by the registry's plain reader too."""
    src = (
        "from uops.plugins import Backend, hookimpl\n"
        "helper = staticmethod(len)\n"
        "def uops_backends():\n"
        "    raise AssertionError('an unmarked function of the hook name is not the hook')\n"
        "@hookimpl(specname='uops_backends')\n"
        "def my_backends():\n"
        "    return [Backend('SPECNAMED', str, str, object, lambda: None, lambda: None, targets=('s',))]\n"
    )
    _fake_dist(site, "uops-specnamed", {"SPECNAMED": "uops_specnamed_mod"}, module_src=src)
    reg = Devices()
    assert reg["SPECNAMED"].targets == ("s",)


def test_hookimpl_marks_as_pluggy_does() -> None:
    """`hookimpl` (no pluggy import) leaves what pluggy's own marker leaves, for every option."""
    import itertools

    import pluggy

    from uops.plugins import hookimpl

    theirs = pluggy.HookimplMarker("uops")
    flags = ("hookwrapper", "optionalhook", "tryfirst", "trylast", "wrapper")
    for values in itertools.product((False, True), repeat=len(flags)):
        for specname in (None, "uops_backends"):
            opts = dict(zip(flags, values), specname=specname)
            ours_f, theirs_f = hookimpl(**opts)(lambda: None), theirs(**opts)(lambda: None)
            assert ours_f.uops_impl == theirs_f.uops_impl and type(ours_f.uops_impl) is dict, opts

    def bare() -> None: ...

    assert hookimpl(bare) is bare and bare.uops_impl == theirs(lambda: None).uops_impl  # type: ignore[attr-defined]
    from uops.plugins.backend import BACKENDS_HOOK
    from uops.plugins.hooks import UopsHookSpec

    assert BACKENDS_HOOK in vars(UopsHookSpec)  # the name the registry's plain reader looks for is the spec's


def _returns(device: str) -> str:
    return f"    return [Backend({device!r}, str, str, object, none, none)]\n"


_HOOK_MODULES = {
    # the registry calls these itself
    "plain": "@hookimpl\ndef uops_backends():\n" + _returns("HKPLAIN"),
    "pluggy_marker": "import pluggy\n@pluggy.HookimplMarker('uops')\ndef uops_backends():\n" + _returns("HKPMARK"),
    "specname": "@hookimpl(specname='uops_backends')\ndef backends():\n" + _returns("HKSPEC"),
    # these need pluggy: it validates, orders, or reads what the plain reader does not
    "tryfirst": "@hookimpl(tryfirst=True)\ndef uops_backends():\n" + _returns("HKFIRST"),
    "two": (
        "@hookimpl(specname='uops_backends')\ndef b_one():\n"
        + _returns("HKTWO")
        + "@hookimpl(specname='uops_backends')\ndef a_two():\n    return []\n"
    ),  # fmt: skip
    "other_hook": (
        "@hookimpl\ndef uops_backends():\n"
        + _returns("HKOTHER")
        + "@hookimpl\ndef uops_something_else():\n    return 1\n"
    ),
    "static": "@hookimpl\ndef uops_backends():\n"
    + _returns("HKSTATIC")
    + "uops_more = staticmethod(hookimpl(lambda: []))\n",
    "argument": "@hookimpl\ndef uops_backends(device):\n    return []\n",
    "keyword_only": "@hookimpl\ndef uops_backends(*, device='X'):\n    return []\n",
    "not_a_dict": "def uops_backends():\n    return []\nuops_backends.uops_impl = 'not a dict'\n",
}
_PLAIN_MODULES = ("plain", "pluggy_marker", "specname")


def test_plain_hooks_are_the_ones_pluggy_registers(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the registry calls without pluggy is exactly what pluggy registers for the hook; every module the
    plain reader declines (it returns None) is one where pluggy's reading differs or validates something."""
    import importlib

    import pluggy

    from uops.plugins.hooks import HookManager
    from uops.plugins.registry import plain_backend_hooks

    monkeypatch.syspath_prepend(str(tmp_path))
    modules = []
    for key, body in _HOOK_MODULES.items():
        head = "from uops.plugins import Backend, hookimpl\nnone = lambda: None\n"
        (tmp_path / f"uops_hk_{key}.py").write_text(head + body)
        modules.append(importlib.import_module(f"uops_hk_{key}"))
    for name in ("uops_cpu_clang", "uops_cuda", "uops_amd", "uops_metal", "uops.backends.python"):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            continue
    declined = []
    for module in modules:
        plain = plain_backend_hooks(module)
        pm = HookManager()
        try:
            pm.register(module)
        except pluggy.PluginValidationError:
            assert plain is None, module.__name__
            declined.append(module.__name__)
            continue
        registered = [i.function for i in pm.hook.uops_backends.get_hookimpls()]
        if plain is None:
            declined.append(module.__name__)
        else:
            assert plain == registered and len(plain) == 1, module.__name__
    expected = {f"uops_hk_{k}" for k in _HOOK_MODULES if k not in _PLAIN_MODULES}
    assert set(declined) == expected, declined  # every module of this repo (and a plain one) is read without pluggy


@pytest.mark.parametrize(
    ("key", "device", "through_pluggy"),
    [("plain", "HKPLAIN", False), ("specname", "HKSPEC", False), ("tryfirst", "HKFIRST", True),
     ("two", "HKTWO", True), ("other_hook", "HKOTHER", True), ("static", "HKSTATIC", True)],
)  # fmt: skip
def test_a_hook_pluggy_must_read_still_loads(site, key: str, device: str, through_pluggy: bool) -> None:
    head = "from uops.plugins import Backend, hookimpl\nnone = lambda: None\n"
    _fake_dist(site, f"uops-hk2-{key}", {device: f"uops_hk2_{key}"}, module_src=head + _HOOK_MODULES[key])
    reg = Devices()
    assert reg[device].name == device
    assert (reg._pm is not None) == through_pluggy  # a plain hook is called without a plugin manager


def test_a_hook_pluggy_rejects_is_broken_with_pluggys_reason(site) -> None:
    head = "from uops.plugins import Backend, hookimpl\n"
    _fake_dist(site, "uops-hkarg", {"HKARG": "uops_hkarg_mod"}, module_src=head + _HOOK_MODULES["argument"])
    reg = Devices()
    with pytest.raises(PluginError, match=r"(?s)uops-hkarg.*PluginValidationError.*'device'.*hookspec"):
        reg["HKARG"]


def test_module_without_hook_is_broken(site) -> None:
    _fake_dist(site, "uops-nohook", {"NOHOOK": "uops_nohook_mod"}, module_src="def uops_backends():\n    return []\n")
    reg = Devices()
    with pytest.raises(PluginError, match="uops_nohook_mod implements no uops_backends\\(\\) hook.*hookimpl"):
        reg["NOHOOK"]


def test_unparsable_api_range_is_broken(site) -> None:
    _fake_dist(site, "uops-badspec", {"BADSPEC": "uops_badspec_mod"}, requires="uops =>0.1")
    reg = Devices()
    row = next(r for r in reg.status() if r.device == "BADSPEC")
    assert row.status == "broken" and "cannot be parsed" in (row.reason or "") and row.api_range == "=>0.1"


def test_strict_mode_raises_at_load(site, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(site, "uops-newer", {"NEWER": "uops_newer_mod"}, requires="uops>=5")
    monkeypatch.setenv("UOPS_STRICT_PLUGINS", "1")
    reg = Devices()
    assert "NEWER" in reg.names()  # listing stays metadata-only and never fails
    with pytest.raises(PluginError, match=r"uops-newer 1.0.*incompatible.*uops>=5.*UOPS_STRICT_PLUGINS"):
        reg["NEWER"]


def test_disabling_one_of_two_providers_resolves_the_conflict(site, monkeypatch: pytest.MonkeyPatch) -> None:
    src = (
        "from uops.plugins import Backend, hookimpl\n"
        "@hookimpl\n"
        "def uops_backends():\n"
        "    return [Backend('TWICE', str, str, object, lambda: None, lambda: None, targets=('b',))]\n"
    )
    _fake_dist(site, "uops-twice-a", {"TWICE": "uops_twice_a"})
    _fake_dist(site, "uops-twice-b", {"TWICE": "uops_twice_b"}, module_src=src)
    monkeypatch.setenv("UOPS_DISABLE_PLUGINS", "uops-twice-a")
    reg = Devices()
    assert reg["TWICE"].targets == ("b",)


def test_register_and_unregister_leave_other_devices_alone(registered) -> None:
    before = Device["PYTHON"] if "PYTHON" in Device.names() else None
    registered(_backend("SCRATCH"))
    unregister_backend("SCRATCH")
    assert "SCRATCH" not in Device.names()
    if before is not None:
        assert Device["PYTHON"] is before  # handles (and their runtimes) survive


@pytest.mark.parametrize("plugin", ["uops_cpu_clang", "uops_cuda", "uops_amd", "uops_metal"])
def test_plugin_renderer_stays_below_the_front_end(plugin: str) -> None:
    """A renderer sits under the front end: loading one must not drag in the Tensor layer (a layering check)."""
    pytest.importorskip(plugin, reason=f"{plugin} is not installed")
    code = f"import sys, {plugin}.renderer; print(sorted(m for m in sys.modules if m.startswith('uops.frontend')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.replace("'", '"')) == []


@pytest.mark.parametrize(
    "declared,fits,words",
    [
        (None, True, ""),  # built for uops 0.1: plugin API 1.0, an older minor
        ((1, 0), True, ""),
        (uops.plugin.PLUGIN_API, True, ""),
        ((0, 9), False, "built for plugin API 0.x, this core speaks {core}: upgrade uops-api"),
        ((2, 0), False, "built for plugin API 2.0, this core speaks {core}: upgrade uops"),
        ((1, 99), False, "built for plugin API 1.99, this core speaks {core}: upgrade uops"),
        (("1", "0"), False, "not a (major, minor) pair of ints"),
    ],
)
def test_the_plugin_api_a_backend_declares_is_checked_at_discovery(site, declared, fits: bool, words: str) -> None:
    src = (
        "from uops.plugin import Backend, hookimpl\n"
        "@hookimpl\n"
        "def uops_backends():\n"
        f"    return [Backend('APIDEV', str, str, object, lambda: None, lambda: None, plugin_api={declared!r})]\n"
    )
    module = f"uops_api_{abs(hash(repr(declared)))}"  # one module per case: imports are cached
    _fake_dist(site, "uops-api", {"APIDEV": module}, module_src=src)
    reg = Devices()
    (row,) = [r for r in reg.status() if r.device == "APIDEV"]
    if fits:
        assert row.status == "ok", row
        return
    core = ".".join(map(str, uops.plugin.PLUGIN_API))
    assert row.status == "incompatible" and words.format(core=core) in (row.reason or ""), row
    with pytest.raises(PluginError, match="incompatible"):
        reg["APIDEV"]


_ORDERED = """
from uops.plugins import Backend, hookimpl
none = lambda: None

@hookimpl(specname="uops_backends")
def plain():
    return [Backend("{device}", str, str, object, none, none, targets=("plain",))]

{extra}
"""
_TRYFIRST = """@hookimpl(tryfirst=True, specname="uops_backends")
def first():
    return [Backend("{device}", str, str, object, none, none, targets=("tryfirst",))]
"""
_WRAPPER = """@hookimpl(wrapper=True, specname="uops_backends")
def wrap():
    inner = yield
    return [[Backend("{device}", str, str, object, none, none, targets=("wrapped", *b.targets)) for b in out]
            for out in inner]
"""


@pytest.mark.parametrize(
    ("key", "extra", "targets"),
    [("tryfirst", _TRYFIRST, ("tryfirst",)), ("wrapper", _WRAPPER, ("wrapped", "plain"))],
)
def test_hooks_are_called_with_pluggys_semantics(site, key: str, extra: str, targets: tuple[str, ...]) -> None:
    """A ``tryfirst`` implementation runs before the others (its backend wins); a ``wrapper=True`` one wraps
    them and what it returns is the result, as the guide promises: the registry calls such hooks through pluggy."""
    device = f"HKSEM{key.upper()}"
    src = _ORDERED.format(device=device, extra=extra.format(device=device))
    _fake_dist(site, f"uops-hksem-{key}", {device: f"uops_hksem_{key}"}, module_src=src)
    reg = Devices()
    (row,) = [r for r in reg.status() if r.device == device]
    assert row.status == "ok", row
    assert reg[device].targets == targets


def test_a_backend_whose_compiler_needs_its_runtime_says_it_cannot_cross_compile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OpenCL compiles inside the driver: where the runtime cannot run, `uops devices` shows the device cannot
    compile either, and `uops compile --device` says why instead of failing inside the compiler."""
    from uops.backends.python.renderer import PythonRenderer
    from uops.cli import main

    no_driver = "no OpenCL platform found (install an ICD such as PoCL)"
    register_backend(
        Backend("JITDEV", PythonRenderer, str, object, lambda: None, lambda: no_driver, compile_needs_runtime=True)
    )
    try:
        (row,) = [r for r in Device.status() if r.device == "JITDEV"]
        assert row.compile_needs_runtime is True and row.compile_ok is False and row.runtime_ok is False
        assert "cannot cross-compile" in (row.compile_reason or "") and no_driver in (row.compile_reason or "")
        assert main(["devices"]) == 0
        assert "no (on the device)" in capsys.readouterr().out
        assert main(["compile", "--device", "JITDEV", "a+b"]) != 0
        err = capsys.readouterr().err
        assert "cannot cross-compile" in err and no_driver in err, err
    finally:
        unregister_backend("JITDEV")
