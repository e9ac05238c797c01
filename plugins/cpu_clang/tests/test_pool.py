"""The native worker pool that runs THREADed CPU kernels: every chunk exactly once, from any thread or process."""

from __future__ import annotations

import multiprocessing
import multiprocessing.queues
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

try:
    import uops_cpu_clang  # noqa: F401  (installed as a package)
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uops_cpu_clang.compiler import ClangCompiler, clang_available
from uops_cpu_clang.runtime import MAX_ARGS, MAX_CHUNKS, ClangProgram, native_pool

_missing = clang_available()
pytestmark = pytest.mark.skipif(_missing is not None, reason=f"clang unavailable: {_missing}")

# each chunk adds its number plus an offset to its own slot: a chunk run twice or never shows in the result
CHUNKS = """
void chunks(int* restrict out, int offset, int core_id) { out[core_id] += core_id * 3 + offset; }
"""


def _wide(n: int) -> str:
    params = ", ".join(f"int* restrict p{i}" for i in range(n))
    body = " ".join(f"p{i}[core_id] = {i} * 100 + core_id;" for i in range(n))
    return f"void wide({params}, int core_id) {{ {body} }}"


@pytest.fixture(scope="module")
def chunks_program() -> ClangProgram:
    return ClangProgram("chunks", ClangCompiler().compile(CHUNKS))


def _run_chunks(prog: ClangProgram, n: int, offset: int) -> np.ndarray:
    out = np.zeros(n, np.int32)
    prog(out, global_size=(n, 1, 1), vals=(offset,))
    return out


def test_pool_builds_and_starts_workers(chunks_program: ClangProgram) -> None:
    pool = native_pool()
    assert pool is not None
    assert pool.run(chunks_program._entry, [np.zeros(4, np.int32).ctypes.data, 0], 4, threads=2)
    assert pool.workers() >= 1


@pytest.mark.parametrize("n", [2, 3, 37, 1000, MAX_CHUNKS])
@pytest.mark.parametrize("offset", [0, -5, 2**31 - 1 - 3 * MAX_CHUNKS])
def test_every_chunk_runs_once(chunks_program: ClangProgram, n: int, offset: int) -> None:
    out = _run_chunks(chunks_program, n, offset)
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.int64) * 3 + offset)


def test_too_many_chunks_fall_back(chunks_program: ClangProgram) -> None:
    pool = native_pool()
    assert pool is not None
    assert not pool.run(chunks_program._entry, [0, 0], MAX_CHUNKS + 1, threads=2)
    out = _run_chunks(chunks_program, MAX_CHUNKS + 1, 1)
    np.testing.assert_array_equal(out, np.arange(MAX_CHUNKS + 1, dtype=np.int64) * 3 + 1)


@pytest.mark.parametrize("n_args", [MAX_ARGS, MAX_ARGS + 1])
def test_widest_kernels_pool_or_fall_back(n_args: int) -> None:
    prog = ClangProgram("wide", ClangCompiler().compile(_wide(n_args)))
    outs = [np.full(9, -1, np.int32) for _ in range(n_args)]
    prog(*outs, global_size=(9, 1, 1))
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, i * 100 + np.arange(9))
    pool = native_pool()
    assert pool is not None
    assert pool.run(prog._entry, [o.ctypes.data for o in outs], 9, threads=2) == (n_args <= MAX_ARGS)


def test_launches_from_several_threads(chunks_program: ClangProgram) -> None:
    errors: list[str] = []

    def launch(offset: int) -> None:
        for i in range(200):
            out = _run_chunks(chunks_program, 64, offset + i)
            if not np.array_equal(out, np.arange(64) * 3 + offset + i):
                errors.append(f"thread {offset}, launch {i}: {out[:8]}")

    threads = [threading.Thread(target=launch, args=(k * 1000,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _child(queue: multiprocessing.queues.Queue[list[int]]) -> None:
    prog = ClangProgram("chunks", ClangCompiler().compile(CHUNKS))
    queue.put(_run_chunks(prog, 50, 7).tolist())


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_forked_child_starts_its_own_workers(chunks_program: ClangProgram) -> None:
    _run_chunks(chunks_program, 8, 0)  # the parent's workers exist before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_child, args=(queue,))
    p.start()
    got = queue.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0
    assert got == (np.arange(50) * 3 + 7).tolist()
