"""The CPU plugin's compiler (system clang) and runtime (ctypes) on hand-written C kernels."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from uops.compiler import CompileError, CompilerUnavailableError, clear_memory_cache
from uops.dtypes import dtypes
from uops.runtime import Buffer, ProgramLoadError
from uops.runtime.elf import ElfError, SymbolNotDefinedError
from uops.testing.kit.helpers import private_compile_cache

try:
    import uops_cpu_clang  # noqa: F401  (installed as a package)
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uops_cpu_clang.compiler import ClangCompiler, clang_available
from uops_cpu_clang.runtime import ClangProgram, ClangRuntime

_missing = clang_available()
needs_clang = pytest.mark.skipif(_missing is not None, reason=f"clang unavailable: {_missing}")

ADD = """
void add(float* restrict out, const float* restrict a, const float* restrict b, int n) {
  for (int i = 0; i < n; i++) out[i] = a[i] + b[i];
}
"""

MATH = """
void math(float* restrict out, const float* restrict a, int n) {
  for (int i = 0; i < n; i++) {
    float x = a[i];
    out[4*i+0] = __builtin_sqrtf(x);
    out[4*i+1] = __builtin_exp2f(x);
    out[4*i+2] = __builtin_log2f(x);
    out[4*i+3] = __builtin_sinf(x);
  }
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with private_compile_cache(tmp_path / "cache", monkeypatch) as d:
        yield d


@pytest.fixture(scope="module")
def add_lib() -> bytes:
    if _missing is not None:
        pytest.skip(f"clang unavailable: {_missing}")
    return ClangCompiler().compile(ADD)


@needs_clang
def test_add_kernel_matches_numpy(add_lib: bytes) -> None:
    rt = ClangRuntime()
    assert rt.device == "CPU"
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    ba = Buffer(rt, 1000, dtypes.float32).copyin(a)
    bb = Buffer(rt, 1000, dtypes.float32).copyin(b)
    out = Buffer(rt, 1000, dtypes.float32)
    prg = rt.load("add", add_lib)
    assert prg(out, ba, bb, vals=(1000,)) is None
    np.testing.assert_array_equal(out.numpy(), a + b)
    # vals really reach the kernel: only the first 10 elements are written
    out2 = Buffer(rt, 1000, dtypes.float32)
    prg(out2.handle, ba.handle, bb.handle, vals=(10,))
    res = out2.numpy()
    np.testing.assert_array_equal(res[:10], (a + b)[:10])
    assert not res[10:].any()


@needs_clang
def test_memory_is_aligned_and_zero_copy() -> None:
    rt = ClangRuntime()
    b = Buffer(rt, 3, dtypes.float32).copyin(np.ones(3, dtype=np.float32))
    assert b.handle.ctypes.data % 64 == 0
    view = b.as_numpy()
    assert view is not None
    view[0] = 5.0
    assert b.numpy()[0] == 5.0


@needs_clang
def test_math_builtins_link_without_libc() -> None:
    lib = ClangCompiler().compile(MATH)
    assert b"libc.so" not in lib, "kernels must not depend on libc"
    rt = ClangRuntime()
    x = np.linspace(0.1, 8.0, 64, dtype=np.float32)
    bx = Buffer(rt, 64, dtypes.float32).copyin(x)
    out = Buffer(rt, 256, dtypes.float32)
    rt.load("math", lib)(out, bx, vals=(64,))
    got = out.numpy().reshape(64, 4)
    np.testing.assert_allclose(got[:, 0], np.sqrt(x), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], np.exp2(x), rtol=1e-6)
    np.testing.assert_allclose(got[:, 2], np.log2(x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[:, 3], np.sin(x), rtol=1e-5, atol=1e-6)


@needs_clang
def test_syntax_error_reports_clang_message_and_numbered_source() -> None:
    src = "void bad(float* out) {\n  out[0] = ;\n}\n"
    with pytest.raises(CompileError) as ei:
        ClangCompiler().compile(src)
    text = str(ei.value)
    assert "kernel.c:2:" in text and "error: expected expression" in text
    assert "2 |   out[0] = ;" in text and "1 | void bad(float* out) {" in text
    assert ei.value.source == src


@needs_clang
def test_unknown_function_fails_at_compile_time() -> None:
    with pytest.raises(CompileError, match="implicit declaration of function 'sqrtf'"):
        ClangCompiler().compile("void k(float* o) { o[0] = sqrtf(o[0]); }\n")


@needs_clang
def test_identity_names_version_target_and_cpu() -> None:
    ident = ClangCompiler().identity()
    assert "clang version" in ident and "target=" in ident and "cpu=native:" in ident
    assert ClangCompiler(arch="x86-64-v2").identity().endswith("cpu=x86-64-v2")
    assert "-march=x86-64-v2" in ClangCompiler(arch="x86-64-v2").flags


@needs_clang
def test_compile_cached_uses_disk(private_cache: Path) -> None:
    lib = ClangCompiler().compile_cached(ADD)
    assert len(list(private_cache.glob("*.bin"))) == 1
    clear_memory_cache()
    assert ClangCompiler().compile_cached(ADD) == lib


@needs_clang
def test_loading_never_compiles(add_lib: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPS_CLANG", "/nonexistent/clang")
    rt = ClangRuntime()
    a = Buffer(rt, 4, dtypes.float32).copyin(np.arange(4, dtype=np.float32))
    out = Buffer(rt, 4, dtypes.float32)
    elapsed = rt.load("add", add_lib)(out, a, a, vals=(4,), wait=True)
    assert isinstance(elapsed, float) and elapsed >= 0
    np.testing.assert_array_equal(out.numpy(), np.arange(4, dtype=np.float32) * 2)


@needs_clang
def test_load_errors_are_specific(add_lib: bytes) -> None:
    with pytest.raises(ProgramLoadError, match="uops_cpu_clang could not load kernel 'add': ElfError: .*not an ELF"):
        ClangProgram("add", b"// CUDA PTX\n")
    with pytest.raises(ProgramLoadError, match="'sub': SymbolNotDefinedError: .*no function 'sub'") as info:
        ClangProgram("sub", add_lib)
    assert isinstance(info.value.__cause__, SymbolNotDefinedError)
    assert (info.value.plugin, info.value.kernel) == ("uops_cpu_clang", "sub")
    prg = ClangProgram("add", add_lib)
    with pytest.raises(ValueError, match="does not fit in int32"):
        prg(np.zeros(1, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32), vals=(2**31,))
    with pytest.raises(TypeError, match="must be a buffer handle"):
        prg("out", vals=(1,))


@needs_clang
def test_corrupt_and_unloadable_libraries_raise_program_load_error(add_lib: bytes, tmp_path: Path) -> None:
    """Bytes cut short, and a real library whose dependency is missing (dlopen fails): one error type."""
    from uops_cpu_clang.compiler import clang_path

    rt = ClangRuntime()
    with pytest.raises(ProgramLoadError, match="uops_cpu_clang could not load kernel 'add': ElfError") as info:
        rt.load("add", add_lib[: len(add_lib) // 3])
    assert isinstance(info.value.__cause__, ElfError)
    (tmp_path / "dep.c").write_text("float dep(float x) { return x + 1.0f; }\n")
    (tmp_path / "k.c").write_text("float dep(float);\nvoid k(float* o) { o[0] = dep(o[0]); }\n")
    cc = clang_path()
    subprocess.run([cc, "-shared", "-fPIC", str(tmp_path / "dep.c"), "-o", str(tmp_path / "libuopsdep.so")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", str(tmp_path / "k.c"), f"-L{tmp_path}", "-luopsdep", "-o",
                    str(tmp_path / "k.so")], check=True)  # fmt: skip
    with pytest.raises(ProgramLoadError, match="could not load kernel 'k': OSError: .*libuopsdep.so") as info:
        rt.load("k", (tmp_path / "k.so").read_bytes())
    assert isinstance(info.value.__cause__, OSError) and info.value.kernel == "k"
    err = pickle.loads(pickle.dumps(info.value))  # BEAM's workers send it back across processes
    assert (type(err), str(err), err.plugin) == (ProgramLoadError, str(info.value), "uops_cpu_clang")


def test_missing_clang_is_reported_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPS_CLANG", "/nonexistent/clang")
    reason = clang_available()
    assert reason is not None and "apt-get install clang" in reason and "/nonexistent/clang" in reason
    with pytest.raises(CompilerUnavailableError, match="apt-get install clang"):
        ClangCompiler().compile(ADD)


@needs_clang
def test_exp2_without_libm_is_within_one_ulp_and_keeps_the_special_values() -> None:
    """The renderer's inline exp2 (vectorizable) against float64 numpy: normals, denormals, overflow, inf, NaN."""
    from uops import Ops, UOp
    from uops.ir.ops import AxisType
    from uops.plugins import Device

    dev = Device["CPU"]
    edges = [np.inf, -np.inf, np.nan, -150.0, -149.5, -149.0, -126.5, -126.0, 127.99, 128.0, 200.0, 0.0, -0.0]
    xs = np.concatenate([np.linspace(-160, 130, 100003), edges]).astype(np.float32)
    out, a = (UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(), (), s) for s in range(2))
    i = UOp.range(xs.size, 0, AxisType.GLOBAL)
    ast = UOp.sink(out.index(i).store(UOp(Ops.EXP2, dtypes.float32, (a.index(i).load(),))))
    from uops.codegen.program import get_program

    spec = get_program(ast, dev.renderer, dev.compiler, [])
    assert "uops_exp2f(" in spec.src and "__builtin_exp2f" not in spec.src
    bo, bx = Buffer(dev.runtime, xs.size, dtypes.float32), Buffer(dev.runtime, xs.size, dtypes.float32)
    bx.copyin(xs)
    dev.runtime.load(spec.name, spec.lib)(bo.handle, bx.handle)
    got = bo.numpy()
    with np.errstate(over="ignore"):
        want = np.exp2(xs.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want) & (want >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[finite].astype(np.float64) - np.exp2(xs[finite].astype(np.float64))) / np.spacing(want[finite])
    assert ulps.max() <= 1.0, xs[finite][ulps.argmax()]
    tiny = want < np.finfo(np.float32).tiny  # denormals and zero: within one step
    np.testing.assert_allclose(got[tiny], want[tiny], rtol=0, atol=np.finfo(np.float32).smallest_subnormal)
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    assert np.isnan(got[np.isnan(xs)]).all()
