/* gpu_shim.h: run CUDA/HIP-style kernels on the CPU, so GPU renderers are proven in CI.
 *
 * Why: CI has no GPU. Compiling the *rendered* GPU source for the host with this header
 * (clang++ -include gpu_shim.h) and launching it through uops.backends.gpu_emu checks the numbers
 * the GPU source computes, not a re-implementation of them.
 *
 * Two halves in one file:
 *   - kernel side (default): the CUDA vocabulary a kernel uses (__global__, __device__,
 *     __shared__, threadIdx/blockIdx/blockDim/gridDim, __syncthreads, half/bfloat16,
 *     vector types, the math and atomic functions renderers emit). Small, includes only
 *     <stdint.h>, so a kernel compiles in about a tenth of a second.
 *   - runtime side (#define UOPS_SHIM_RUNTIME): the launcher, built once into its own shared
 *     library by uops.backends.gpu_emu. It runs blocks in parallel on std::threads; inside a block,
 *     each CUDA thread is a fiber (ucontext) on the same OS thread, so __syncthreads is a
 *     real barrier (no fiber passes barrier k before all reached it) and __shared__
 *     (static thread_local) is one copy per block in flight. Kernels without a barrier run
 *     their threads one after another, with no fibers.
 *
 * Execution model: a CUDA thread never runs concurrently with another thread of its block
 * (fibers interleave only at barriers), blocks do run concurrently with each other.
 *
 * NOT covered (a kernel that needs these gets wrong results or fails to compile):
 *   - warp-level operations: __shfl*_sync, __ballot_sync, __any/__all, warp-synchronous code
 *     that relies on lockstep execution without barriers, cooperative groups, tensor cores
 *   - atomics other than atomicAdd/atomicMax/atomicMin/atomicExch on 32/64-bit int and
 *     atomicAdd on float/double; memory fences are full barriers at best
 *   - dynamic shared memory (extern __shared__ T x[]), __constant__ and texture memory
 *   - __syncthreads inside divergent code: a thread that returned counts as arrived
 *   - device-side printf formatting of half, device malloc, dynamic parallelism
 *   - fast-math intrinsics are computed at full precision (__expf == expf)
 *   - half/bfloat16 arithmetic is done in float and rounded once per operation; double->half
 *     goes through float (double rounding)
 *   - fiber stacks are UOPS_SHIM_STACK bytes (default 256 KiB): huge local arrays overflow
 *   - no memory checking: an out-of-bounds access corrupts host memory or crashes the process
 *   - __launch_bounds__ is not enforced: a block larger than the bounds runs here, fails on a GPU
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
/* qualifiers                                                                             */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* per block: a block runs on one OS thread, and its threads are fibers of that OS thread */
#define __shared__ static thread_local

/* ------------------------------------------------------------------------------------ */
/* launch indices                                                                         */

struct uops_dim3 {
  unsigned int x, y, z;
};
typedef uops_dim3 uint3;

struct uops_shim_ctx {
  uops_dim3 thread_idx, block_idx, block_dim, grid_dim;
  void (*barrier)(void *sched); /* switches to the next fiber of the block */
  void *sched;
};

/* the running CUDA thread's context: set by the launcher before a fiber runs, and restored
   by __syncthreads after the switch back (other fibers of this OS thread changed it) */
static thread_local const uops_shim_ctx *uops_shim_cur;

#define threadIdx (uops_shim_cur->thread_idx)
#define blockIdx (uops_shim_cur->block_idx)
#define blockDim (uops_shim_cur->block_dim)
#define gridDim (uops_shim_cur->grid_dim)
#define warpSize 32

