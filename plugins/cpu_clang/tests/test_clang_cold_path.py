"""The cold first call: no toolchain probe without a disk cache, kernels compiled concurrently, same results."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import uops_cpu_clang.compiler as clang_compiler
from uops import Tensor
from uops.compiler import CompileError, clear_memory_cache
from uops.frontend import realize
from uops.frontend.schedule import create_schedule
from uops_cpu_clang.compiler import ClangCompiler, clang_available

needs_clang = pytest.mark.skipif(clang_available() is not None, reason="clang is not installed")

REPO = Path(__file__).resolve().parents[3]  # plugins/cpu_clang/tests/ -> the repository
ADD = "void add(float* restrict o, const float* restrict a) { for (int i = 0; i < 4; i++) o[i] = a[i] + 1.0f; }\n"


@needs_clang
def test_compile_without_disk_cache_never_runs_the_version_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(clang: str, arch: str) -> tuple[str, str, str]:
        raise AssertionError("the toolchain probe ran with the disk cache off")

    monkeypatch.setenv("UOPS_CACHE", "0")
    monkeypatch.setattr(clang_compiler, "_probe", no_probe)
    clear_memory_cache()
    lib = ClangCompiler().compile_cached(ADD)
    assert lib.startswith(b"\x7fELF")
    assert ClangCompiler().compile_cached(ADD) is lib  # the memo hit needs no probe either


def test_process_identity_changes_with_the_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "clang"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("UOPS_CLANG", str(fake))
    before = ClangCompiler().process_identity()
    assert str(fake) in before
    fake.write_text("#!/bin/sh\necho upgraded\nexit 0\n")
    os.utime(fake, ns=(1, 1))
    assert ClangCompiler().process_identity() != before
    assert ClangCompiler(arch="x86-64").process_identity() != ClangCompiler().process_identity()


def _workloads() -> dict[str, str]:
    """The bench's workloads (bench/latency.py), so the test covers exactly what is measured."""
    spec = importlib.util.spec_from_file_location("bench_latency", REPO / "bench" / "latency.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.WORKLOADS)


def _run(body: str) -> tuple[np.ndarray, np.ndarray]:
    """(uops result, numpy result) of one workload; inputs from the same seeded numpy generator."""
    rng = np.random.default_rng(0)
    made: list[np.ndarray] = []

    class T:
        @staticmethod
        def rand(*shape: int) -> Tensor:
            made.append(rng.random(shape, dtype=np.float32))
            return Tensor(made[-1], device="CPU")

    class N:  # the same body on numpy arrays
        @staticmethod
        def rand(*shape: int) -> _Np:
            return _Np(made.pop(0))

    ns: dict[str, object] = {"T": T}
    exec(body, ns)
    got = ns["out"].numpy()  # type: ignore[attr-defined]
    ref_ns: dict[str, object] = {"T": N}
    exec(body, ref_ns)
    return got, np.asarray(ref_ns["out"].a)  # type: ignore[attr-defined]


class _Np:
    """The few Tensor methods the workloads use, on numpy (float64 reference)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = np.asarray(a, dtype=np.float64)

    def _w(self, o: object) -> np.ndarray | object:
        return o.a if isinstance(o, _Np) else o

    def __add__(self, o: object) -> _Np:
        return _Np(self.a + self._w(o))

    __radd__ = __add__

    def __sub__(self, o: object) -> _Np:
        return _Np(self.a - self._w(o))

    def __mul__(self, o: object) -> _Np:
        return _Np(self.a * self._w(o))

    __rmul__ = __mul__

    def __truediv__(self, o: object) -> _Np:
        return _Np(self.a / self._w(o))

    def __matmul__(self, o: _Np) -> _Np:
        return _Np(self.a @ o.a)

    @property
    def T(self) -> _Np:  # noqa: N802
        return _Np(self.a.T)

    def tanh(self) -> _Np:
        return _Np(np.tanh(self.a))

    def sqrt(self) -> _Np:
        return _Np(np.sqrt(self.a))

    def pow(self, e: float) -> _Np:
        return _Np(self.a**e)

    def sum(self, axis: int) -> _Np:
        return _Np(self.a.sum(axis))

    def mean(self, axis: int, keepdim: bool = False) -> _Np:
        return _Np(self.a.mean(axis, keepdims=keepdim))

    def softmax(self, axis: int) -> _Np:
        e = np.exp(self.a - self.a.max(axis, keepdims=True))
        return _Np(e / e.sum(axis, keepdims=True))


def _forget_compiled() -> None:
    realize._programs.clear()
    clear_memory_cache()


@needs_clang
@pytest.mark.parametrize("name", list(_workloads()))
def test_cold_and_warm_first_calls_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold (nothing compiled, kernels compiled concurrently), sequentially compiled and warm (every
    program loaded already) runs give the same bits, and they match numpy."""
    body = _workloads()[name]
    monkeypatch.setenv("UOPS_CACHE", "0")
    monkeypatch.setenv("UOPS_COMPILE_THREADS", "4")
    _forget_compiled()
    cold, ref = _run(body)
    warm, _ = _run(body)
    monkeypatch.setenv("UOPS_COMPILE_THREADS", "1")
    _forget_compiled()
    sequential, _ = _run(body)
    np.testing.assert_allclose(cold, ref, rtol=1e-4, atol=1e-5)
    assert cold.tobytes() == warm.tobytes() == sequential.tobytes()


@needs_clang
@pytest.mark.parametrize("threads", ["1", "2"])
def test_the_first_failing_kernel_in_schedule_order_raises(
    threads: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Both kernels fail; the first one finishes last, and its error is still the one raised."""
    fake = tmp_path / "clang"
    fake.write_text(
        "#!/bin/sh\n"
        'if grep -q "void r_4_8(" kernel.c; then sleep 1; echo "kernel.c:1:1: error: first refused" >&2; exit 1; fi\n'
        'echo "kernel.c:1:1: error: second refused" >&2; exit 1\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("UOPS_CLANG", str(fake))
    monkeypatch.setenv("UOPS_CACHE", "0")
    monkeypatch.setenv("UOPS_COMPILE_THREADS", threads)
    _forget_compiled()
    x = Tensor(np.arange(32, dtype=np.float32).reshape(4, 8), device="CPU")
    y = (x.sum(1, keepdim=True) + x).sum(0)  # kernels r_4_8, then r_8_4
    with pytest.raises(CompileError) as ei:
        y.numpy()
    text = str(ei.value)
    assert "first refused" in text and "void r_4_8(" in text
    assert "second refused" not in text
    monkeypatch.delenv("UOPS_CLANG")
    _forget_compiled()
    np.testing.assert_allclose(y.numpy(), (x.numpy().sum(1, keepdims=True) + x.numpy()).sum(0))


EXP = (
    "float exp2f(float);\n"
    "void e(float* restrict o, const float* restrict a) { for (int i = 0; i < 4; i++) o[i] = exp2f(a[i]); }\n"
)


def _exp2_of(lib: bytes) -> np.ndarray:
    from uops_cpu_clang.runtime import ClangRuntime

    prog = ClangRuntime().load("e", lib)
    a = np.array([0.0, 1.0, 2.5, -3.0], np.float32)
    o = np.zeros(4, np.float32)
    prog(o, a)
    return o


@needs_clang
@pytest.mark.parametrize("linker", ["direct", "missing", "broken"])
def test_the_library_links_libm_whichever_way_it_is_linked(
    linker: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ld directly, or the clang driver when there is no ld or it fails: the kernel loads and calls libm."""
    broken = tmp_path / "ld"
    broken.write_text("#!/bin/sh\necho 'ld: cannot link' >&2\nexit 1\n")
    broken.chmod(0o755)
    if linker == "missing":
        monkeypatch.setattr(clang_compiler, "_linker", lambda: None)
    elif linker == "broken":
        monkeypatch.setattr(clang_compiler, "_linker", lambda: str(broken))
    lib = ClangCompiler().compile(EXP)
    np.testing.assert_allclose(_exp2_of(lib), np.exp2([0.0, 1.0, 2.5, -3.0]), rtol=1e-6)


def test_own_stage_checks_run_only_with_uops_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel AST (input) is always checked; the lowered graph and the PROGRAM forms only with UOPS_SPEC=1."""
    from uops.codegen import lowerer
    from uops.codegen.program import get_program
    from uops.ir import spec
    from uops.plugins import Device

    x = Tensor(np.ones((4, 8), np.float32), device="PYTHON")
    ast = next(it.ast for it in create_schedule([(x + 1).uop], "PYTHON").items if it.ast is not None)
    dev = Device["PYTHON"]
    seen: list[str] = []
    real = spec.verify

    def counted(graph: object, stage: str) -> None:
        seen.append(stage)
        real(graph, stage)  # type: ignore[arg-type]

    monkeypatch.setattr(spec, "verify", counted)
    monkeypatch.setattr(lowerer, "verify", counted)
    for flag, stages in (("0", {"ast"}), ("1", {"ast", "lowered", "program", "linear"})):
        monkeypatch.setenv("UOPS_SPEC", flag)
        seen.clear()
        get_program(ast, dev.renderer, dev.compiler)
        assert set(seen) == stages


def _fake_clang(path: Path, version: str) -> None:
    """A stand-in clang that answers the two identity probes (``--version`` and ``-march=native -###``)."""
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then\n'
        f'  echo "fake clang version {version}"; echo "Target: x86_64-fake-linux"; exit 0\n'
        "fi\n"
        'echo \'"-target-cpu" "fakecpu" "-target-feature" "+fake"\' >&2\n'
    )
    path.chmod(0o755)


def test_identity_is_kept_on_disk_under_the_executables_stamp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A warm cache names the toolchain without running it; a changed executable is probed again."""
    monkeypatch.setenv("UOPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("UOPS_CACHE", raising=False)
    fake = tmp_path / "clang"
    _fake_clang(fake, "1.0")
    monkeypatch.setenv("UOPS_CLANG", str(fake))
    first = ClangCompiler().identity()
    assert first.startswith("fake clang version 1.0 | target=x86_64-fake-linux")
    assert len(list((tmp_path / "cache" / "toolchains").glob("*.bin"))) == 1

    def no_probe(clang: str, arch: str) -> tuple[str, str, str]:
        raise AssertionError("probed although the disk cache names this executable")

    with monkeypatch.context() as m:
        m.setattr(clang_compiler, "_probe", no_probe)
        assert ClangCompiler().identity() == first
    _fake_clang(fake, "2.0")
    os.utime(fake, ns=(10**18, 10**18))
    assert ClangCompiler().identity().startswith("fake clang version 2.0")
    for entry in (tmp_path / "cache" / "toolchains").glob("*.bin"):
        entry.write_bytes(b"garbage")
    with pytest.warns(RuntimeWarning, match="not a uops cache entry"):
        assert ClangCompiler().identity().startswith("fake clang version 2.0")
