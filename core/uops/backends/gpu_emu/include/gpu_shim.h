/* gpu_shim.h: run GPU-style kernels (CUDA, HIP, MSL ...) on the CPU, so GPU renderers are proven in CI.
 *
 * Why: CI has no GPU. Compiling the *rendered* GPU source for the host with this header and a
 * dialect prelude (uops.backends.gpu_emu) and launching it over a grid checks the numbers the GPU
 * source computes, not a re-implementation of them.
 *
 * This header is dialect-neutral: it provides the launch context, a block barrier, block-shared
 * storage, 16-bit floats that round like the hardware, the entry thunk and the launcher. Each
 * plugin's Dialect maps its own vocabulary onto it (CUDA: threadIdx, __syncthreads, __half ...;
 * HIP with amdgcn builtins: __builtin_amdgcn_workitem_id_x() ...) in a prelude that the emulating
 * compiler force-includes after this file.
 *
 * Two halves in one file:
 *   - kernel side (default): small, includes only <stdint.h>, so a kernel compiles in about a
 *     tenth of a second.
 *   - runtime side (#define UOPS_SHIM_RUNTIME): the launcher, built once into its own shared
 *     library by uops.backends.gpu_emu. It runs blocks in parallel on std::threads; inside a block,
 *     each GPU thread is a fiber (ucontext) on the same OS thread, so uops_shim_barrier is a
 *     real barrier (no fiber passes barrier k before all reached it) and UOPS_SHIM_SHARED
 *     (static thread_local) is one copy per block in flight. Kernels without a barrier run
 *     their threads one after another, with no fibers.
 *
 * Execution model: a GPU thread never runs concurrently with another thread of its block
 * (fibers interleave only at barriers), blocks do run concurrently with each other.
 *
 * NOT covered (a kernel that needs these gets wrong results or fails to compile):
 *   - warp/wave-level operations other than xor shuffles (ballots, votes, lockstep execution without
 *     barriers), cooperative groups, matrix cores; a shuffle is two block barriers, so every thread of
 *     the block must reach it
 *   - atomics beyond what a dialect prelude maps; memory fences are full barriers at best
 *   - dynamic shared memory, constant and texture memory
 *   - a barrier inside divergent code: a thread that returned counts as arrived
 *   - device-side printf formatting of half, device malloc, dynamic parallelism
 *   - fast-math intrinsics are computed at full precision
 *   - half/bfloat16 arithmetic is done in float and rounded once per operation; double->half
 *     goes through float (double rounding)
 *   - fiber stacks are UOPS_SHIM_STACK bytes (default 256 KiB): huge local arrays overflow
 *   - no memory checking: an out-of-bounds access corrupts host memory or crashes the process
 *     (the Python launcher refuses a block larger than the kernel's launch bound, as a GPU does)
 */
#ifndef UOPS_GPU_SHIM_H
#define UOPS_GPU_SHIM_H

#include <stdint.h>

/* The C math library, declared here rather than by <math.h>: in C++ mode that header pulls
   in <cmath> (20k lines), which would triple the time to compile each kernel. */