static inline void __syncthreads(void) {
  const uops_shim_ctx *me = uops_shim_cur;
  me->barrier(me->sched);
  uops_shim_cur = me;
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

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
  struct __align__(2) T {                                                                    \
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

UOPS_SHIM_F16_TYPE(__half, uops_shim_f32_to_f16, uops_shim_f16_to_f32)
UOPS_SHIM_F16_TYPE(__nv_bfloat16, uops_shim_f32_to_bf16, uops_shim_bf16_to_f32)
#undef UOPS_SHIM_F16_TYPE
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat16 hip_bfloat16;

static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline float __half2float(__half h) { return (float)h; }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
static inline __half hexp2(__half h) { return __half(exp2f((float)h)); }
static inline __half hlog2(__half h) { return __half(log2f((float)h)); }
static inline __half hsqrt(__half h) { return __half(sqrtf((float)h)); }
static inline __half hsin(__half h) { return __half(sinf((float)h)); }
static inline __half hrcp(__half h) { return __half(1.0f / (float)h); }
static inline __half htrunc(__half h) { return __half(truncf((float)h)); }
static inline __half __hmax(__half a, __half b) { return (float)a < (float)b ? b : a; }
static inline __nv_bfloat16 hexp2(__nv_bfloat16 h) { return __nv_bfloat16(exp2f((float)h)); }
static inline __nv_bfloat16 hlog2(__nv_bfloat16 h) { return __nv_bfloat16(log2f((float)h)); }
static inline __nv_bfloat16 hsqrt(__nv_bfloat16 h) { return __nv_bfloat16(sqrtf((float)h)); }
static inline __nv_bfloat16 hsin(__nv_bfloat16 h) { return __nv_bfloat16(sinf((float)h)); }
static inline __nv_bfloat16 hrcp(__nv_bfloat16 h) { return __nv_bfloat16(1.0f / (float)h); }
static inline __nv_bfloat16 htrunc(__nv_bfloat16 h) { return __nv_bfloat16(truncf((float)h)); }
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b ? b : a; }

/* ------------------------------------------------------------------------------------ */
/* vector types (CUDA's layout and alignment)                                             */

#define UOPS_SHIM_VEC(T, N2, N3, N4, A2, A4)                                                 \
  struct __align__(A2) N2 { T x, y; };                                                       \
  struct N3 { T x, y, z; };                                                                  \
  struct __align__(A4) N4 { T x, y, z, w; };                                                 \
  static inline N2 make_##N2(T x, T y) { return N2{x, y}; }                                  \
  static inline N3 make_##N3(T x, T y, T z) { return N3{x, y, z}; }                          \
  static inline N4 make_##N4(T x, T y, T z, T w) { return N4{x, y, z, w}; }

UOPS_SHIM_VEC(float, float2, float3, float4, 8, 16)
UOPS_SHIM_VEC(double, double2, double3, double4, 16, 32)
UOPS_SHIM_VEC(int, int2, int3, int4, 8, 16)
UOPS_SHIM_VEC(unsigned int, uint2, uops_shim_uint3_unused, uint4, 8, 16)
UOPS_SHIM_VEC(signed char, char2, char3, char4, 2, 4)
UOPS_SHIM_VEC(unsigned char, uchar2, uchar3, uchar4, 2, 4)
UOPS_SHIM_VEC(short, short2, short3, short4, 4, 8)
UOPS_SHIM_VEC(unsigned short, ushort2, ushort3, ushort4, 4, 8)
UOPS_SHIM_VEC(long long, longlong2, longlong3, longlong4, 16, 32)
UOPS_SHIM_VEC(__half, half2, half3, half4, 4, 8)
UOPS_SHIM_VEC(__nv_bfloat16, nv_bfloat162, nv_bfloat163, nv_bfloat164, 4, 8)
#undef UOPS_SHIM_VEC
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }
typedef half2 __half2;
typedef nv_bfloat162 __nv_bfloat162;

/* ------------------------------------------------------------------------------------ */
/* device math: CUDA's overloads that C lacks; fast intrinsics at full precision          */

#define UOPS_SHIM_MINMAX(T)                                                                  \
  static inline T max(T a, T b) { return a < b ? b : a; }                                    \
  static inline T min(T a, T b) { return b < a ? b : a; }
UOPS_SHIM_MINMAX(int)
UOPS_SHIM_MINMAX(unsigned int)
UOPS_SHIM_MINMAX(long long)
UOPS_SHIM_MINMAX(unsigned long long)
UOPS_SHIM_MINMAX(long)
UOPS_SHIM_MINMAX(unsigned long)
#undef UOPS_SHIM_MINMAX
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }

/* glibc declares these names itself (its internal aliases): map them as macros */
#define __expf expf
#define __exp2f exp2f
#define __logf logf
#define __log2f log2f
#define __sinf sinf
#define __cosf cosf
#define __powf powf
static inline float __fdividef(float x, float y) { return x / y; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline float __int_as_float(int x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static inline int __float_as_int(float f) {
  int x;
  memcpy(&x, &f, 4);
  return x;
}
static inline unsigned int __float_as_uint(float f) { return uops_shim_f2u(f); }
static inline float __uint_as_float(unsigned int u) { return uops_shim_u2f(u); }
static inline long long __double_as_longlong(double d) {
  long long x;
  memcpy(&x, &d, 8);
  return x;
}
static inline double __longlong_as_double(long long x) {
  double d;
  memcpy(&d, &x, 8);
  return d;
}

/* ------------------------------------------------------------------------------------ */
/* atomics: real ones, because blocks run concurrently on different OS threads            */

#define UOPS_SHIM_ATOMIC_INT(T)                                                              \
  static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); } \
  static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); } \
  static inline T atomicMax(T *p, T v) {                                                     \
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                            \
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                                        \
    return old;                                                                              \
  }                                                                                          \
  static inline T atomicMin(T *p, T v) {                                                     \
    T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                            \
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
    }                                                                                        \
    return old;                                                                              \
  }
