"""Every public error uops defines sits under ``uops.UopsError`` and keeps its builtin base."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import uops
from uops import UopsError

# the plugin packages are walked too: their errors are uops' errors for a user
PACKAGES = ["uops", "uops_cpu_clang", "uops_cuda", "uops_amd", "uops_metal"]


def _public_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for top in PACKAGES:
        try:
            pkg = importlib.import_module(top)
        except ImportError:
            continue  # a plugin that is not installed
        names = [top] + [m.name for m in pkgutil.walk_packages(pkg.__path__, f"{top}.")]
        for name in names:
            if any(part.startswith("_") for part in name.split(".")):
                continue
            module = importlib.import_module(name)
            for attr, obj in vars(module).items():
                if (
                    isinstance(obj, type)
                    and issubclass(obj, BaseException)
                    and obj.__module__ == name
                    and not attr.startswith("_")
                ):
                    found[f"{name}.{attr}"] = obj
    return found


def test_every_public_error_is_a_uops_error() -> None:
    errors = _public_errors()
    assert "uops.codegen.lowerer.LoweringError" in errors and len(errors) >= 15
    outside = sorted(n for n, cls in errors.items() if not issubclass(cls, UopsError))
    assert not outside, f"not under uops.UopsError: {outside}"


@pytest.mark.parametrize(
    "name, builtin",
    [
        ("uops.codegen.lowerer.LoweringError", ValueError),
        ("uops.renderer.DTypeNotSupportedError", TypeError),
        ("uops.compiler.CompileError", RuntimeError),
        ("uops.frontend.tensor.args.AxisError", IndexError),
    ],
)
def test_errors_keep_their_builtin_base(name: str, builtin: type[BaseException]) -> None:
    cls = _public_errors()[name]
    assert issubclass(cls, builtin) and issubclass(cls, UopsError)
    assert uops.UopsError is UopsError