#define UOPS_SHIM_MATH1(fn) extern "C" double fn(double) noexcept; extern "C" float fn##f(float) noexcept;
#define UOPS_SHIM_MATH2(fn) extern "C" double fn(double, double) noexcept; extern "C" float fn##f(float, float) noexcept;
UOPS_SHIM_MATH1(sqrt) UOPS_SHIM_MATH1(cbrt) UOPS_SHIM_MATH1(exp) UOPS_SHIM_MATH1(exp2) UOPS_SHIM_MATH1(expm1)
UOPS_SHIM_MATH1(log) UOPS_SHIM_MATH1(log2) UOPS_SHIM_MATH1(log10) UOPS_SHIM_MATH1(log1p)
UOPS_SHIM_MATH1(sin) UOPS_SHIM_MATH1(cos) UOPS_SHIM_MATH1(tan) UOPS_SHIM_MATH1(asin) UOPS_SHIM_MATH1(acos)
UOPS_SHIM_MATH1(atan) UOPS_SHIM_MATH1(sinh) UOPS_SHIM_MATH1(cosh) UOPS_SHIM_MATH1(tanh) UOPS_SHIM_MATH1(erf)
UOPS_SHIM_MATH1(trunc) UOPS_SHIM_MATH1(floor) UOPS_SHIM_MATH1(ceil) UOPS_SHIM_MATH1(round) UOPS_SHIM_MATH1(rint)
UOPS_SHIM_MATH1(fabs)
UOPS_SHIM_MATH2(pow) UOPS_SHIM_MATH2(fmax) UOPS_SHIM_MATH2(fmin) UOPS_SHIM_MATH2(fmod) UOPS_SHIM_MATH2(atan2)
UOPS_SHIM_MATH2(copysign)
#undef UOPS_SHIM_MATH1
#undef UOPS_SHIM_MATH2
extern "C" double fma(double, double, double) noexcept;
extern "C" float fmaf(float, float, float) noexcept;
#define memcpy __builtin_memcpy

/* ------------------------------------------------------------------------------------ */
/* the launch context: which GPU thread of which block is running                         */

struct uops_dim3 {
  unsigned int x, y, z;
};

struct uops_shim_ctx {
  uops_dim3 thread_idx, block_idx, block_dim, grid_dim;
  void (*barrier)(void *sched); /* switches to the next fiber of the block */
  void *sched;
  unsigned long long *local_reads; /* this GPU thread's count of counted block-shared reads */
};

/* the running GPU thread's context: set by the launcher before a fiber runs, and restored
   by uops_shim_barrier after the switch back (other fibers of this OS thread changed it).
   A dialect's launch indices read its fields. */
static thread_local const uops_shim_ctx *uops_shim_cur;

/* a block-wide barrier: a dialect maps its barrier (__syncthreads, s_barrier ...) onto this */
static inline void uops_shim_barrier(void) {
  const uops_shim_ctx *me = uops_shim_cur;
  me->barrier(me->sched);
  uops_shim_cur = me;
}

/* block-shared memory: one copy per block in flight, since a block runs on one OS thread and
   its GPU threads are fibers of that OS thread */
#define UOPS_SHIM_SHARED static thread_local

/* counted block-shared arrays: a compiler built to count (EmulatedCompiler.counting) declares each local array
   smemN of the rendered source as storage plus a uops_shim_cptr named smemN, so every read through it adds one to
   the running GPU thread's local_reads; the launcher reports the largest count of any thread (see
   uops_shim_launch). Reads are what a combine's steps cost: a serial combine reads one element per partial. */
template <class T>
struct uops_shim_cref {
  T *p;
  operator T() const {
    ++*uops_shim_cur->local_reads;
    return *p;
  }
  const uops_shim_cref &operator=(T v) const {
    *p = v;
    return *this;
  }
};
template <class T>
struct uops_shim_cptr {
  T *p;
  uops_shim_cptr operator+(long long i) const { return uops_shim_cptr{p + i}; }
  uops_shim_cref<T> operator*() const { return uops_shim_cref<T>{p}; }
};
template <class T>
static inline uops_shim_cptr<T> uops_shim_counted(T *p) {
  return uops_shim_cptr<T>{p};
}

/* warp exchanges (shuffles): the value v of the block's GPU thread `from` (by linear index). Emulated with two
   block barriers, so every thread of the block must reach each exchange, as the lowering's butterflies do (a GPU
   needs only the warp); a dialect lists its shuffle calls in Dialect.exchange_tokens so such a kernel gets fibers. */
