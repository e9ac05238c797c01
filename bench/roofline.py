"""This machine's roofline: read bandwidth, triad bandwidth and peak FMA rate, all cores at once.

The kernels are C compiled by the CPU backend's own compiler (``ClangCompiler``: the same clang, flags and
``-march``), run on one thread per usable core the way the CPU backend runs a THREADed kernel (ctypes calls
that release the GIL). They use the widest vectors the CPU has: 16 floats where it has AVX-512 (with
``min_vector_width(512)``, since clang otherwise splits 512-bit vectors into halves on CPUs it prefers
256-bit code on), 8 with AVX2, else 4. Every run's result is checked (the read's sum, every element the
triad wrote, the FMA chains' fixed point), so a kernel the compiler shortened cannot pass for a fast one;
the best of ``runs`` is reported.

- read: ``sum(x)`` over one array of ``--mib`` (default four times the last-level cache, at least 256 MiB).
- triad: ``a = b + s*c`` over three arrays of a third of that each; bytes counted as STREAM does (12 per
  element: two reads, one write; the write-allocate read of ``a`` is not counted).
- fma: independent chains ``v = v*x + y`` in registers; 2 flops per lane per FMA.

    python bench/roofline.py [--mib 2048] [--runs 5] [--threads N]

``bench/ops.py`` measures it once and prints each workload's share of it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uops.errors import UopsError

_BLOCK = 4096  # floats per block of the read kernel: its float partial sums stay exact on the check's pattern
_ALIGN = 64
_PATTERN = 251  # the read/triad inputs repeat i % 251: small integers, so every sum and triad result is exact
_FMA_CHAINS = 16  # independent accumulators: enough to cover the FMA latency on two ports
_FMA_TARGET_S = 0.2


class RooflineError(UopsError, RuntimeError):
    """A roofline kernel gave a wrong result (then its time means nothing), or it cannot be built here."""


@dataclass(frozen=True)
class Roofline:
    """The measured ceilings: bytes/s for reading and for triad, flop/s for fused multiply-adds."""

    read_bytes_s: float
    triad_bytes_s: float
    fma_flops_s: float
    threads: int
    isa: str
    vector_floats: int
    array_bytes: int

    def describe(self) -> str:
        return (
            f"roofline ({self.threads} threads, {self.isa}, {self.vector_floats}-float vectors, "
            f"{self.array_bytes / 2**20:.0f} MiB): read {self.read_bytes_s / 1e9:.1f} GB/s, "
            f"triad {self.triad_bytes_s / 1e9:.1f} GB/s, FMA peak {self.fma_flops_s / 1e9:.1f} GFLOP/s"
        )


def cpu_vector_isa() -> tuple[str, int]:
    """(ISA name, floats per vector) of the widest float vectors this CPU has, from /proc/cpuinfo."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text(errors="replace").split())
    except OSError:
        flags = set()
    if "avx512f" in flags:
        return "avx512f", 16
    if "avx2" in flags and "fma" in flags:
        return "avx2+fma", 8
    return "128-bit", 4


