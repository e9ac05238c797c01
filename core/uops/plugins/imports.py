"""What a plugin's modules import from the core, read from their source (``ast``), without running them.

Why static: a plugin's ``renderer.py`` / ``compiler.py`` / ``runtime.py`` load only when its device is
first used, so an import of a private core module (which the core may move in any release) or of a
removed name would otherwise surface at the first kernel. The conformance kit fails a plugin built for
this API on any ``uops.*`` import other than `uops.plugin`; discovery checks a plugin built for an older
API for names this core removed (`uops.plugins.api.REMOVED`), before any of its factories runs.
"""

from __future__ import annotations

import ast
import os

from uops.plugins.api import LEGACY_PUBLIC, MOVED_MODULES, PUBLIC_MODULE, PUBLIC_NAMES, REMOVED, removed_message

__all__ = ["CoreImport", "core_imports", "package_files", "plugin_api_problems", "removed_names_used"]


class CoreImport:
    """One name (or a whole module, ``name=None``) a plugin file imports from ``uops``."""

    __slots__ = ("file", "line", "module", "name")

    def __init__(self, file: str, line: int, module: str, name: str | None) -> None:
        self.file, self.line, self.module, self.name = file, line, module, name

    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def spelled(self) -> str:
        return f"import {self.module}" if self.name is None else f"from {self.module} import {self.name}"


def package_files(module: str) -> list[str]:
    """The source files of the top-level package (or module) ``module`` names (imported or not: not importing it)."""
    import sys

    top = module.partition(".")[0]
    loaded = sys.modules.get(top)
    if loaded is not None:
        locations, origin = getattr(loaded, "__path__", None), getattr(loaded, "__file__", None)
    else:
        from importlib.util import find_spec

        spec = find_spec(top)
        if spec is None:
            return []
        locations, origin = spec.submodule_search_locations, spec.origin
    if locations:
        files = []
        for root in locations:
            for d, dirs, names in os.walk(root):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
        return files
    return [origin] if origin and origin.endswith(".py") else []


def core_imports(path: str) -> list[CoreImport]:
    """Every import of ``uops`` or a ``uops.*`` module in one file (type-checking-only imports included)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [CoreImport(path, node.lineno, a.name, None) for a in node.names if _is_core(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_core(node.module):
            found += [CoreImport(path, node.lineno, node.module, a.name) for a in node.names]
    return found


def _is_core(module: str) -> bool:
    return module == "uops" or module.startswith("uops.")


def removed_names_used(files: list[str]) -> list[str]:
    """One sentence per import of a name this core removed (file, line, what replaces it)."""
    out = []
    for path in files:
        for imp in core_imports(path):
            if imp.name is not None and (imp.module, imp.name) in REMOVED:
                out.append(f"{imp.where()}: {removed_message(imp.module, imp.name)}")
    return out


def plugin_api_problems(files: list[str], legacy: bool) -> tuple[list[str], list[str]]:
    """(errors, deprecations) of the core imports in ``files``, one sentence each naming what to import instead.

    ``legacy``: the plugin was built for plugin API 1.0 (uops 0.1), whose paths (`MOVED_MODULES`,
    `LEGACY_PUBLIC`) it may keep using during the deprecation window; they are reported, not failed.
    """
    from uops.plugins.aliases import replacement

    public = PUBLIC_NAMES
    errors, deprecated = [], []
    for path in files:
        for imp in core_imports(path):
            if imp.module == PUBLIC_MODULE:
                if imp.name is not None and imp.name != "*" and imp.name not in public:
                    errors.append(f"{imp.where()}: uops.plugin has no {imp.name!r} (its names are uops.plugin.__all__)")
                continue
            if imp.module == "uops" and imp.name is None:
                continue  # the package itself (uops.__version__)
            if imp.name is not None and (imp.module, imp.name) in REMOVED:
                errors.append(f"{imp.where()}: {removed_message(imp.module, imp.name)}")
                continue
            if imp.module in MOVED_MODULES and imp.name is not None:
                instead = replacement(imp.module, imp.name)
            elif imp.name in public:
                instead = f"from uops.plugin import {imp.name}"
            else:
                instead = "nothing in uops.plugin (the plugin API) offers it: ask for it, or keep your own copy"
            sentence = f"{imp.where()}: `{imp.spelled()}` imports {imp.module}, not the plugin API; use {instead}"
            if legacy and (imp.module in MOVED_MODULES or imp.module in LEGACY_PUBLIC):
                deprecated.append(sentence)
            else:
                errors.append(sentence)
    return errors, deprecated
