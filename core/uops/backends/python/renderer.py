"""The PYTHON renderer: the linear uops serialised as JSON, which the interpreter executes.

It is GPU-style (output axes become launch indices) so the PYTHON backend also exercises the
launch-index path of the lowering that CUDA, AMD and Metal use.
"""

from __future__ import annotations

import json

from uops.ir.ops import GroupOp, Ops
from uops.ir.serialize import uops_to_data
from uops.ir.uop import UOp
from uops.renderer import Renderer


class PythonRenderer(Renderer):
    device = "PYTHON"
    target = "numpy"
    global_max = (2**31 - 1, 65535, 65535)
    local_max = None
    supported_ops = GroupOp.ALU | {Ops.CAST, Ops.BITCAST}
    vector_widths = (4, 2)  # vector loads and stores as the GPU renderers make them, defined by the interpreter

    def render(self, name: str, uops: list[UOp]) -> str:
        return json.dumps({"name": name, "program": uops_to_data(uops)}, indent=None)
