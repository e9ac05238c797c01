"""uops backend "OLDCPU": C rendered by ClangRenderer, compiled by the system clang, run via ctypes.

Only this module is imported when the core loads the plugin; the renderer, compiler and
runtime modules are imported by the factories below, the first time each is needed.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from uops.plugins import Backend, hookimpl

if TYPE_CHECKING:
    from uops_oldguide.compiler import ClangCompiler
    from uops_oldguide.renderer import ClangRenderer
    from uops_oldguide.runtime import ClangRuntime

__version__ = "0.1.0"

# the host's machine name -> clang's baseline -march for that ISA (portable binaries)
_BASELINE_MARCH = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "armv8-a", "arm64": "armv8-a"}


def _renderer(arch: str | None) -> ClangRenderer:
    from uops_oldguide.renderer import ClangRenderer

    r = ClangRenderer()
    r.target = arch or platform.machine()
    return r


def _compiler(arch: str | None) -> ClangCompiler:
    """None: -march=native (fastest, this machine only); a machine name: that ISA's baseline; else a -march value."""
    from uops_oldguide.compiler import ClangCompiler

    if arch is None:
        return ClangCompiler()
    return ClangCompiler(arch=_BASELINE_MARCH.get(arch.lower(), arch))


def _runtime() -> ClangRuntime:
    from uops_oldguide.runtime import ClangRuntime

    return ClangRuntime()


def _probe_compile() -> str | None:
    from uops_oldguide.compiler import clang_available

    return clang_available()


def _probe_runtime() -> str | None:
    """The runtime needs only ctypes and a writable temp dir (compiled libraries are dlopened from files)."""
    import importlib.util
    import tempfile

    if importlib.util.find_spec("ctypes") is None:
        return "this Python was built without ctypes, which the CPU runtime needs; use a standard CPython build"
    try:
        with tempfile.NamedTemporaryFile(prefix="uops-cpu-probe-"):
            pass
    except OSError as e:
        return f"cannot write to the temp directory ({e}); set TMPDIR to a writable directory"
    return None


@hookimpl
def uops_backends() -> list[Backend]:
    """The OLDCPU backend (priority 30: below CPU)."""
    return [
        Backend(
            device="OLDCPU",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=_probe_compile,
            probe_runtime=_probe_runtime,
            targets=(platform.machine(),),
            priority=30,
        )
    ]
