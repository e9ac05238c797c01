"""C for the host CPU: a small subclass of the core CStyleRenderer.

Every output axis is a loop (no launch grid). Kernels use only compiler builtins, so they
need no libc headers. bfloat16 has no C type on clang 14 for x86; kernels that use it get a
clear error from the lowering instead of wrong results.
"""

from __future__ import annotations

import platform

from uops.dtypes import dtypes
from uops.renderer.cstyle import CStyleRenderer
from uops.uop import UOp


class ClangRenderer(CStyleRenderer):
    device = "OLDCPU"
    target = platform.machine()
    global_max = None
    local_max = None
    unsupported_dtypes = frozenset({dtypes.bfloat16})

    def render_bitcast(self, x: str, src, dst) -> str:  # type: ignore[no-untyped-def]
        # C has no bit_cast; a compound-literal union is well defined in C99 and folds to a move
        return f"((union {{ {self.render_dtype(src)} a; {self.render_dtype(dst)} b; }}){{.a = {x}}}).b"

    def render_kernel(self, name: str, params: list[str], body: list[str], uops: list[UOp]) -> str:
        return f"void {name}({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n"
