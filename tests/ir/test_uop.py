import gc
import subprocess
import sys
import weakref

import pytest

from uops import Ops, PatternMatcher, UOp, UPat, dtypes, graph_rewrite


def test_hash_consing_returns_same_object():
    a = UOp.variable("a", 0, 10)
    assert (a + 1) is (a + 1)
    assert UOp.const(dtypes.int32, 3) is UOp.const(dtypes.int32, 3)
    assert UOp.const(dtypes.int32, 3) is not UOp.const(dtypes.int64, 3)


def test_unreferenced_nodes_are_freed():
    a = UOp.variable("freed_var", 0, 10)
    ref = weakref.ref(a * 12345)
    gc.collect()
    assert ref() is None


def test_immutable():
    a = UOp.variable("a", 0, 10)
    with pytest.raises(AttributeError, match="immutable"):
        a.op = Ops.ADD  # type: ignore[misc]


def test_deep_chain_rewrites_without_recursion_error():
    x = UOp.variable("x", 0, 10)
    for _ in range(100_000):
        x = x + 1
    pm = PatternMatcher([(UPat(Ops.ADD, src=[UPat.var("a"), UPat.cvar("c")]), lambda a, c: None)])
    assert graph_rewrite(x, pm) is x
    assert x.vmax == 100_010


def test_rule_returning_non_uop_names_the_rule():
    def bad_rule(x):
        return 3

    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="x"), bad_rule)])
    with pytest.raises(TypeError, match="bad_rule"):
        graph_rewrite(UOp.variable("v", 0, 1), pm)


def test_signed_zero_and_nan_constants_are_distinct_nodes_but_consed():
    neg, pos = UOp.const(dtypes.float32, -0.0), UOp.const(dtypes.float32, 0.0)
    assert neg is not pos and str(neg.arg) == "-0.0"
    assert UOp.const(dtypes.float32, float("nan")) is UOp.const(dtypes.float32, float("nan"))


def test_equal_dtypes_that_are_other_objects_build_the_same_nodes():
    other_int32 = dtypes.int32.vec(4).scalar()  # equal to dtypes.int32, a different object
    assert other_int32 is not dtypes.int32 and other_int32._tok == dtypes.int32._tok
    assert UOp.const(other_int32, 7) is UOp.const(dtypes.int32, 7)
    a = UOp.variable("eq_dtype_var", 0, 10)
    assert UOp(Ops.ADD, other_int32, (a, a)) is UOp(Ops.ADD, dtypes.int32, (a, a))
    assert dtypes.int32.vec(4)._tok == dtypes.int32.vec(4)._tok != dtypes.int32.vec(2)._tok
    assert dtypes.int32.ptr()._tok != dtypes.int32._tok  # a pointer is never equal to its base


def test_integer_bounds_on_dtypes_are_the_dtype_limits():
    # written out: dtypes.min/max and _ibounds share one definition, so each is checked against C's limits
    limits = {
        dtypes.int8: (-128, 127),
        dtypes.uint8: (0, 255),
        dtypes.int16: (-32768, 32767),
        dtypes.uint16: (0, 65535),
        dtypes.int32: (-(2**31), 2**31 - 1),
        dtypes.uint32: (0, 2**32 - 1),
        dtypes.int64: (-(2**63), 2**63 - 1),
        dtypes.uint64: (0, 2**64 - 1),
    }
    for dt, (lo, hi) in limits.items():
        assert dt._ibounds == (lo, hi) == (dtypes.min(dt), dtypes.max(dt))
        assert dtypes.min(dt.vec(4)) == lo and dtypes.max(dt.ptr()) == hi
        assert UOp.const(dt, dtypes.max(dt) + 1).arg == dtypes.min(dt)  # out of range: wraps as C does
    for dt in (dtypes.bool, dtypes.float32, dtypes.int32.vec(2), dtypes.int32.ptr()):
        assert dt._ibounds is None


def test_a_dtype_that_is_not_a_dtype_is_named():
    with pytest.raises(TypeError, match="dtype must be a DType, got str"):
        UOp(Ops.CONST, "int32", (), 1)  # type: ignore[arg-type]


def test_simplify_works_after_importing_uop_alone() -> None:
    """symbolic installs UOp.simplify's rules as uops.ir loads: no import of uops.ir.symbolic is needed."""
    code = (
        "import sys\nfrom uops.ir.uop import UOp\nfrom uops.dtypes import dtypes\n"
        "assert 'uops.ir.symbolic' in sys.modules\n"
        "print((UOp.const(dtypes.int32, 3) + 4).simplify().arg)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "7"
