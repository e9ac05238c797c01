"""The plugin contract on ``device``: its module imports nothing heavy (pluggy included), pluggy reads its hook
as the registry does, its probes return a reason instead of raising, listing devices does not import it, and
its errors say who failed and why (a CompileError names the compiler; bytes that do not load are a
ProgramLoadError naming the plugin and kernel).

Import checks run in a fresh interpreter: this one has imported everything already.
"""

from __future__ import annotations

import json

import pytest

from uops import AxisType, UOp
from uops.codegen.program import get_program
from uops.compiler import CompileError
from uops.plugins import Device
from uops.runtime import ProgramLoadError
from uops.testing.kit.helpers import glob, require_api, run_child

#: standard-library modules that cost milliseconds to import; a plugin module needs none of them
#: before its device is used (probes look at files: uops.plugins.probes)
HEAVY_STDLIB = (
    "asyncio", "bz2", "ctypes", "email", "importlib.metadata", "lzma", "multiprocessing", "platform",
    "shutil", "subprocess", "tempfile", "threading", "typing_extensions", "zipfile",
)  # fmt: skip


def plugin_module(device: str) -> str:
    """The module the device's entry point names (uops.backends.python for the built-in PYTHON)."""
    (row,) = [r for r in Device.status() if r.device == device]
    return row.module


_IMPORT_PLUGIN = """
    import importlib, json, sys
    import uops.plugins
    before = set(sys.modules)
    module = importlib.import_module({module!r})
    backends = [b for b in module.uops_backends() if b.device == {device!r}]
    results = []
    for b in backends:
        for probe in (b.probe_compile, b.probe_runtime):
            try:
                r = probe()
                results.append(r if r is None or isinstance(r, str) else f"<returned {{type(r).__name__}}>")
            except Exception as e:
                results.append(f"<raised {{type(e).__name__}}: {{e}}>")
    print(json.dumps({{"new": sorted(set(sys.modules) - before), "backends": len(backends), "probes": results}}))
"""


def _import_plugin(device: str, env: dict[str, str] | None = None) -> dict:
    code = _IMPORT_PLUGIN.format(module=plugin_module(device), device=device)
    r = run_child(code, env=env)
    assert r.returncode == 0, f"importing the plugin of {device} and calling its hook failed:\n{r.stderr[-3000:]}"
    out: dict = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def heavy_imports(new: list[str], module: str) -> list[str]:
    """What importing ``module`` (plus its hook and probes) pulled in that a plugin's first import must not."""
    import sys

    own = {module, *(module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1))}
    bad = []
    for name in new:
        top = name.split(".")[0]
        if name in own or name == "uops.plugin" or name.startswith("uops.plugins"):
            continue
        if name.startswith(module + "."):
            bad.append(f"{name} (its renderer/compiler/runtime modules load when the device is first used)")
        elif top == "uops":
            bad.append(f"{name} (a core module beyond uops.plugin and the plugins layer)")
        elif top == "pluggy":
            bad.append(f"{name} (choosing a device does without pluggy: mark the hook with uops.plugins.hookimpl)")
        elif top not in sys.stdlib_module_names:
            bad.append(f"{name} (a third-party package: vendor bindings and numpy load in the factories)")
        elif any(name == h or name.startswith(h + ".") for h in HEAVY_STDLIB):
            bad.append(f"{name} (a costly standard-library module)")
    return bad


def test_plugin_module_imports_nothing_heavy(device: str) -> None:
    require_api(device, (1, 1), "the start-up budget of a plugin's module")
    module = plugin_module(device)
    out = _import_plugin(device)
    assert out["backends"] == 1, f"{module}.uops_backends() returned {out['backends']} backends for {device}"
    bad = heavy_imports(out["new"], module)
    assert not bad, f"importing {module} and calling its hook and probes imported: " + "; ".join(bad)


def test_pluggy_reads_the_hook_the_registry_calls(device: str) -> None:
    """The registry calls a module's one plain ``uops_backends`` itself, so choosing a device imports no pluggy;
    pluggy, registering the same module against the hook spec, must find that same function and, through the
    hook, this device."""
    import importlib

    from uops.plugins.hooks import HookManager
    from uops.plugins.registry import plain_backend_hooks

    module = importlib.import_module(plugin_module(device))
    plain = plain_backend_hooks(module)
    assert plain, (
        f"{module.__name__} has no plain hook for the registry to call (it then registers the module through "
        "pluggy, 25 ms more at every start): mark one function uops_backends() that takes no arguments with "
        "@uops.plugins.hookimpl and no options"
    )
    pm = HookManager()
    pm.register(module)  # checks the implementation against UopsHookSpec
    pm.check_pending()
    assert [i.function for i in pm.hook.uops_backends.get_hookimpls()] == plain
    assert device in [b.device for backends in pm.hook.uops_backends() for b in backends]


