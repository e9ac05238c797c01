"""The CPU runtime: aligned host memory and shared libraries loaded with ctypes.

Loading never compiles: ``load`` takes the bytes ``ClangCompiler`` produced (possibly on
another machine, from a serialised ProgramSpec), checks they are a shared library for this
machine that defines the kernel itself, and dlopens them; the library is closed again when its
program is garbage.

THREADed kernels run on a native worker pool: C threads that spin briefly between launches, then sleep.
A Python pool (``ThreadPoolExecutor``) costs 50-70 us per launch on a 2-core machine (a future, a queue, a
thread woken through a lock, every time), as long as the work of a decode step's 20-100 us kernels. Here the
caller publishes the kernel's address and arguments in shared memory and bumps a generation counter; workers
still spinning (``SPIN_US`` after their last chunk) see it within a microsecond, sleeping ones are woken on a
condition variable. Every thread, the caller among them, claims the next chunk with one compare-and-swap on a
word holding the generation, the chunk count and the next chunk, so a late worker never claims a chunk of a
finished launch, and a worker whose core another process holds delays only the chunk it has.

The pool calls a kernel through a pointer to a function of ``nargs + 1`` 64-bit integer parameters (buffer
addresses, int32 variables, the chunk number): where every parameter is passed in an integer register or an
8-byte stack slot (x86-64, Linux AArch64) that is the kernel's own calling sequence; on Apple's arm64, whose
stack packs 32-bit values, only kernels whose arguments fit in registers use it. Other launches, and machines
where the pool does not build, use the Python pool. The pool library is built once per clang with the C
library and threads (kernels are freestanding) and kept in the compile cache; a forked child starts its own
workers at its first launch.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import math
import platform
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from uops.plugin import (
    Buffer,
    CompilerUnavailableError,
    ElfError,
    HostAllocator,
    Program,
    ProgramLoadError,
    Runtime,
    SharedLibrary,
    SymbolNotDefinedError,
    cache_dir,
    entry_path,
    read_entry,
    read_shared_object,
    write_entry,
)
from uops_cpu_clang import clang_path
from uops_cpu_clang.renderer import cpu_threads

__all__ = [
    "MAX_ARGS",
    "MAX_CHUNKS",
    "SPIN_US",
    "ClangProgram",
    "ClangRuntime",
    "NativePool",
    "cpu_threads",
    "native_pool",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_PLUGIN = __name__.partition(".")[0]


#: id of a live handle -> (a weak reference to it, its data address): ``ndarray.ctypes.data`` costs ~0.8 us, as much
#: as the launch of a small kernel, and a replayed step passes the same handles every time
_addresses: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}


def _forget(key: int, ref: weakref.ref[np.ndarray]) -> None:
    if _addresses.get(key, (None, 0))[0] is ref:
        del _addresses[key]


def _array_address(a: np.ndarray) -> int:
    key = id(a)
    hit = _addresses.get(key)
    if hit is not None and hit[0]() is a:
        return hit[1]
    addr = int(a.ctypes.data)
    _addresses[key] = (weakref.ref(a, functools.partial(_forget, key)), addr)
    return addr


def _address(buf: Any) -> int:
    if isinstance(buf, Buffer):
        buf = buf.handle
    if isinstance(buf, np.ndarray):
        return _array_address(buf)
    if isinstance(buf, int) and not isinstance(buf, bool):
        return buf
    raise TypeError(f"a CPU kernel argument must be a buffer handle (numpy array), a Buffer or an address, got {buf!r}")


#: kernel parameters (buffers and variables, not counting the chunk number) the pool calls directly
MAX_ARGS = 16
#: chunks one launch may have (the claim word keeps the count and the next chunk in 16 bits each)
MAX_CHUNKS = 0xFFFF
#: how long an idle worker spins on the generation before it sleeps: longer than the front end's gap between two
#: eager calls (building and scheduling a softmax or a layernorm takes 0.1-0.3 ms), short enough that a process
#: between bursts of kernels leaves its cores alone. A worker woken from sleep starts its chunk late: in
#: ``bench/ops.py``'s turns a 16M sum took 2.9 ms with 200 us of spin and 2.2-2.5 ms with 2000, a layernorm of
#: 2048^2 1.70 and 1.33-1.37 ms
SPIN_US = 2000
_MAX_WORKERS = 255
#: bytes of freed buffers the allocator keeps for reuse (`HostAllocator`'s ``keep_bytes``): a new buffer's pages
#: fault in on their first write, which costs more than a streaming kernel's own work
KEEP_BYTES = 256 << 20


def _calls(n: int) -> str:
    params = ", ".join(["A"] * n)
    values = ", ".join(f"a[{i}]" for i in range(n))
    return f"  case {n}: ((void (*)({params}))f)({values}); break;"


_SOURCE = (
    r"""
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define MAX_ARGS @MAX_ARGS@
#define MAX_WORKERS @MAX_WORKERS@
#define SPIN_NS (@SPIN_US@L * 1000L)
typedef int64_t A;