static inline unsigned uops_shim_linear_thread(void) {
  const uops_shim_ctx *c = uops_shim_cur;
  return c->thread_idx.x + c->block_dim.x * (c->thread_idx.y + c->block_dim.y * c->thread_idx.z);
}
template <class T>
static inline T uops_shim_exchange(T v, unsigned from) {
  static thread_local T slots[1024];
  slots[uops_shim_linear_thread()] = v;
  uops_shim_barrier();
  T r = slots[from];
  uops_shim_barrier();
  return r;
}
/* CUDA's __shfl_xor_sync, Metal's simd_shuffle_xor: lane ^ mask */
template <class T>
static inline T uops_shim_shuffle_xor(T v, unsigned mask) {
  return uops_shim_exchange(v, uops_shim_linear_thread() ^ mask);
}
/* amdgcn ds_swizzle in its bit mode (offset bit 15 clear): lane ((lane & and) | or) ^ xor within each 32 lanes */
static inline int uops_shim_swizzle(int v, int pattern) {
  const unsigned t = uops_shim_linear_thread(), p = (unsigned)pattern;
  if (p & 0x8000u) __builtin_trap(); /* the quad-permute mode is not emulated */
  return uops_shim_exchange(v, ((((t & 31u) & (p & 31u)) | ((p >> 5) & 31u)) ^ ((p >> 10) & 31u)) | (t & ~31u));
}

/* ------------------------------------------------------------------------------------ */
/* half and bfloat16: 16-bit storage, float arithmetic, round-to-nearest-even per op      */

