"""The PYTHON "compiler": checks the serialised program and returns its bytes."""

from __future__ import annotations

import json

from uops.compiler import CompileError, Compiler
from uops.ir.serialize import uops_from_data


class PythonCompiler(Compiler):
    flags = ()

    def identity(self) -> str:
        return "uops-python-interpreter/1"

    def compile(self, src: str) -> bytes:
        try:
            uops_from_data(json.loads(src)["program"])
        except (ValueError, KeyError, TypeError) as e:
            raise CompileError(f"not a serialised PYTHON program: {e}", src, self.identity()) from e
        return src.encode()
