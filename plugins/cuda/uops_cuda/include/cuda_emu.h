/* cuda_emu.h: CUDA's vocabulary on the GPU shim, for CUDA_EMU (uops_cuda.emulated).
 *
 * Force-included after uops' gpu_shim.h and the CUDA dialect's generated launch-index and
 * barrier macros (threadIdx, blockIdx, blockDim, gridDim, __syncthreads), so CUDA source from
 * CUDARenderer compiles for the host unchanged. Covers what the renderer and hand-written test
 * kernels use: qualifiers, half/bfloat16 names, vector types, math overloads, atomics.
 */
#ifndef UOPS_CUDA_EMU_H
#define UOPS_CUDA_EMU_H

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
#define __shared__ UOPS_SHIM_SHARED

typedef uops_dim3 uint3;
#define warpSize 32
template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return uops_shim_shuffle_xor(v, (unsigned)mask);
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ------------------------------------------------------------------------------------ */
/* half and bfloat16 (the shim's 16-bit floats under CUDA's names)                        */

typedef uops_shim_half __half;
typedef uops_shim_bf16 __nv_bfloat16;
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

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

#endif /* UOPS_CUDA_EMU_H */
