"""uops backend "CPU": C rendered by ClangRenderer, compiled by the system clang, run via ctypes.

Only this module is imported when the core loads the plugin; the renderer, compiler and
runtime modules are imported by the factories below, the first time each is needed. The
probes run to choose `Device.DEFAULT`, so they only look (is clang on PATH? can a library be
dlopened from the temp dir?) and never start clang or import numpy.
"""

from __future__ import annotations

import os

from uops.plugin import Backend, hookimpl, which

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every start ~5 ms
if TYPE_CHECKING:
    from uops_cpu_clang.compiler import ClangCompiler
    from uops_cpu_clang.renderer import ClangRenderer
    from uops_cpu_clang.runtime import ClangRuntime

__version__ = "0.1.0"

#: the host's ISA, the default (and only listed) target
HOST_ARCH = os.uname().machine if hasattr(os, "uname") else "x86_64"
# the host's machine name -> clang's baseline -march for that ISA (portable binaries)
_BASELINE_MARCH = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "armv8-a", "arm64": "armv8-a"}
INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install clang) or set UOPS_CLANG to the clang executable"


def clang_path() -> str:
    """The clang command: ``UOPS_CLANG`` if set, else ``clang`` on PATH."""
    return os.environ.get("UOPS_CLANG") or "clang"


def _renderer(arch: str | None) -> ClangRenderer:
    from uops_cpu_clang.renderer import ClangRenderer, host_vector_bytes

    # the default target is this machine (the compiler's -march=native): its vector registers may be wider
    return ClangRenderer(HOST_ARCH, vector_bytes=host_vector_bytes()) if arch is None else ClangRenderer(arch)


def _compiler(arch: str | None) -> ClangCompiler:
    """None: -march=native (fastest, this machine only); a machine name: that ISA's baseline; else a -march value."""
    from uops_cpu_clang.compiler import ClangCompiler

    if arch is None:
        return ClangCompiler()
    return ClangCompiler(arch=_BASELINE_MARCH.get(arch.lower(), arch))


def _runtime() -> ClangRuntime:
    from uops_cpu_clang.runtime import ClangRuntime

    return ClangRuntime()


def probe_compile() -> str | None:
    """clang on PATH (or UOPS_CLANG): a lookup, not a run; a clang that exists but fails is reported at compile."""
    clang = clang_path()
    if which(clang) is None:
        return f"the CPU backend needs clang, but {clang!r} was not found; {INSTALL_HINT}"
    return None


def probe_runtime() -> str | None:
    """The runtime needs ctypes and a writable temp dir (compiled libraries are dlopened from files).

    ctypes is looked for, not imported (nor through importlib.util, whose imports cost milliseconds).
    """
    import sys
    from importlib.machinery import PathFinder

    if "_ctypes" not in sys.builtin_module_names and PathFinder.find_spec("_ctypes") is None:
        return "this Python was built without ctypes, which the CPU runtime needs; use a standard CPython build"
    tmp = next((os.environ[v] for v in ("TMPDIR", "TEMP", "TMP") if os.environ.get(v)), "/tmp")
    if not os.access(tmp, os.W_OK | os.X_OK):
        return f"cannot write to the temp directory {tmp!r}; set TMPDIR to a writable directory"
    return None


@hookimpl
def uops_backends() -> list[Backend]:
    """The CPU backend (priority 50: below GPUs, above emulated devices and PYTHON)."""
    return [
        Backend(
            device="CPU",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=probe_compile,
            probe_runtime=probe_runtime,
            targets=(HOST_ARCH,),
            priority=50,
            plugin_api=(1, 1),  # the uops.plugin API this release is built for
        )
    ]
