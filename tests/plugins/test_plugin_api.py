"""`uops.plugin`, the one module plugins import: every name resolves, the errors carry what failed, the
deprecated paths of uops 0.1 warn once and hand out the current objects, and a removed name says what
replaces it."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import pytest

import uops
import uops.plugin
from uops.errors import UopsError


def test_every_public_name_resolves() -> None:
    for name in uops.plugin.__all__:
        assert getattr(uops.plugin, name) is not None, name
    assert uops.plugin.PLUGIN_API == (1, 1) and isinstance(uops.plugin.PLUGIN_API[0], int)
    with pytest.raises(AttributeError, match="the plugin API is its __all__"):
        _ = uops.plugin.get_program  # type: ignore[attr-defined]


def test_the_eager_names_are_bound_at_import_and_the_lazy_ones_come_from_their_module() -> None:
    from uops.plugins.api import PUBLIC_EAGER, PUBLIC_LAZY, PUBLIC_NAMES

    assert set(uops.plugin.__all__) == PUBLIC_NAMES and len(uops.plugin.__all__) == len(PUBLIC_NAMES)

    code = "import uops.plugin as p; print(sorted(n for n in vars(p) if not n.startswith('_')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    bound = set(eval(out))  # noqa: S307 - our own printed list
    assert set(PUBLIC_EAGER) <= bound and not bound & set(PUBLIC_LAZY)
    for name, module in PUBLIC_LAZY.items():
        assert getattr(uops.plugin, name) is getattr(__import__(module, fromlist=(name,)), name), name


def test_importing_what_a_plugins_init_needs_loads_no_ir() -> None:
    code = (
        "import sys; from uops.plugin import Backend, hookimpl, which; "
        "print(sorted(m for m in sys.modules if m.startswith('uops')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)  # noqa: S307 - our own printed list
    assert not [m for m in loaded if m.startswith(("uops.ir", "uops.renderer", "uops.runtime", "uops.compiler"))]


def test_device_errors_name_the_device_the_call_and_the_code() -> None:
    e = uops.plugin.OutOfMemoryError("hipMalloc failed: out of memory", device="AMD", call="hipMalloc", code=2)
    assert isinstance(e, UopsError) and isinstance(e, RuntimeError) and isinstance(e, MemoryError)
    assert isinstance(e, uops.plugin.DeviceError)
    assert str(e) == "hipMalloc failed: out of memory (device AMD, call hipMalloc, driver code 2)"
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and (back.device, back.call, back.code) == ("AMD", "hipMalloc", 2)
    assert str(uops.plugin.LaunchError("grid too large")) == "grid too large"
    for err in (uops.plugin.ProgramLoadError, uops.plugin.BufferFreedError, uops.plugin.ElfError,
                uops.plugin.SymbolNotDefinedError, uops.plugin.PluginError):  # fmt: skip
        assert issubclass(err, UopsError), err


def test_uop_simplify_is_a_method_again() -> None:
    from uops.ir.symbolic import simplify

    x = uops.UOp.variable("x", 0, 10)
    expr = (x * 1 + 0) * 2 + x * 3
    assert expr.simplify() is simplify(expr) and expr.simplify() is not expr


def test_the_old_paths_warn_once_and_a_removed_name_says_what_replaces_it() -> None:
    code = textwrap.dedent(
        """
        import warnings
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            from uops.uop import UOp
            from uops.ops import Ops
            from uops.uop import UOp as again
        import uops, uops.plugin
        assert UOp is uops.UOp and Ops is uops.plugin.Ops and again is UOp
        print([str(w.message) for w in seen])
        try:
            from uops.emulate import kernel_names
        except ImportError as e:
            print(type(e).__name__, e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    first, second = out.strip().splitlines()
    messages = eval(first)  # noqa: S307 - our own printed list
    assert len(messages) == 2, messages  # once per module
    assert "use `from uops.plugin import UOp`" in messages[0] and "uops.ops is deprecated" in messages[1]
    assert second.startswith("RemovedNameError uops.emulate.kernel_names was removed") and "Dialect" in second
