"""The deprecated alias modules of uops 0.1's paths (``uops.device``, ``uops.emulate`` ...): what they do.

Each alias module is two lines that hand their ``__getattr__`` to `alias_getattr`: a name is looked up in
the module that holds it now (`uops.plugins.api.MOVED_MODULES`), the first lookup warns once with a
DeprecationWarning naming the replacement, and a removed name raises `RemovedNameError` saying what
replaces it (an ImportError, raised where it is imported, not at a kernel's launch).
"""

from __future__ import annotations

import warnings

from uops.plugins.api import MOVED_MODULES, PUBLIC_NAMES, REMOVED, SHIMS, RemovedNameError, removed_message

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["alias_getattr", "replacement"]

_warned: set[str] = set()


def replacement(module: str, name: str) -> str:
    """Where ``module.name`` of uops 0.1 is imported from now, as an import statement (or the adapter's advice)."""
    if (module, name) in SHIMS:
        return SHIMS[(module, name)]
    if name in PUBLIC_NAMES:
        return f"from uops.plugin import {name}"
    return f"from {MOVED_MODULES[module]} import {name}"


def _shim(module: str, name: str) -> object:
    if name == "graph_substitute":
        from uops.ir.uop import UOp

        def graph_substitute(sink: UOp, mapping: dict[UOp, UOp]) -> UOp:
            return sink.substitute(mapping)

        return graph_substitute
    from uops.ir.alu import eval_scalar

    def exec_alu(op: object, dtype: object, vals: tuple[object, ...]) -> object:
        return eval_scalar(op, dtype, vals)  # type: ignore[arg-type]

    return exec_alu


def alias_getattr(module: str) -> Callable[[str], object]:
    """The ``__getattr__`` of the alias module ``module``."""

    def __getattr__(name: str) -> object:  # noqa: N807 - a module's __getattr__
        if name.startswith("__"):
            raise AttributeError(name)
        if (module, name) in REMOVED:
            raise RemovedNameError(removed_message(module, name), name=name)
        if (module, name) in SHIMS:
            value = _shim(module, name)
        else:
            target = __import__(MOVED_MODULES[module], fromlist=(name,))
            if not hasattr(target, name):
                raise AttributeError(f"module {module!r} (a deprecated alias of {target.__name__}) has no {name!r}")
            value = getattr(target, name)
        if module not in _warned:
            _warned.add(module)
            warnings.warn(
                f"{module} is deprecated since uops 0.2.0 (plugin API 1.1) and goes with plugin API 2.0: "
                f"use `{replacement(module, name)}` instead of `from {module} import {name}`",
                DeprecationWarning,
                stacklevel=2,
            )
        return value

    return __getattr__
