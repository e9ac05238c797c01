"""The PYTHON backend: an interpreter of linearized uops, registered like any plugin.

It is the executable definition of every op, the oracle in tests, and the device that works
with no compiler installed.
"""

from __future__ import annotations

from uops.plugins import Backend, hookimpl

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every start ~5 ms
if TYPE_CHECKING:
    from uops.compiler import Compiler
    from uops.renderer import Renderer
    from uops.runtime import Runtime


def _renderer(arch: str | None) -> Renderer:
    from uops.backends.python.renderer import PythonRenderer

    return PythonRenderer()


def _compiler(arch: str | None) -> Compiler:
    from uops.backends.python.compiler import PythonCompiler

    return PythonCompiler()


def _runtime() -> Runtime:
    from uops.backends.python.runtime import PythonRuntime

    return PythonRuntime()


@hookimpl
def uops_backends() -> list[Backend]:
    return [
        Backend(
            device="PYTHON",
            renderer=_renderer,
            compiler=_compiler,
            runtime=_runtime,
            probe_compile=lambda: None,
            probe_runtime=lambda: None,
            targets=("numpy",),
            priority=0,
        )
    ]