def kernel_source(width: int) -> str:
    """The three kernels in C for vectors of ``width`` floats."""
    wide = f"__attribute__((min_vector_width({32 * width}))) " if width >= 16 else ""
    chains = range(_FMA_CHAINS)
    init = " ".join(f"vf a{k} = (vf)({k + 1}.0f);" for k in chains)
    step = " ".join(f"a{k} = a{k} * x + y;" for k in chains)
    total = " + ".join(f"a{k}" for k in chains)
    return f"""
typedef float vf __attribute__((ext_vector_type({width})));
#define W {width}
#define BLOCK {_BLOCK}

static inline double lanes(vf v) {{ double t = 0.0; for (int k = 0; k < W; k++) t += v[k]; return t; }}

/* sum of x[lo:hi); lo is a multiple of BLOCK and x is 64-byte aligned */
{wide}double roof_read(const float *restrict x, long lo, long hi) {{
  double total = 0.0;
  long i = lo;
  for (; i + BLOCK <= hi; i += BLOCK) {{
    vf s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
    for (long j = i; j < i + BLOCK; j += 8 * W) {{
      const vf *p = (const vf *)(x + j);
      s0 += p[0]; s1 += p[1]; s2 += p[2]; s3 += p[3]; s4 += p[4]; s5 += p[5]; s6 += p[6]; s7 += p[7];
    }}
    total += lanes(((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)));
  }}
  for (; i < hi; i++) total += x[i];
  return total;
}}

/* a = b + s*c over [lo:hi); lo is a multiple of BLOCK, the arrays 64-byte aligned */
{wide}void roof_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long lo,
                    long hi) {{
  long i = lo;
  for (; i + 4 * W <= hi; i += 4 * W) {{
    vf *pa = (vf *)(a + i);
    const vf *pb = (const vf *)(b + i), *pc = (const vf *)(c + i);
    pa[0] = pb[0] + s * pc[0]; pa[1] = pb[1] + s * pc[1]; pa[2] = pb[2] + s * pc[2]; pa[3] = pb[3] + s * pc[3];
  }}
  for (; i < hi; i++) a[i] = b[i] + s * c[i];
}}

/* {_FMA_CHAINS} independent chains v = v*x + y, iters steps each; returns the sum of every lane */
{wide}double roof_fma(float x, float y, long iters) {{
  {init}
  for (long i = 0; i < iters; i++) {{ {step} }}
  return lanes({total});
}}
"""


class _Kernels:
    """The compiled kernels, callable from threads (ctypes releases the GIL during each call)."""

    def __init__(self, width: int) -> None:
        from uops.plugin import SharedLibrary
        from uops_cpu_clang.compiler import ClangCompiler

        self.lib = SharedLibrary(ClangCompiler().compile(kernel_source(width)), what="roofline kernels")
        i64, f32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
        self.read = self.lib.function("roof_read")
        self.read.argtypes, self.read.restype = [ptr, i64, i64], ctypes.c_double
        self.triad = self.lib.function("roof_triad")
        self.triad.argtypes, self.triad.restype = [ptr, ptr, ptr, f32, i64, i64], None
        self.fma = self.lib.function("roof_fma")
        self.fma.argtypes, self.fma.restype = [f32, f32, i64], ctypes.c_double


