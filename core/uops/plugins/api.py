"""The plugin API's version check and the table of the previous release's module paths.

Why here, below the registry: discovery checks the API a plugin declares (`Backend.plugin_api`) against
this core's `uops.version.PLUGIN_API` before any of the plugin's factories run, and the conformance
kit's import scan (`uops.plugins.imports`) and the deprecated alias modules (``uops.device`` ...) read
the same table of old paths. Nothing here imports more than the plugins layer does.
"""

from __future__ import annotations

from uops.errors import UopsError
from uops.version import PLUGIN_API

__all__ = [
    "LEGACY_API", "LEGACY_PUBLIC", "MOVED_MODULES", "PUBLIC_EAGER", "PUBLIC_LAZY", "PUBLIC_MODULE", "PUBLIC_NAMES",
    "REMOVED", "RemovedNameError", "SHIMS",
    "api_mismatch", "format_api", "removed_message",
]  # fmt: skip

#: the one module a plugin imports (`uops.plugin`)
PUBLIC_MODULE = "uops.plugin"

#: `uops.plugin`'s names imported with it: what a plugin's ``__init__.py`` needs to declare its Backend
PUBLIC_EAGER = (
    "PLUGIN_API", "PRIORITY", "Backend", "PluginError", "hookimpl", "DType", "PtrDType", "dtypes",
    "any_path_exists", "emulation_probe", "which",
)  # fmt: skip

#: `uops.plugin`'s names that load on first use -> the module that defines each
PUBLIC_LAZY = {
    # the IR a renderer reads
    "Ops": "uops.ir.ops",
    "GroupOp": "uops.ir.ops",
    "UOp": "uops.ir.uop",
    # rules: a renderer dialect prepends its own to CStyleRenderer.string_rewrite
    "PatternMatcher": "uops.ir.rewrite",
    "UPat": "uops.ir.rewrite",
    # linear uops -> source
    "Renderer": "uops.renderer",
    "Target": "uops.renderer",
    "DTypeNotSupportedError": "uops.renderer",
    "CStyleRenderer": "uops.renderer.cstyle",
    "workgroup_threads": "uops.renderer.cstyle",
    "RenderContext": "uops.renderer.cstyle",
    "alu_rules": "uops.renderer.cstyle",
    "cast_via_float": "uops.renderer.cstyle",
    "typed_reciprocal": "uops.renderer.cstyle",
    # source -> bytes, and the on-disk cache a compiler may keep its own entries in (toolchain probes)
    "Compiler": "uops.compiler",
    "CompileError": "uops.compiler",
    "CompilerUnavailableError": "uops.compiler",
    "positive_int_from_env": "uops.compiler",
    "usable_cores": "uops.compiler",
    "cache_dir": "uops.compiler.cache",
    "entry_path": "uops.compiler.cache",
    "read_entry": "uops.compiler.cache",
    "write_entry": "uops.compiler.cache",
    "warn_cache": "uops.compiler.cache",
    # memory and launches
    "Allocator": "uops.runtime",
    "Buffer": "uops.runtime",
    "HostAllocator": "uops.runtime",
    "Program": "uops.runtime",
    "Runtime": "uops.runtime",
    "launch_dims": "uops.runtime",
    "BufferFreedError": "uops.runtime",
    "BufferViewError": "uops.runtime",
    "Event": "uops.runtime",
    "DeviceError": "uops.runtime",
    "LaunchError": "uops.runtime",
    "OutOfMemoryError": "uops.runtime",
    "ProgramLoadError": "uops.runtime",
    # checked loading of native code
    "SharedLibrary": "uops.runtime.elf",
    "ElfError": "uops.runtime.elf",
    "SymbolNotDefinedError": "uops.runtime.elf",
    "check_device_image": "uops.runtime.elf",
    "read_shared_object": "uops.runtime.elf",
    # GPU-style source run on the CPU (an _EMU device, or a GPU plugin before its hardware exists)
    "Dialect": "uops.backends.gpu_emu",
    "EmulatedCompiler": "uops.backends.gpu_emu",
    "EmulatedRuntime": "uops.backends.gpu_emu",
}

#: every name of the plugin API (`uops.plugin.__all__`)
PUBLIC_NAMES = frozenset(PUBLIC_EAGER) | frozenset(PUBLIC_LAZY)

#: what a plugin that declares no ``plugin_api`` was built for: uops 0.1, before the API had a number
LEGACY_API = (1, 0)

#: module paths of uops 0.1 that are gone, -> where their names live now; each is a deprecated alias
#: module (``core/uops/<name>.py``) that warns once and hands out the current objects
MOVED_MODULES = {
    "uops.device": "uops.runtime",
    "uops.emulate": "uops.backends.gpu_emu",
    "uops.ops": "uops.ir.ops",
    "uops.rewrite": "uops.ir.rewrite",
    "uops.symbolic": "uops.ir.symbolic",
    "uops.uop": "uops.ir.uop",
}

#: names of those modules that are gone, -> what replaces them
REMOVED = {
    ("uops.emulate", "kernel_names"): "the kernels of a source are the names its Dialect's kernel declaration "
    "matches; a runtime is asked for one by name (load(name, lib))",
}

#: names of those modules that changed shape and keep working through a small adapter, -> what to use instead
SHIMS = {
    ("uops.rewrite", "graph_substitute"): "UOp.substitute(mapping)",
    ("uops.symbolic", "exec_alu"): "uops.ir.alu.eval_scalar(op, dtype, vals)",
}

#: module paths the uops 0.1 plugin guide and plugins imported that still exist: a plugin built for
#: API 1.0 may keep using them (the kit reports them), one built for 1.1 or later imports `uops.plugin`
LEGACY_PUBLIC = ("uops.compiler", "uops.dtypes", "uops.plugins", "uops.renderer", "uops.renderer.cstyle")


def format_api(api: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in api)


def api_mismatch(declared: tuple[int, int] | None, dist: str) -> tuple[str, str] | None:
    """None when a plugin built for ``declared`` runs on this core, else (reason, fix) in plain words.

    The same major and an older or equal minor fit (a minor only adds). Another major, or a newer minor
    (the plugin may use names this core lacks), does not.
    """
    api = LEGACY_API if declared is None else declared
    if (
        not isinstance(api, tuple) or len(api) != 2 or not all(type(x) is int and x >= 0 for x in api)
    ):  # fmt: skip
        return (
            f"its Backend declares plugin_api={declared!r}, not a (major, minor) pair of ints",
            f"report this to the plugin's authors; upgrade it (pip install -U {dist})",
        )
    major, minor = api
    core = format_api(PLUGIN_API)
    if major == PLUGIN_API[0] and minor <= PLUGIN_API[1]:
        return None
    if (major, minor) < PLUGIN_API:
        return (
            f"built for plugin API {major}.x, this core speaks {core}: upgrade {dist}",
            f"install a {dist} release built for plugin API {PLUGIN_API[0]}.x (pip install -U {dist})",
        )
    return (
        f"built for plugin API {major}.{minor}, this core speaks {core}: upgrade uops",
        f"upgrade the core (pip install -U uops), or install a {dist} release built for plugin API {core}",
    )


class RemovedNameError(UopsError, ImportError):
    """A plugin imported a name of uops 0.1 that this core no longer has: which one, and what replaces it."""


def removed_message(module: str, name: str) -> str:
    return (
        f"{module}.{name} was removed in plugin API 1.1 (uops 0.2.0; {module} is a deprecated alias of "
        f"{MOVED_MODULES[module]}): {REMOVED[(module, name)]}"
    )