UOPS_SHIM_ATOMIC_INT(int)
UOPS_SHIM_ATOMIC_INT(unsigned int)
UOPS_SHIM_ATOMIC_INT(long long)
UOPS_SHIM_ATOMIC_INT(unsigned long long)
#undef UOPS_SHIM_ATOMIC_INT

#define UOPS_SHIM_ATOMIC_FLOAT(T, I)                                                         \
  static inline T atomicAdd(T *p, T v) {                                                     \
    I *ip = (I *)p;                                                                          \
    I old = __atomic_load_n(ip, __ATOMIC_SEQ_CST), nw;                                       \
    do {                                                                                     \
      T f;                                                                                   \
      memcpy(&f, &old, sizeof(T));                                                           \
      f += v;                                                                                \
      memcpy(&nw, &f, sizeof(T));                                                            \
    } while (!__atomic_compare_exchange_n(ip, &old, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)); \
    T r;                                                                                     \
    memcpy(&r, &old, sizeof(T));                                                             \
    return r;                                                                                \
  }
UOPS_SHIM_ATOMIC_FLOAT(float, uint32_t)
UOPS_SHIM_ATOMIC_FLOAT(double, uint64_t)
#undef UOPS_SHIM_ATOMIC_FLOAT

/* ------------------------------------------------------------------------------------ */
/* the entry thunk uops.backends.gpu_emu generates for each __global__ function                    */

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
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <thread>
#include <vector>

typedef void (*uops_shim_entry_fn)(void **args, const uops_shim_ctx *ctx);

namespace {

enum FiberState { READY, AT_BARRIER, DONE };

struct Fiber {
  ucontext_t uc;
  uops_shim_ctx ctx;
  FiberState state;
};

/* one per worker OS thread: runs one block at a time */
struct BlockRunner {
  ucontext_t main_uc;
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
  swapcontext(&f.uc, &r->main_uc);
}

void no_barrier(void *) {
  fprintf(stderr, "uops gpu shim: __syncthreads reached in a kernel launched without barrier support "
                  "(uops.backends.gpu_emu did not see a barrier in its source)\n");
  abort();
}

void fiber_main() {
  BlockRunner *r = tls_runner;
  Fiber &f = r->fibers[r->current];
  r->entry(r->args, &f.ctx);
  f.state = DONE; /* returning resumes uc_link: the scheduler */
}

void set_thread_idx(uops_shim_ctx &c, unsigned t) {
  c.thread_idx.x = t % c.block_dim.x;
  c.thread_idx.y = (t / c.block_dim.x) % c.block_dim.y;
  c.thread_idx.z = t / (c.block_dim.x * c.block_dim.y);
}

/* returns 0, or -1 with a message in err */
int run_block(BlockRunner &r, const uops_shim_ctx &base, int barriers, char *err, size_t errlen) {
  const unsigned n = base.block_dim.x * base.block_dim.y * base.block_dim.z;
  if (!barriers) {
    uops_shim_ctx c = base;
    c.barrier = no_barrier;
    for (unsigned t = 0; t < n; t++) {
      set_thread_idx(c, t);
      r.entry(r.args, &c);
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
    set_thread_idx(f.ctx, t);
    f.state = READY;
    if (getcontext(&f.uc) != 0) {
      snprintf(err, errlen, "getcontext failed");
      return -1;
    }
    f.uc.uc_stack.ss_sp = r.stacks + (size_t)t * r.stack_size;
    f.uc.uc_stack.ss_size = r.stack_size;
    f.uc.uc_link = &r.main_uc;
    makecontext(&f.uc, fiber_main, 0);
  }
  tls_runner = &r;
  unsigned alive = n;
  while (alive) {
    /* one round: every live fiber runs up to its next barrier or its end */
    for (unsigned t = 0; t < n; t++) {
      Fiber &f = r.fibers[t];
      if (f.state == DONE) continue;
      r.current = (int)t;
      f.state = READY;
      if (swapcontext(&r.main_uc, &f.uc) != 0) {
        snprintf(err, errlen, "swapcontext failed");
        return -1;
      }
      if (f.state == DONE) alive--;
    }
  }
  return 0;
}

}  // namespace

extern "C" {

/* Launch entry over grid x block. threads <= 0: one worker per hardware thread (or
   $UOPS_SHIM_THREADS). Returns 0, or -1 with a message in err. */
int uops_shim_launch(uops_shim_entry_fn entry, void **args, const unsigned *grid, const unsigned *block, int barriers,
                     int threads, char *err, size_t errlen) {
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

  std::atomic<unsigned long long> next{0};
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
      if (run_block(r, base, barriers, local_err, sizeof local_err) != 0) {
        if (failed.exchange(1) == 0) snprintf(err, errlen, "%s", local_err);
        break;
      }
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
  return failed.load() ? -1 : 0;
}

}  // extern "C"
#endif /* UOPS_SHIM_RUNTIME */

#endif /* UOPS_GPU_SHIM_H */
