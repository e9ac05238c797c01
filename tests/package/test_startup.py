"""Start-up: what ``import uops`` and choosing a device import, and the lazy public names behaving as eager ones.

The import sets are checked in a fresh interpreter (this one has imported everything). What the
design guarantees, and so what is asserted:

* ``import uops`` loads ``uops``, ``uops.dtypes`` and ``uops.version`` only: no IR, no plugins
  layer, no pluggy, and none of ``typing``, ``inspect``, ``dataclasses`` (standard-library modules
  that cost milliseconds each).
* ``uops.Device.names()`` adds the plugins layer alone: no pluggy, ``typing`` or ``inspect`` and no
  plugin module.
* ``uops.Device.DEFAULT`` and ``uops.Device["CPU"]`` add the plugins layer and the plugins' hook
  modules, and nothing of the core beyond ``uops.plugins``: no IR, renderer, compiler, runtime,
  codegen, front end or built-in backend, no pluggy (the registry calls a plain hook itself), no
  numpy or vendor bindings, no plugin renderer/compiler/runtime module, and none of the standard
  library's ``typing``, ``inspect``, ``dataclasses``, ``pathlib``, ``importlib.util``/``importlib.metadata``,
  ``email``, ``json``, ``shutil`` or ``subprocess``.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import uops
from uops.dtypes import AddrSpace, DType, PtrDType, dtypes

_STAGES = """
    import json, sys
    seen = set(sys.modules)
    def new():
        global seen
        added = sorted(set(sys.modules) - seen)
        seen = set(sys.modules)
        return added
    out = {{}}
    import uops
    out["import uops"] = new()
    {action}
    out["device"] = new()
    print(json.dumps(out))
"""

_IMPORT_UOPS_ONLY = {"uops", "uops._lazy", "uops.dtypes", "uops.errors", "uops.version"}
_NEVER_AT_START = ("typing", "inspect", "dataclasses", "pluggy", "numpy")
#: modules choosing a device does without
_NOT_FOR_A_DEVICE = (
    "pluggy", "typing", "inspect", "dataclasses", "pathlib", "importlib.util", "importlib.metadata", "email",
    "json", "shutil", "subprocess",
)  # fmt: skip


def _stages(action: str) -> dict[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UOPS_")}
    code = textwrap.dedent(_STAGES.format(action=action))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out: dict[str, list[str]] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def _too_much_for_a_device(added: list[str]) -> list[str]:
    bad = []
    for name in added:
        top = name.split(".")[0]
        if top == "uops" and not (name in ("uops.plugin", "uops.plugins") or name.startswith("uops.plugins.")):
            bad.append(f"{name} (a core module beyond the plugins layer)")
        elif top.startswith("uops_") and "." in name:
            bad.append(f"{name} (a plugin's renderer/compiler/runtime: imported when the device is first used)")
        elif top in ("numpy", "cuda"):
            bad.append(f"{name} (numpy and vendor bindings load in a plugin's factories)")
        elif any(name == m or name.startswith(m + ".") for m in _NOT_FOR_A_DEVICE):
            bad.append(f"{name} (a module the plugins layer does without)")
    return bad


@pytest.mark.parametrize("action", ["uops.Device.DEFAULT", "uops.Device['CPU']"], ids=["default", "cpu"])
def test_import_uops_then_a_device_imports_only_the_plugins_layer(action: str) -> None:
    out = _stages(action)
    assert set(out["import uops"]) - set(sys.stdlib_module_names) <= _IMPORT_UOPS_ONLY, out["import uops"]
    assert _IMPORT_UOPS_ONLY <= set(out["import uops"])
    assert not [m for m in out["import uops"] if m.split(".")[0] in _NEVER_AT_START], out["import uops"]
    bad = _too_much_for_a_device(out["device"])
    assert not bad, f"{action} imported: " + "; ".join(bad)
    assert {"uops.plugins.registry", "uops_cpu_clang"} <= set(out["device"])  # the check looked at the right set


def test_listing_devices_imports_no_pluggy() -> None:
    added = _stages("uops.Device.names()")["device"]
    assert "uops.plugins.registry" in added, added  # the check looked at the right set
    late = [m for m in added if m.split(".")[0] in ("pluggy", "typing", "inspect") or m.startswith("uops_")]
    assert not late, f"Device.names() imported {late}"
    assert not _too_much_for_a_device(added)


def test_lazy_names_resolve_like_eager_imports() -> None:
    from uops.frontend.tensor import Tensor
    from uops.ir.ops import Ops
    from uops.ir.uop import UOp
    from uops.plugins import Device

    assert (uops.Tensor, uops.Ops, uops.UOp, uops.Device) == (Tensor, Ops, UOp, Device)
    for name in uops.__all__:
        assert getattr(uops, name) is not None, name
    assert set(uops.__all__) <= set(dir(uops))
    assert uops.dtypes is dtypes  # the class, not the submodule of the same name
    from uops import plugins
    from uops.plugins.hooks import UopsHookSpec, hookimpl

    assert (
        plugins.hookimpl is hookimpl
        and plugins.UopsHookSpec is UopsHookSpec
        and set(plugins.__all__) <= set(dir(plugins))
    )
    assert all(getattr(plugins, name) is not None for name in plugins.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Tensr'"):
        uops.Tensr  # noqa: B018


def test_dtype_is_an_immutable_value() -> None:
    """DType is a hand-written class (no dataclasses at start-up) with a frozen dataclass's behaviour."""
    v4 = dtypes.float32.vec(4)
    assert v4 == DType(11, 4, "float", "f", "f", 4) and hash(v4) == hash(DType(11, 4, "float", "f", "f", 4))
    assert v4 != dtypes.float32 and dtypes.float32 != dtypes.float32.ptr()  # a pointer is not its base
    p = dtypes.float16.ptr(16, AddrSpace.LOCAL)
    assert (p.base, p.size, p.addrspace, p.count) == (dtypes.float16, 16, AddrSpace.LOCAL, 1)
    assert p == PtrDType(9, 2, "half", "e", "f", 1, dtypes.float16, AddrSpace.LOCAL, 16) != dtypes.float16.ptr(16)
    for dt in (v4, p, dtypes.bfloat16):
        assert pickle.loads(pickle.dumps(dt)) == dt and copy.deepcopy(dt) == dt
        assert type(pickle.loads(pickle.dumps(dt))) is type(dt)
    with pytest.raises(AttributeError, match="immutable"):
        dtypes.int32.itemsize = 8  # type: ignore[misc]
    assert repr(p) == "dtypes.half.ptr(16, LOCAL)" and repr(v4) == "dtypes.float.vec(4)"
