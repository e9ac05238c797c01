"""bench/roofline.py and bench/peers.py: the roofline kernels build and check themselves; a peer interpreter
gets the same inputs, its results are checked against numpy, and a wrong or failing peer is reported, never
timed. The peer here is this interpreter running only numpy (jax and torch are never test dependencies)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests import REPO

BENCH = REPO / "bench"


def _bench(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def _need_clang() -> None:
    pytest.importorskip("uops_cpu_clang")
    from uops_cpu_clang.compiler import clang_available

    if (why := clang_available()) is not None:
        pytest.skip(why)


def test_roofline_kernels_compile_and_give_checked_positive_rates() -> None:
    _need_clang()
    roofline = _bench("roofline")
    r = roofline.measure(array_bytes=1 << 20, runs=1, threads=2)
    assert r.read_bytes_s > 0 and r.triad_bytes_s > 0 and r.fma_flops_s > 0
    assert r.threads == 2 and r.vector_floats in (4, 8, 16)
    assert "GB/s" in r.describe() and "GFLOP/s" in r.describe()


def test_roofline_read_check_matches_numpy_on_odd_sizes() -> None:
    _need_clang()
    roofline = _bench("roofline")
    k = roofline._Kernels(roofline.cpu_vector_isa()[1])
    for n in (1, 4095, 4096 * 3 + 17):
        x = roofline._aligned(n)
        roofline._fill_pattern(x)
        parts = [k.read(x.ctypes.data, lo, hi) for lo, hi in roofline._chunks(n, 3)]
        assert sum(parts) == roofline._pattern_sum(n) == float(x.astype(np.float64).sum())


def test_roofline_uses_the_widest_vectors_the_cpu_has(tmp_path: Path) -> None:
    """An AVX-512 machine gets 512-bit FMAs: clang would otherwise split the vectors in two on CPUs it
    prefers 256-bit code on, and understate the peak."""
    _need_clang()
    roofline = _bench("roofline")
    isa, width = roofline.cpu_vector_isa()
    if isa != "avx512f" or shutil.which("objdump") is None:
        pytest.skip("needs an AVX-512 CPU and objdump")
    from uops_cpu_clang.compiler import ClangCompiler

    lib = tmp_path / "roof.so"
    lib.write_bytes(ClangCompiler().compile(roofline.kernel_source(width)))

    def disassembly(fn: str) -> list[str]:
        cmd = ["objdump", f"--disassemble={fn}", str(lib)]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()

    fmas = [ln for ln in disassembly("roof_fma") if "vfmadd" in ln]
    assert len(fmas) >= 16 and all("zmm" in ln for ln in fmas), fmas[:4]
    assert any("vaddps" in ln and "zmm" in ln for ln in disassembly("roof_read"))


_WORKLOADS = """
from workloads import Workload

def _fail(xp, x):
    raise ZeroDivisionError("this peer cannot run it")

def workloads(small):
    return [
        Workload("right", [(4, 5)], lambda xp, x: xp.exp(x) * 2 + x, 3 * 20, 20, "triad"),
        Workload("wrong", [(4, 5)], lambda xp, x: x * 2, 20, 20, "triad", impl={"numpy": lambda xp, x: x * 2 + 0.1}),
        Workload("broken", [(6,)], lambda xp, x: xp.sum(x), 6, 1, "read", impl={"numpy": _fail}),
    ]