static inline uint32_t uops_shim_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float uops_shim_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t uops_shim_f32_to_f16(float f) {
  const uint32_t f32_inf = 255u << 23, f16_overflow = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = uops_shim_f2u(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t out;
  if (u >= f16_overflow) {
    out = u > f32_inf ? 0x7e00 : 0x7c00; /* NaN stays NaN, the rest is infinity */
  } else if (u < (113u << 23)) {       /* below the smallest normal half: a subnormal */
    /* the float add rounds to nearest even at the half subnormal's last place */
    out = (uint16_t)(uops_shim_f2u(uops_shim_u2f(u) + uops_shim_u2f(denorm_magic)) - denorm_magic);
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += (uint32_t)((15 - 127) * (1 << 23)) + 0xfffu + mant_odd;
    out = (uint16_t)(u >> 13);
  }
  return (uint16_t)(out | (sign >> 16));
}

static inline float uops_shim_f16_to_f32(uint16_t h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (uint32_t)(h & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23; /* inf / NaN */
  } else if (exp == 0) {     /* zero / subnormal: renormalise */
    o += 1u << 23;
    o = uops_shim_f2u(uops_shim_u2f(o) - uops_shim_u2f(113u << 23));
  }
  return uops_shim_u2f(o | ((uint32_t)(h & 0x8000u) << 16));
}

static inline uint16_t uops_shim_f32_to_bf16(float f) {
  const uint32_t u = uops_shim_f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float uops_shim_bf16_to_f32(uint16_t b) { return uops_shim_u2f((uint32_t)b << 16); }

#define UOPS_SHIM_F16_TYPE(T, TO, FROM)                                                      \
  struct __attribute__((aligned(2))) T {                                                                    \
    uint16_t bits;                                                                           \
    T() = default;                                                                           \
    T(float f) : bits(TO(f)) {}                                                              \
    T(double f) : bits(TO((float)f)) {}                                                      \
    T(int v) : bits(TO((float)v)) {}                                                         \
    T(unsigned int v) : bits(TO((float)v)) {}                                                \
    T(long long v) : bits(TO((float)v)) {}                                                   \
    T(unsigned long long v) : bits(TO((float)v)) {}                                          \
    T(long v) : bits(TO((float)v)) {}                                                        \
    T(unsigned long v) : bits(TO((float)v)) {}                                               \
    T(short v) : bits(TO((float)v)) {}                                                       \
    T(unsigned short v) : bits(TO((float)v)) {}                                              \
    T(signed char v) : bits(TO((float)v)) {}                                                 \
    T(unsigned char v) : bits(TO((float)v)) {}                                               \
    T(bool v) : bits(TO(v ? 1.0f : 0.0f)) {}                                                 \
    operator float() const { return FROM(bits); }                                            \
  };                                                                                         \
  static inline T operator+(T a, T b) { return T((float)a + (float)b); }                     \
  static inline T operator-(T a, T b) { return T((float)a - (float)b); }                     \
  static inline T operator*(T a, T b) { return T((float)a * (float)b); }                     \
  static inline T operator/(T a, T b) { return T((float)a / (float)b); }                     \
  static inline T operator-(T a) {                                                           \
    T r;                                                                                     \
    r.bits = (uint16_t)(a.bits ^ 0x8000u);                                                   \
    return r;                                                                                \
  }                                                                                          \
  static inline T &operator+=(T &a, T b) { return a = a + b; }                               \
  static inline T &operator-=(T &a, T b) { return a = a - b; }                               \
  static inline T &operator*=(T &a, T b) { return a = a * b; }                               \
  static inline T &operator/=(T &a, T b) { return a = a / b; }                               \
  static inline bool operator<(T a, T b) { return (float)a < (float)b; }                     \
  static inline bool operator>(T a, T b) { return (float)a > (float)b; }                     \
  static inline bool operator<=(T a, T b) { return (float)a <= (float)b; }                   \
  static inline bool operator>=(T a, T b) { return (float)a >= (float)b; }                   \
  static inline bool operator==(T a, T b) { return (float)a == (float)b; }                   \
  static inline bool operator!=(T a, T b) { return (float)a != (float)b; }

UOPS_SHIM_F16_TYPE(uops_shim_half, uops_shim_f32_to_f16, uops_shim_f16_to_f32)
UOPS_SHIM_F16_TYPE(uops_shim_bf16, uops_shim_f32_to_bf16, uops_shim_bf16_to_f32)
#undef UOPS_SHIM_F16_TYPE

/* ------------------------------------------------------------------------------------ */
/* the entry thunk uops.backends.gpu_emu generates for each kernel                        */

/* an index sequence without <utility> (which costs more to parse than a kernel) */
template <unsigned long... I>
struct uops_shim_seq {};
template <unsigned long N, unsigned long... I>
struct uops_shim_make_seq : uops_shim_make_seq<N - 1, N - 1, I...> {};
template <unsigned long... I>
struct uops_shim_make_seq<0, I...> {
  typedef uops_shim_seq<I...> type;
};

/* call f with its parameters read from args[i] (a pointer to the i-th argument's value) */
template <class... A, unsigned long... I>
static inline void uops_shim_call_impl(void (*f)(A...), void **args, uops_shim_seq<I...>) {
  f(*static_cast<A *>(args[I])...);
}
template <class... A>
static inline void uops_shim_call(void (*f)(A...), void **args) {
  uops_shim_call_impl(f, args, typename uops_shim_make_seq<sizeof...(A)>::type{});
}
#define UOPS_SHIM_ENTRY(name)                                                                \
  extern "C" void uops_shim_entry_##name(void **args, const uops_shim_ctx *ctx) {            \
    uops_shim_cur = ctx;                                                                     \
    uops_shim_call(name, args);                                                              \
  }

/* ------------------------------------------------------------------------------------ */
/* runtime side: the launcher (built once into its own shared library)                    */

#ifdef UOPS_SHIM_RUNTIME
#undef memcpy
#include <stdio.h>
#include <stdlib.h>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <thread>
#include <vector>

typedef void (*uops_shim_entry_fn)(void **args, const uops_shim_ctx *ctx);

namespace {

enum FiberState { READY, AT_BARRIER, DONE };

/* A fiber starts on its own stack through ucontext once, then switches by _setjmp/_longjmp, which save no signal
   mask (swapcontext makes a system call for it at every switch, and a block of 256 threads switches 512 times
   per barrier). A fiber never returns through uc_link: at its end it jumps back to the scheduler. */
struct Fiber {
  ucontext_t uc;
  jmp_buf resume; /* where it continues after its barrier */
  bool started;
  uops_shim_ctx ctx;
  FiberState state;
  unsigned long long local_reads;
};

/* one per worker OS thread: runs one block at a time */
struct BlockRunner {
  jmp_buf scheduler; /* where a fiber that reached a barrier or its end returns control */
  std::vector<Fiber> fibers;
  char *stacks = nullptr;
  size_t stack_size = 0, nstacks = 0;
  int current = 0;
  uops_shim_entry_fn entry = nullptr;
  void **args = nullptr;

  ~BlockRunner() {
    if (stacks) munmap(stacks, stack_size * nstacks);
  }
};

thread_local BlockRunner *tls_runner;

void fiber_barrier(void *sched) {
  BlockRunner *r = static_cast<BlockRunner *>(sched);
  Fiber &f = r->fibers[r->current];
  f.state = AT_BARRIER;
  if (_setjmp(f.resume) == 0) _longjmp(r->scheduler, 1);
}

void no_barrier(void *) {
  fprintf(stderr, "uops gpu shim: a barrier reached in a kernel launched without barrier support "
                  "(uops.backends.gpu_emu did not see a barrier in its source)\n");
  abort();
}

void fiber_main() {
  BlockRunner *r = tls_runner;
  Fiber &f = r->fibers[r->current];
  r->entry(r->args, &f.ctx);
  f.state = DONE;
  _longjmp(r->scheduler, 1);
}

void set_thread_idx(uops_shim_ctx &c, unsigned t) {
  c.thread_idx.x = t % c.block_dim.x;
  c.thread_idx.y = (t / c.block_dim.x) % c.block_dim.y;
  c.thread_idx.z = t / (c.block_dim.x * c.block_dim.y);
}

/* what a block's run measured: the most counted local reads of one of its threads, and its rounds (the
   barrier phases: one more than the barriers each thread passed) */
struct BlockStats {
  unsigned long long local_reads, rounds;
};

/* returns 0, or -1 with a message in err */
int run_block(BlockRunner &r, const uops_shim_ctx &base, int barriers, BlockStats &stats, char *err, size_t errlen) {
  const unsigned n = base.block_dim.x * base.block_dim.y * base.block_dim.z;
  stats = BlockStats{0, 1};
  if (!barriers) {
    uops_shim_ctx c = base;
    unsigned long long reads = 0;
    c.barrier = no_barrier;
    c.local_reads = &reads;
    for (unsigned t = 0; t < n; t++) {
      set_thread_idx(c, t);
      reads = 0;
      r.entry(r.args, &c);
      if (reads > stats.local_reads) stats.local_reads = reads;
    }
    return 0;
  }
  if (r.nstacks < n) {
    if (r.stacks) munmap(r.stacks, r.stack_size * r.nstacks);
    void *m = mmap(nullptr, r.stack_size * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
      r.stacks = nullptr;
      r.nstacks = 0;
      snprintf(err, errlen, "cannot map %zu bytes of fiber stacks for %u threads", r.stack_size * n, n);
      return -1;
    }
    r.stacks = static_cast<char *>(m);
    r.nstacks = n;
  }
  r.fibers.resize(n);
  for (unsigned t = 0; t < n; t++) {
    Fiber &f = r.fibers[t];
    f.ctx = base;
    f.ctx.barrier = fiber_barrier;
    f.ctx.sched = &r;
    f.local_reads = 0;
    f.ctx.local_reads = &f.local_reads;
    set_thread_idx(f.ctx, t);
    f.state = READY;
    f.started = false;
    if (getcontext(&f.uc) != 0) {
      snprintf(err, errlen, "getcontext failed");
      return -1;
    }
    f.uc.uc_stack.ss_sp = r.stacks + (size_t)t * r.stack_size;
    f.uc.uc_stack.ss_size = r.stack_size;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, fiber_main, 0);
  }
  tls_runner = &r;
  unsigned alive = n;
  for (stats.rounds = 0; alive; stats.rounds++) {
    /* one round: every live fiber runs up to its next barrier or its end */
    for (unsigned t = 0; t < n; t++) {
      Fiber &f = r.fibers[t];
      if (f.state == DONE) continue;
      r.current = (int)t;
      f.state = READY;
      if (_setjmp(r.scheduler) == 0) {
        if (f.started) _longjmp(f.resume, 1);
        f.started = true;
        setcontext(&f.uc);
        snprintf(err, errlen, "setcontext failed");
        return -1;
      }
      if (f.state == DONE) alive--;
    }
  }
  for (unsigned t = 0; t < n; t++)
    if (r.fibers[t].local_reads > stats.local_reads) stats.local_reads = r.fibers[t].local_reads;
  return 0;
}

void atomic_max(std::atomic<unsigned long long> &a, unsigned long long v) {
  unsigned long long old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
}

}  // namespace