def _aligned(n: int) -> np.ndarray:
    raw = np.empty(n + _ALIGN // 4, np.float32)
    skip = (-raw.ctypes.data % _ALIGN) // 4
    return raw[skip : skip + n]


def _fill_pattern(x: np.ndarray, offset: int = 0) -> None:
    """x[i] = (i + offset) % 251, written in pieces (no temporaries the size of x)."""
    piece = _PATTERN * 4096
    pat = (np.arange(piece + _PATTERN, dtype=np.int64) % _PATTERN).astype(np.float32)
    for i in range(0, x.size, piece):
        n = min(piece, x.size - i)
        start = (i + offset) % _PATTERN
        x[i : i + n] = pat[start : start + n]


def _pattern_sum(n: int) -> float:
    full, rest = divmod(n, _PATTERN)
    return float(full * (_PATTERN * (_PATTERN - 1) // 2) + rest * (rest - 1) // 2)


def _chunks(n: int, threads: int) -> list[tuple[int, int]]:
    """[lo, hi) per thread, each lo a multiple of the block (aligned vector loads)."""
    per = -(-n // threads)
    per = -(-per // _BLOCK) * _BLOCK
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)]


def _timed(pool: ThreadPoolExecutor, calls: list[Callable[[], Any]]) -> tuple[float, list[Any]]:
    t0 = time.perf_counter()
    futures = [pool.submit(c) for c in calls]
    results = [f.result() for f in futures]
    return time.perf_counter() - t0, results


def default_array_bytes() -> int:
    """Four times the largest cache (so no adaptive replacement keeps a useful part of it), at least 256 MiB,
    at most a quarter of the memory available now."""
    llc = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        llc = max(llc, int(text.rstrip("KMG")) * mult)
    want = max(4 * llc, 256 * 2**20)
    try:
        avail = next(int(ln.split()[1]) * 1024 for ln in Path("/proc/meminfo").open() if ln.startswith("MemAvailable"))
    except (OSError, StopIteration):
        return want
    return min(want, avail // 4)


def usable_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def measure(array_bytes: int | None = None, runs: int = 5, threads: int | None = None) -> Roofline:
    """Compile, run and check the three kernels; the best of ``runs`` of each (after one warm-up)."""
    threads = threads or usable_threads()
    nbytes = array_bytes or default_array_bytes()
    isa, width = cpu_vector_isa()
    k = _Kernels(width)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="roofline") as pool:
        read = _read(k, pool, threads, max(nbytes // 4, _BLOCK), runs)
        triad = _triad(k, pool, threads, max(nbytes // 12, _BLOCK), runs)
        fma = _fma(k, pool, threads, width, runs)
    return Roofline(read, triad, fma, threads, isa, width, nbytes)


def _read(k: _Kernels, pool: ThreadPoolExecutor, threads: int, n: int, runs: int) -> float:
    x = _aligned(n)
    _fill_pattern(x)
    want, addr = _pattern_sum(n), x.ctypes.data
    calls = [lambda lo=lo, hi=hi: k.read(addr, lo, hi) for lo, hi in _chunks(n, threads)]
    best = float("inf")
    for r in range(runs + 1):
        t, parts = _timed(pool, calls)
        if sum(parts) != want:
            raise RooflineError(f"the read kernel summed {n} floats to {sum(parts)}, not {want}")
        best = min(best, t) if r else best  # run 0 warms up
    return 4 * n / best


def _triad(k: _Kernels, pool: ThreadPoolExecutor, threads: int, n: int, runs: int) -> float:
    a, b, c = _aligned(n), _aligned(n), _aligned(n)
    _fill_pattern(b)
    _fill_pattern(c, offset=7)
    best = float("inf")
    for r in range(runs + 1):
        s = 0.5 * (r + 1)  # another result each run: a run that wrote nothing fails the check
        calls = [
            lambda lo=lo, hi=hi, s=s: k.triad(a.ctypes.data, b.ctypes.data, c.ctypes.data, s, lo, hi)
            for lo, hi in _chunks(n, threads)
        ]
        t, _ = _timed(pool, calls)
        step = 1 << 22
        for i in range(0, n, step):
            if not np.array_equal(a[i : i + step], b[i : i + step] + np.float32(s) * c[i : i + step]):
                raise RooflineError(f"the triad kernel wrote wrong values in elements {i}..{min(n, i + step)}")
        best = min(best, t) if r else best
    return 12 * n / best


def _fma(k: _Kernels, pool: ThreadPoolExecutor, threads: int, width: int, runs: int) -> float:
    x, y = 0.5, 1.0  # every chain converges to y / (1 - x) = 2 from any start: the loop has to run to get there
    want = 2.0 * _FMA_CHAINS * width
    iters = 1 << 16
    while True:  # calibrate on one thread: a run of about _FMA_TARGET_S
        t0 = time.perf_counter()
        k.fma(x, y, iters)
        t = time.perf_counter() - t0
        if t > _FMA_TARGET_S / 4 or iters > 1 << 34:
            iters = max(iters, int(iters * _FMA_TARGET_S / max(t, 1e-9)))
            break
        iters *= 4
    best = float("inf")
    for r in range(runs + 1):
        t, parts = _timed(pool, [lambda: k.fma(x, y, iters)] * threads)
        if any(abs(p - want) > 1e-3 * want for p in parts):
            raise RooflineError(f"the FMA kernel's chains ended at {parts}, not {want} each")
        best = min(best, t) if r else best
    return threads * iters * _FMA_CHAINS * width * 2 / best


def main(argv: list[str] | None = None) -> int:
    """Measure and print the roofline; returns a process exit code."""
    p = argparse.ArgumentParser(prog="bench/roofline.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=float, default=None, help="array size (default: 4x the last-level cache)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per kernel (best is reported)")
    p.add_argument("--threads", type=int, default=None, help="threads (default: every usable core)")
    args = p.parse_args(argv)
    size = int(args.mib * 2**20) if args.mib else None
    print(measure(size, args.runs, args.threads).describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