"""


@pytest.fixture
def numpy_peer(tmp_path: Path):  # type: ignore[no-untyped-def]
    peers = _bench("peers")
    path = tmp_path / "my_workloads.py"
    path.write_text(textwrap.dedent(_WORKLOADS))
    with peers.Peer("numpy", sys.executable, str(path)) as peer:
        yield peers, peer, _load(path)


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("my_workloads", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_right_peer_is_timed_and_a_wrong_or_failing_one_is_reported(numpy_peer) -> None:  # type: ignore[no-untyped-def]
    peers, peer, mod = numpy_peer
    assert peer.variants == ["numpy"] and peer.version == np.__version__
    workloads = _bench("workloads")
    seen = {}
    for w in mod.workloads(False):
        xs = workloads.inputs(w, seed=3)
        want = np.asarray(w.fn(workloads.namespace("numpy"), *xs), dtype=np.float32)  # the reference: no override
        local, outcomes = peers.compare([peer], w.name, False, xs, want, [lambda: None], runs=2)
        assert len(local) == 1 and local[0] >= 0
        seen[w.name] = outcomes[peer, "numpy"]
    assert seen["right"].status == "ok" and seen["right"].seconds is not None and seen["right"].seconds > 0
    assert seen["wrong"].status == "wrong" and seen["wrong"].seconds is None
    assert "max abs error 0.1" in seen["wrong"].detail
    assert seen["broken"].status == "error" and seen["broken"].seconds is None
    assert seen["broken"].detail == "ZeroDivisionError: this peer cannot run it"


def test_the_peer_computes_on_the_very_inputs_it_is_given(numpy_peer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Inputs other than the ones the reference saw give a result the check refuses."""
    peers, peer, mod = numpy_peer
    workloads = _bench("workloads")
    w = mod.workloads(False)[0]
    xs = workloads.inputs(w, seed=0)
    want = np.asarray(w.fn(workloads.namespace("numpy"), *xs))
    assert peers.set_up([peer], "right", False, xs, want, tmp_path)[peer, "numpy"].status == "ok"
    other = workloads.inputs(w, seed=1)
    outcome = peers.set_up([peer], "right", False, other, want, tmp_path)[peer, "numpy"]
    assert outcome.status == "wrong", outcome


def test_a_peer_interpreter_that_cannot_start_is_named(tmp_path: Path) -> None:
    peers = _bench("peers")
    missing = str(tmp_path / "no-such-python")
    with pytest.raises(peers.PeerError, match="no-such-python"):
        peers.start_peers({"torch": missing})
    if importlib.util.find_spec("jax") is None:  # this interpreter has no jax: the worker's import fails
        with pytest.raises(peers.PeerError, match="jax peer .*ModuleNotFoundError"):
            peers.start_peers({"jax": sys.executable})


def test_every_workload_agrees_across_numpy_and_uops_namespaces() -> None:
    """The one definition per workload gives numpy's answer on uops (the bench's own check, on small sizes)."""
    pytest.importorskip("uops_cpu_clang")
    workloads = _bench("workloads")
    from uops import Tensor

    for w in workloads.workloads(small=True)[:3] + workloads.workloads(small=True)[-2:]:
        xs = workloads.inputs(w)
        want = np.asarray(w.for_framework("numpy")(*xs))
        got = w.for_framework("uops")(*[Tensor(x, device="CPU") for x in xs]).numpy()
        assert workloads.agrees(got, want), (w.name, workloads.max_error(got, want))
        assert w.nbytes == 4 * (sum(x.size for x in xs) + want.size)


def test_ops_prints_the_peer_table_with_a_numpy_column(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("uops_cpu_clang")
    ops = _bench("ops")
    assert ops.main(["--small", "--runs", "1", "--only", "sum axis 1", "--no-roofline"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("sum axis 1"))
    assert float(row.split()[-1]) > 0  # numpy time / uops time
    header = next(ln for ln in out.splitlines() if ln.startswith("workload"))
    assert header.split()[1:4] == ["uops", "s", "jit"]
    eager, jitted = (float(v) for v in row.split()[4:6])  # after "sum axis 1 [64^2]"
    assert eager > 0 and jitted > 0
    assert "geomean (1 workloads)" in out


def test_peers_compute_on_the_gpu_a_gpu_backend_is_compared_on(tmp_path: Path) -> None:
    """Against CUDA, AMD or Metal the peers get the matching torch device; a peer that ignores it (numpy) still
    answers, and the device reaches the worker."""
    peers = _bench("peers")
    assert [peers.peer_device(d) for d in ("CUDA", "AMD", "METAL", "CPU", "CUDA_EMU")] == [
        "cuda",
        "cuda",
        "mps",
        "cpu",
        "cpu",
    ]
    (p,) = peers.start_peers({"numpy": sys.executable}, device="cuda")
    try:
        assert p.device == "cuda" and p.variants == ["numpy"]
        w = _bench("workloads").workloads(small=True)[0]
        xs = _bench("workloads").inputs(w)
        want = np.asarray(w.for_framework("numpy")(*xs), dtype=np.float32)
        assert peers.set_up([p], w.name, True, xs, want, tmp_path)[p, "numpy"].status == "ok"
    finally:
        p.close()
