"""``get_program``'s ProgramSpec carries the PROGRAM node it was read from: one lowering gives both.

The spec stays the public result (the kit and the plugins' tests use it); its ``program`` is the seed's
PROGRAM(SINK, LINEAR, SOURCE, BINARY), which the saved form leaves out.
"""

from __future__ import annotations

import numpy as np
import pytest

from uops import AxisType, Ops, UOp
from uops.codegen import lowerer, program
from uops.codegen.program import ProgramSpec, format_stages, get_program, program_stages
from uops.plugins import Device
from uops.testing.kit.helpers import glob, run_kernel


def _ast(n: int = 12) -> UOp:
    r = UOp.range(n, 0, AxisType.GLOBAL)
    return UOp.sink(glob(0).index(r).store(glob(1).index(r).load() * 3.0 + 1.0))


def test_the_spec_carries_its_program_node() -> None:
    d = Device["PYTHON"]
    spec = get_program(_ast(), d.renderer, d.compiler)
    prg = spec.program
    assert prg is not None and prg.op is Ops.PROGRAM and prg.arg == spec.name
    sink, lin, source, binary = prg.src
    assert [s.op for s in prg.src] == [Ops.SINK, Ops.LINEAR, Ops.SOURCE, Ops.BINARY]
    assert list(lin.src) == spec.uops and source.arg == spec.src and binary.arg == spec.lib
    assert prg is program_stages(_ast(), d.renderer, d.compiler)  # hash-consed: the same lowering, the same node
    assert format_stages(prg) == format_stages(program_stages(_ast(), d.renderer, d.compiler))


def test_spec_and_stages_come_from_one_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Device["PYTHON"]
    calls: list[int] = []
    real = lowerer.run_passes

    def counted(*args: object, **kwargs: object) -> UOp:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(program, "run_passes", counted)
    spec = get_program(_ast(16), d.renderer, d.compiler)
    assert spec.program is not None
    text = format_stages(spec.program)
    assert "===== SOURCE" in text and spec.src.rstrip() in text
    assert len(calls) == 1


def test_a_loaded_spec_has_no_program_node_and_still_runs() -> None:
    d = Device["PYTHON"]
    spec = get_program(_ast(), d.renderer, d.compiler)
    again = ProgramSpec.from_json(spec.to_json())
    assert again.program is None and "program" not in spec.to_dict()
    assert again == spec  # the node is not part of a spec's value
    x = np.arange(12, dtype=np.float32)
    got, _ = run_kernel(_ast(), "PYTHON", [x], (12,), spec=again)
    np.testing.assert_allclose(got, x * 3.0 + 1.0)