def test_probes_return_a_reason_instead_of_raising(device: str, tmp_path) -> None:
    """Here (the device works) both probes return None; on a machine with nothing installed each
    returns a sentence, never raises."""
    here = _import_plugin(device)
    assert here["probes"] == [None, None], f"{device} can run here, yet its probes say {here['probes']}"
    hostile = {
        "PATH": str(tmp_path / "no-bin"),
        "TMPDIR": str(tmp_path / "missing-tmp"),
        "HOME": str(tmp_path / "no-home"),
        "LD_LIBRARY_PATH": str(tmp_path / "no-lib"),
    }
    bare = _import_plugin(device, env=hostile)
    for which, result in zip(("probe_compile", "probe_runtime"), bare["probes"]):
        assert result is None or (result.strip() and not result.startswith("<")), (
            f"{device}'s {which}() on a bare machine: {result} (a probe returns None or a reason; it never raises)"
        )


def test_listing_devices_imports_no_plugin(device: str) -> None:
    module = plugin_module(device)
    r = run_child(
        f"""
        import json, sys
        from uops.plugins import Device
        names = Device.names()
        print(json.dumps([names, {module!r} in sys.modules, "numpy" in sys.modules]))
        """
    )
    assert r.returncode == 0, r.stderr[-3000:]
    names, imported, numpy = json.loads(r.stdout.strip().splitlines()[-1])
    assert device in names
    assert not imported, f"Device.names() imported {module}: listing must read entry points only"
    assert not numpy, "Device.names() imported numpy"


def test_errors_name_the_plugin_the_compiler_and_the_kernel(device: str) -> None:
    require_api(device, (1, 1), "ProgramLoadError from Runtime.load")
    d = Device[device]
    with pytest.raises(CompileError) as e:
        d.compiler.compile("this is not a kernel {{{ \n")
    assert e.value.compiler, f"{type(d.compiler).__name__} raised CompileError without naming the compiler"
    assert str(e.value).startswith(f"{e.value.compiler} failed"), str(e.value)[:300]
    r = UOp.range(7, 0, AxisType.GLOBAL)
    spec = get_program(UOp.sink(glob(0).index(r).store(glob(1).index(r).load() * 2.0)), d.renderer, d.compiler)
    with pytest.raises(ProgramLoadError, match="no_such_kernel") as missing:
        d.runtime.load("no_such_kernel", spec.lib)
    assert missing.value.plugin and missing.value.kernel == "no_such_kernel", str(missing.value)
    with pytest.raises(ProgramLoadError, match=spec.name):
        d.runtime.load(spec.name, spec.lib[: len(spec.lib) // 3])


def test_the_device_is_described_by_its_status_row(device: str) -> None:
    (row,) = [r for r in Device.status() if r.device == device]
    assert row.status == "ok" and row.compile_ok and row.runtime_ok, row
    assert row.targets, f"{device} lists no compile targets (Backend.targets)"
    assert row.distribution or row.builtin, f"{device}: no distribution owns {row.module}"


def test_plugin_imports_only_the_plugin_api(device: str) -> None:
    """Every ``uops`` import in the plugin's package is from `uops.plugin` (read from the source: modules that
    load only when the device is used are checked too). A plugin built for plugin API 1.0 may keep the paths
    of uops 0.1 during their deprecation window: they are reported as warnings, not failed."""
    import warnings

    from uops.plugins.api import LEGACY_API, PUBLIC_MODULE
    from uops.plugins.imports import package_files, plugin_api_problems

    module = plugin_module(device)
    if module.startswith("uops."):
        pytest.skip(f"{device} is built into the core ({module}), which is not held to the plugin API")
    files = package_files(module)
    assert files, f"the source of {module} was not found (the kit reads it to check its imports)"
    declared = Device[device].backend.plugin_api
    errors, deprecated = plugin_api_problems(files, legacy=(declared or LEGACY_API) == LEGACY_API)
    for sentence in deprecated:
        warnings.warn(f"{device}: {sentence}", DeprecationWarning, stacklevel=1)
    assert not errors, f"{module} imports core modules beyond {PUBLIC_MODULE}:\n  " + "\n  ".join(errors)