#if defined(__x86_64__) || defined(__i386__)
#define RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define RELAX() __asm__ volatile("yield")
#else
#define RELAX() ((void)0)
#endif

/* claim word: generation (32 bits) | chunk count (16) | next chunk (16) */
#define GEN(v) ((uint32_t)((v) >> 32))
#define LIMIT(v) ((uint32_t)(((v) >> 16) & 0xFFFF))
#define NEXT(v) ((uint32_t)((v) & 0xFFFF))

static struct {
  pthread_mutex_t submit, lock;
  pthread_cond_t wake;
  _Atomic uint32_t generation;
  _Atomic uint64_t claim;
  _Atomic int done;
  _Atomic int active;
  int nargs, workers, sleepers;
  void *fn;
  A args[MAX_ARGS];
} P;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void call(void *f, const A *a, int n) {
  switch (n) {
@CALLS@
  default: break;
  }
}

/* claim and run chunks of launch gen until none is left; fields are read only after a successful claim,
   when the launch cannot finish (and the caller cannot overwrite them) before this chunk is done */
static void work(uint32_t gen) {
  for (;;) {
    uint64_t v = atomic_load_explicit(&P.claim, memory_order_acquire);
    if (GEN(v) != gen || NEXT(v) >= LIMIT(v)) return;
    if (!atomic_compare_exchange_weak_explicit(&P.claim, &v, v + 1, memory_order_acq_rel, memory_order_relaxed))
      continue;
    A a[MAX_ARGS + 1];
    int n = P.nargs;
    memcpy(a, P.args, sizeof(A) * (size_t)n);
    a[n] = (A)NEXT(v);
    call(P.fn, a, n + 1);
    atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
  }
}

static void *worker(void *arg) {
  int index = (int)(intptr_t)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  uint32_t seen = atomic_load(&P.generation);
  for (;;) {
    uint32_t g = seen;
    long start = now_ns();
    for (unsigned i = 1; (g = atomic_load_explicit(&P.generation, memory_order_acquire)) == seen; i++) {
      RELAX();
      if ((i & 255) == 0 && now_ns() - start > SPIN_NS) {
        pthread_mutex_lock(&P.lock);
        P.sleepers++;
        while ((g = atomic_load(&P.generation)) == seen) pthread_cond_wait(&P.wake, &P.lock);
        P.sleepers--;
        pthread_mutex_unlock(&P.lock);
        break;
      }
    }
    seen = g;
    if (index < atomic_load_explicit(&P.active, memory_order_relaxed)) work(g);
  }
  return NULL;
}

static void reset(void) {
  memset(&P, 0, sizeof(P));
  pthread_mutex_init(&P.submit, NULL);
  pthread_mutex_init(&P.lock, NULL);
  pthread_cond_init(&P.wake, NULL);
}

/* the child of a fork has none of its parent's workers and must not inherit its locks' state */
static void init(void) {
  reset();
  pthread_atfork(NULL, NULL, reset);
}