extern "C" {

/* Launch entry over grid x block. threads <= 0: one worker per hardware thread (or
   $UOPS_SHIM_THREADS). stats (when not null) receives the most counted local reads of any GPU thread and the
   most rounds (barrier phases) of any block. Returns 0, or -1 with a message in err. */
int uops_shim_launch(uops_shim_entry_fn entry, void **args, const unsigned *grid, const unsigned *block, int barriers,
                     int threads, unsigned long long *stats, char *err, size_t errlen) {
  for (int i = 0; i < 3; i++) {
    if (grid[i] == 0 || block[i] == 0) {
      snprintf(err, errlen, "empty launch: grid (%u, %u, %u) block (%u, %u, %u)", grid[0], grid[1], grid[2], block[0],
               block[1], block[2]);
      return -1;
    }
  }
  const unsigned long long nblocks = (unsigned long long)grid[0] * grid[1] * grid[2];
  size_t stack_size = 256 * 1024;
  if (const char *s = getenv("UOPS_SHIM_STACK")) stack_size = strtoull(s, nullptr, 10);
  if (threads <= 0) {
    const char *s = getenv("UOPS_SHIM_THREADS");
    threads = s ? atoi(s) : (int)std::thread::hardware_concurrency();
    if (threads <= 0) threads = 1;
  }
  if ((unsigned long long)threads > nblocks) threads = (int)nblocks;

  std::atomic<unsigned long long> next{0}, most_reads{0}, most_rounds{0};
  std::atomic<int> failed{0};
  auto work = [&]() {
    BlockRunner r;
    r.entry = entry;
    r.args = args;
    r.stack_size = stack_size;
    uops_shim_ctx base{};
    base.block_dim = {block[0], block[1], block[2]};
    base.grid_dim = {grid[0], grid[1], grid[2]};
    for (;;) {
      const unsigned long long b = next.fetch_add(1);
      if (b >= nblocks || failed.load()) break;
      base.block_idx.x = (unsigned)(b % grid[0]);
      base.block_idx.y = (unsigned)((b / grid[0]) % grid[1]);
      base.block_idx.z = (unsigned)(b / ((unsigned long long)grid[0] * grid[1]));
      char local_err[256];
      BlockStats bs;
      if (run_block(r, base, barriers, bs, local_err, sizeof local_err) != 0) {
        if (failed.exchange(1) == 0) snprintf(err, errlen, "%s", local_err);
        break;
      }
      atomic_max(most_reads, bs.local_reads);
      atomic_max(most_rounds, bs.rounds);
    }
  };
  if (threads == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve((size_t)threads);
    for (int i = 0; i < threads; i++) pool.emplace_back(work);
    for (auto &t : pool) t.join();
  }
  if (stats) {
    stats[0] = most_reads.load();
    stats[1] = most_rounds.load();
  }
  return failed.load() ? -1 : 0;
}

}  // extern "C"
#endif /* UOPS_SHIM_RUNTIME */

#endif /* UOPS_GPU_SHIM_H */
