"""The plugin API: the one module a backend plugin imports, versioned by `PLUGIN_API`.

Why one module: a vendor's plugin lives for years next to a core that keeps moving. Every name a
backend needs is here, under one path that never moves; a name leaves it only through a deprecated
alias kept for at least one minor release of the API and a CHANGELOG entry. The core's other modules
are its own to rearrange, and ``uops conformance`` fails a plugin that imports them.

What loads when: the names a plugin's ``__init__.py`` needs (`Backend`, `hookimpl`, the probes, the
dtypes) are imported with this module and cost nothing beyond the plugins layer, so choosing a device
stays cheap. The rest (renderer, compiler, runtime, IR, the GPU emulation) loads the first time a name
is asked for, which happens in a plugin's ``renderer.py`` / ``compiler.py`` / ``runtime.py``, when the
device is used.
"""

from __future__ import annotations

from uops._lazy import lazy_attributes
from uops.dtypes import DType, PtrDType, dtypes
from uops.plugins.api import PUBLIC_LAZY
from uops.plugins.backend import PRIORITY, Backend, PluginError, hookimpl
from uops.plugins.probes import any_path_exists, emulation_probe, which
from uops.version import PLUGIN_API

TYPE_CHECKING = False  # typing is not imported at run time: see the module docstring
if TYPE_CHECKING:
    from uops.backends.gpu_emu import Dialect, EmulatedCompiler, EmulatedRuntime
    from uops.compiler import CompileError, Compiler, CompilerUnavailableError, positive_int_from_env, usable_cores
    from uops.compiler.cache import cache_dir, entry_path, read_entry, warn_cache, write_entry
    from uops.ir.ops import GroupOp, Ops
    from uops.ir.rewrite import PatternMatcher, UPat
    from uops.ir.uop import UOp
    from uops.renderer import DTypeNotSupportedError, Renderer, Target
    from uops.renderer.cstyle import (
        CStyleRenderer,
        RenderContext,
        alu_rules,
        cast_via_float,
        typed_reciprocal,
        workgroup_threads,
    )
    from uops.runtime import (
        Allocator,
        Buffer,
        BufferFreedError,
        BufferViewError,
        DeviceError,
        Event,
        HostAllocator,
        LaunchError,
        OutOfMemoryError,
        Program,
        ProgramLoadError,
        Runtime,
        launch_dims,
    )
    from uops.runtime.elf import ElfError, SharedLibrary, SymbolNotDefinedError, check_device_image, read_shared_object


__getattr__, __dir__ = lazy_attributes(__name__, globals(), PUBLIC_LAZY, hint=" (the plugin API is its __all__)")


__all__ = [
    "typed_reciprocal",
    "cast_via_float",
    "alu_rules",
    "RenderContext",
    "UPat",
    "PatternMatcher",
    "PLUGIN_API",
    "PRIORITY",
    "Allocator",
    "Backend",
    "Buffer",
    "BufferFreedError",
    "BufferViewError",
    "CStyleRenderer",
    "CompileError",
    "Compiler",
    "CompilerUnavailableError",
    "DType",
    "DTypeNotSupportedError",
    "DeviceError",
    "Dialect",
    "ElfError",
    "EmulatedCompiler",
    "EmulatedRuntime",
    "Event",
    "GroupOp",
    "HostAllocator",
    "LaunchError",
    "Ops",
    "OutOfMemoryError",
    "PluginError",
    "Program",
    "ProgramLoadError",
    "PtrDType",
    "Renderer",
    "Runtime",
    "SharedLibrary",
    "SymbolNotDefinedError",
    "Target",
    "UOp",
    "any_path_exists",
    "cache_dir",
    "check_device_image",
    "dtypes",
    "emulation_probe",
    "entry_path",
    "hookimpl",
    "launch_dims",
    "positive_int_from_env",
    "read_entry",
    "read_shared_object",
    "usable_cores",
    "warn_cache",
    "which",
    "workgroup_threads",
    "write_entry",
]