/* run fn's chunks 0..chunks-1 on the caller and threads-1 workers; 0, or -1 when the launch does not fit */
int uops_pool_run(void *fn, const A *args, int nargs, int chunks, int threads) {
  if (nargs < 0 || nargs > MAX_ARGS || chunks < 1 || chunks > 0xFFFF) return -1;
  pthread_once(&once, init);
  pthread_mutex_lock(&P.submit);
  int want = threads - 1 < MAX_WORKERS ? threads - 1 : MAX_WORKERS;
  while (P.workers < want) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int failed = pthread_create(&t, &attr, worker, (void *)(intptr_t)P.workers);
    pthread_attr_destroy(&attr);
    if (failed) break; /* fewer workers: the caller runs more chunks */
    P.workers++;
  }
  P.fn = fn;
  P.nargs = nargs;
  memcpy(P.args, args, sizeof(A) * (size_t)nargs);
  atomic_store_explicit(&P.active, want, memory_order_relaxed);
  atomic_store_explicit(&P.done, 0, memory_order_relaxed);
  uint32_t gen = atomic_load(&P.generation) + 1;
  atomic_store_explicit(&P.claim, ((uint64_t)gen << 32) | ((uint64_t)chunks << 16), memory_order_release);
  atomic_store_explicit(&P.generation, gen, memory_order_release);
  pthread_mutex_lock(&P.lock);
  if (P.sleepers) pthread_cond_broadcast(&P.wake);
  pthread_mutex_unlock(&P.lock);
  work(gen);
  for (unsigned i = 1; atomic_load_explicit(&P.done, memory_order_acquire) < chunks; i++) {
    RELAX();
    if ((i & 1023) == 0) sched_yield(); /* a worker lost its core mid-chunk */
  }
  pthread_mutex_unlock(&P.submit);
  return 0;
}

int uops_pool_workers(void) { return P.workers; }
""".replace("@MAX_ARGS@", str(MAX_ARGS))
    .replace("@MAX_WORKERS@", str(_MAX_WORKERS))
    .replace("@SPIN_US@", str(SPIN_US))
    .replace("@CALLS@", "\n".join(_calls(n) for n in range(1, MAX_ARGS + 2)))
)

#: parameters passed in registers on Apple's arm64, whose stack packs 32-bit values: the limit there
_REGISTER_ARGS = 8
_apple_arm = sys.platform == "darwin" and platform.machine() in ("arm64", "aarch64")


class NativePool:
    """The built pool library: ``run`` launches a THREADed kernel's chunks across the cores."""

    def __init__(self, lib: SharedLibrary) -> None:
        self._lib = lib
        self._run = lib.function("uops_pool_run")
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self._workers = lib.function("uops_pool_workers")
        self._workers.restype = ctypes.c_int

    def run(self, fn: int, args: Sequence[int], chunks: int, threads: int) -> bool:
        """Run chunks ``0..chunks-1`` of the kernel at address ``fn`` with ``args`` (64-bit integers) on
        ``threads`` threads, the caller among them; False (nothing ran) when the launch does not fit the pool."""
        n = len(args)
        if n > MAX_ARGS or (_apple_arm and n + 1 > _REGISTER_ARGS) or not 1 <= chunks <= MAX_CHUNKS:
            return False
        return self._run(fn, (ctypes.c_int64 * max(n, 1))(*args), n, chunks, threads) == 0

    def workers(self) -> int:
        """Worker threads started in this process (the caller not counted)."""
        return int(self._workers())


_native_lock = threading.Lock()
_native: NativePool | None = None
_failure: str | None = None


