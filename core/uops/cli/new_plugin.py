"""`uops new-plugin NAME`: write a ready-to-build backend plugin distribution from the shipped templates.

Why: a plugin is four small files plus packaging, and the details that make it behave (cheap
probes, lazy imports, the API range, the compile-cache identity) are easy to miss. The templates
(``templates/`` next to this module, shipped in the wheel) are a complete plugin that installs and
passes ``uops conformance NAME`` unchanged; an author edits it from there.

  ``--like cpu``  C for the host CPU, compiled by the system C compiler (``cc``), run through ctypes.
  ``--like gpu``  a GPU-style language (launch indices, workgroups, local memory, barriers); it
                  compiles and runs on the CPU through the core's GPU emulation until a real
                  toolchain and runtime replace ``compiler.py`` and ``runtime.py``.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from uops.version import __version__ as _core_version

__all__ = ["KINDS", "PluginNames", "api_range", "plugin_names", "write_plugin"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
KINDS = ("cpu", "gpu")
_SUMMARY = {
    "cpu": "C for the host CPU, compiled by the system C compiler, run through ctypes",
    "gpu": "a GPU-style C dialect, run on the CPU through the uops GPU emulation",
}
_NOTES = {
    "cpu": (
        "The C compiler is `cc` (set `UOPS_{DEVICE}_CC` to choose another). float16 is `_Float16`\n"
        "(gcc >= 12, clang >= 15 on x86-64); bfloat16 is declared unsupported."
    ),
    "gpu": (
        "`compiler.py` and `runtime.py` run the rendered source on the CPU through the core's GPU\n"
        "emulation (`uops.backends.gpu_emu`), so the renderer is numerically checked before any\n"
        "hardware exists; replace them with the vendor toolchain and driver (keep the emulation as a\n"
        "`{DEVICE}_EMU` device in an `emulated.py`, as the uops-cuda plugin does)."
    ),
}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class PluginNames:
    """The spellings one plugin name implies: device ``GCC``, module ``uops_gcc``, distribution ``uops-gcc``."""

    def __init__(self, name: str) -> None:
        self.name = name.lower()
        self.device = name.upper()
        self.module = f"uops_{self.name}"
        self.dist = f"uops-{self.name.replace('_', '-')}"
        self.cls = "".join(part.capitalize() for part in self.name.split("_"))


def api_range(version: str = _core_version) -> str:
    """The requirement on uops a new plugin declares: this core or a later one (``uops>=0.2``).

    No upper bound: whether a later core still fits is what the plugin API version says (the plugin's
    ``plugin_api``, checked at discovery), so a plugin needs no new release for each minor core release.
    """
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0]
    return f"uops>={parts[0]}.{parts[1]}"


def plugin_names(name: str, existing: list[str]) -> PluginNames:
    """Check ``name`` (an identifier, not a device that is already installed) and derive its spellings."""
    if not _NAME.match(name) or keyword.iskeyword(name.lower()):
        raise ValueError(
            f"plugin name {name!r} is not usable: it must start with a letter and hold only letters, digits "
            f"and underscores (it becomes the device {name.upper()!r} and the module 'uops_{name.lower()}')"
        )
    names = PluginNames(name)
    if names.device in existing:
        raise ValueError(
            f"device {names.device} already exists (installed devices: {', '.join(existing)}); choose another name"
        )
    return names


def _render(text: str, names: PluginNames, like: str) -> str:
    values = {
        "@DEVICE@": names.device,
        "@name@": names.name,
        "@module@": names.module,
        "@dist@": names.dist,
        "@Class@": names.cls,
        "@like@": like,
        "@api_range@": api_range(),
        "@summary@": _SUMMARY[like],
        "@notes@": _NOTES[like].replace("{DEVICE}", names.device),
    }
    for token, value in values.items():
        text = text.replace(token, value)
    left = sorted(set(re.findall(r"@[A-Za-z_]+@", text)))
    if left:
        raise ValueError(f"template placeholders without a value: {', '.join(left)}")
    return text


def _layout(names: PluginNames, like: str) -> dict[str, Path]:
    """Distribution path -> template file."""
    common, kind = TEMPLATES / "common", TEMPLATES / like
    files = {
        "pyproject.toml": common / "pyproject.toml.tmpl",
        "README.md": common / "README.md.tmpl",
        # named after the plugin: a plugin's tests/ is no package, so its module names must not clash with another's
        f"tests/test_{names.name}_conformance.py": common / "test_conformance.py.tmpl",
    }
    for tmpl in sorted(kind.rglob("*.tmpl")):
        rel = tmpl.relative_to(kind).as_posix().removesuffix(".tmpl").replace("@module@", names.module)
        files[f"{names.module}/{rel}"] = tmpl
    return files


def write_plugin(name: str, like: str = "cpu", dest: Path | str = ".", existing: list[str] | None = None) -> Path:
    """Write the plugin distribution ``uops-NAME/`` under ``dest``; returns its directory.

    ``existing`` are the device names already taken (default: the installed devices).
    """
    if like not in KINDS:
        raise ValueError(f"unknown plugin kind {like!r}; choose one of: {', '.join(KINDS)}")
    if existing is None:
        from uops.plugins import Device

        existing = Device.names()
    names = plugin_names(name, existing)
    root = Path(dest) / names.dist
    if root.exists():
        raise FileExistsError(f"{root} already exists; remove it or pass another --dest")
    rendered = {rel: _render(tmpl.read_text(), names, like) for rel, tmpl in _layout(names, like).items()}
    for rel, text in rendered.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
