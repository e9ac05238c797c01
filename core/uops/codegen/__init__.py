"""Codegen: kernel AST -> lowered SINK -> linear uops -> PROGRAM(SINK, LINEAR, SOURCE, BINARY).

The kernel AST format (see docs/kernel-ast.md): ``SINK(STORE(INDEX(DEFINE_GLOBAL(slot), idx), value), ...)``
where ``idx`` is an int32 expression of ``RANGE(end, arg=(axis, AxisType.GLOBAL | AxisType.REDUCE))``
nodes and ``DEFINE_VAR`` s, reads are ``LOAD(INDEX(buf, idx[, valid])[, pad])`` and reductions are
``REDUCE(value, *ranges, arg=Ops.ADD | Ops.MAX | Ops.MUL)``.
"""