def _build() -> bytes:
    clang = clang_path()
    with tempfile.TemporaryDirectory(prefix="uops-pool-") as td:
        out = Path(td, "pool.so")
        cmd = [clang, "-x", "c", "-", "-O2", "-fPIC", "-shared", "-pthread", "-o", str(out)]
        r = subprocess.run(cmd, input=_SOURCE, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed: {(r.stderr or r.stdout).strip()}")
        return out.read_bytes()


def _load() -> NativePool:
    from uops_cpu_clang.compiler import ClangCompiler

    key = hashlib.sha256(f"{_SOURCE}\0{ClangCompiler().process_identity()}".encode()).hexdigest()
    d = cache_dir()
    path = entry_path(d, f"cpu-pool-{key}") if d is not None else None

    def check(data: bytes) -> None:
        read_shared_object(data, "CPU worker pool library")

    data = read_entry(path, check) if path is not None else None
    if data is None:
        data = _build()
        if path is not None:
            write_entry(path, data)
    return NativePool(SharedLibrary(data, what="CPU worker pool library", prefix="uops-cpu-pool-"))


def native_pool() -> NativePool | None:
    """The process's pool, built or loaded on first use; None (with one warning saying why) where it cannot be."""
    global _native, _failure
    if _native is not None or _failure is not None:
        return _native
    with _native_lock:
        if _native is None and _failure is None:
            try:
                _native = _load()
            except (OSError, ValueError, subprocess.SubprocessError, CompilerUnavailableError) as e:
                _failure = str(e)
                warnings.warn(
                    f"uops CPU: the native worker pool is unavailable ({e}); THREADed kernels use a Python pool, "
                    "with ~50 us more per launch",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return _native


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _workers() -> ThreadPoolExecutor:
    global _pool, _pool_size
    n = cpu_threads()
    if _pool is None or _pool_size != n:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool, _pool_size = ThreadPoolExecutor(max_workers=n, thread_name_prefix="uops-cpu"), n
    return _pool


class ClangProgram(Program):
    """One function of a loaded shared library; buffer pointers first, then int32 vals.

    A kernel with a THREAD axis has ``global_size[0]`` chunks and takes the chunk number as a
    last int argument; the chunks run on ``cpu_threads()`` threads of the native pool
    (``uops_cpu_clang.pool``), the calling thread among them, each taking the next chunk when it
    is free; where that pool does not apply, on a Python pool (ctypes releases the GIL during
    each call). Other kernels run on the caller.
    """

    def __init__(self, name: str, lib: bytes) -> None:
        self.name = name
        try:
            self._lib = SharedLibrary(lib, what=f"kernel library for {name!r}", prefix=f"uops-{name[:40]}-")
            self._fxn = self._lib.function(name)
        except (ElfError, SymbolNotDefinedError, OSError) as e:
            raise ProgramLoadError(_PLUGIN, name, e) from e
        self._fxn.restype = None
        self._signature: tuple[int, int, bool] | None = None
        self._entry = int(ctypes.cast(self._fxn, ctypes.c_void_p).value or 0)

    def __call__(
        self,
        *bufs: Any,
        global_size: tuple[int, ...] = (1, 1, 1),
        local_size: tuple[int, ...] = (1, 1, 1),
        vals: tuple[int, ...] = (),
        wait: bool = False,
    ) -> float | None:
        """Run the kernel (a THREADed one's chunks on the workers); with ``wait`` return the elapsed seconds."""
        ints = [_address(b) for b in bufs]
        for v in vals:
            iv = int(v)
            if not _INT32_MIN <= iv <= _INT32_MAX:
                raise ValueError(f"{self.name}: kernel variable value {v} does not fit in int32")
            ints.append(iv)
        chunks = math.prod(global_size)
        t0 = time.perf_counter()
        if chunks <= 1:
            self._typed(len(bufs), len(vals), threaded=False)(*ints)
        else:
            self._run_chunks(ints, len(bufs), len(vals), chunks)
        return time.perf_counter() - t0 if wait else None

    def _typed(self, n_bufs: int, n_vals: int, threaded: bool) -> Any:
        """The function with ctypes ``argtypes`` for this call's parameters, so plain ints are passed as they are
        (a ``c_void_p`` per argument costs more than a small kernel's launch); set again when they change."""
        sig = (n_bufs, n_vals, threaded)
        if self._signature != sig:
            self._fxn.argtypes = [ctypes.c_void_p] * n_bufs + [ctypes.c_int32] * (n_vals + threaded)
            self._signature = sig
        return self._fxn

    def _run_chunks(self, ints: list[int], n_bufs: int, n_vals: int, chunks: int) -> None:
        workers = min(cpu_threads(), chunks)
        pool = native_pool() if workers > 1 else None
        if pool is not None and pool.run(self._entry, ints, chunks, workers):
            return
        fxn = self._typed(n_bufs, n_vals, threaded=True)
        if workers == 1:
            for c in range(chunks):
                fxn(*ints, c)
            return

        # each worker claims the next chunk when it is free (count's __next__ is atomic under the
        # GIL): a worker whose core is busy elsewhere then delays only the chunk it holds
        claim = itertools.count().__next__

        def share() -> None:
            while (c := claim()) < chunks:
                fxn(*ints, c)

        futs = [_workers().submit(share) for _ in range(1, workers)]
        share()
        for f in futs:
            f.result()


class ClangRuntime(Runtime):
    """Device "CPU": 64-byte aligned numpy-backed memory (zero-copy views) and ctypes launches."""

    def __init__(self, device: str = "CPU") -> None:
        self.device = device
        self.allocator = HostAllocator(align=64, keep_bytes=KEEP_BYTES)

    def load(self, name: str, lib: bytes) -> ClangProgram:
        """dlopen the checked bytes and return the kernel ``name`` the library defines; never compiles."""
        return ClangProgram(name, lib)

    def synchronize(self) -> None:
        """Kernels run synchronously on the calling thread: nothing to wait for."""
        return None
