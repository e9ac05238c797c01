/* metal_stdlib.h: the part of Metal's <metal_stdlib> that uops kernels use, for a C++ compiler.
 *
 * Why: there is no Metal compiler for Linux, but MSL is C++14/17 with extensions. With this
 * header, clang++ (19 or newer: _Float16 on x86) checks rendered MSL on Linux
 * (`-fsyntax-only`), and with the GPU shim (uops.backends.gpu_emu) runs it on the CPU
 * (METAL_EMU). It is a stand-in, not Apple's header: it accepts the MSL that uops renders and
 * rejects what Metal would reject among the mistakes a renderer can make:
 *   - undeclared names and wrong types (ordinary C++ checking)
 *   - `double` (Metal has no 64-bit float): the type is declared unavailable
 *   - a vector constructor whose components do not add up to the vector's size (float4(a, b, c))
 *   - as_type<T>(x) between types of different sizes
 *   - misspelt attributes ([[buffer(n)]], [[thread_position_in_threadgroup]] ...): checked
 *     with -Werror=unknown-attributes, since each known one is mapped to a harmless attribute
 *   - SIMD-group matrices and reductions are declared (so their use is checked) but not emulated,
 *     except simd_shuffle_xor (the shim's exchange)
 * Not checked here (only Metal itself can): address spaces (device/constant/threadgroup are
 * empty, so mixing them goes unnoticed), per-version features beyond bfloat (__METAL_VERSION__),
 * resource limits (threadgroup memory, buffer slots), and the exact overload set of the math
 * library (here: float and half scalars and vectors).
 *
 * Vectors are clang ext_vector_type (as in Metal's own compiler); MSL's constructor syntax
 * float4(x, y, z, w) is a function-like macro per vector type, so the plain type name stays a type.
 */
#ifndef UOPS_METAL_STDLIB_H
#define UOPS_METAL_STDLIB_H

#if !defined(__clang__) || __clang_major__ < 16
#error "uops' metal_stdlib.h needs clang++ 16 or newer (_Float16 on x86): apt-get install clang-19"
#endif

#ifndef __METAL_VERSION__
#define __METAL_VERSION__ 310
#endif

/* ---- qualifiers and attributes ---- */
#define kernel
#define device
#define constant
#define thread
#ifdef UOPS_GPU_SHIM_H
#define threadgroup UOPS_SHIM_SHARED
#else
#define threadgroup
#endif
/* known attributes become [[maybe_unused]], so a misspelt one is an unknown attribute */
#define buffer(n) maybe_unused
#define threadgroup_position_in_grid maybe_unused
#define thread_position_in_threadgroup maybe_unused
#define thread_position_in_grid maybe_unused
#define threads_per_threadgroup maybe_unused
#define threadgroups_per_grid maybe_unused
#define thread_index_in_threadgroup maybe_unused
#define thread_index_in_simdgroup maybe_unused
#define simdgroup_index_in_threadgroup maybe_unused

/* ---- scalar types ---- */
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;
#if __METAL_VERSION__ >= 310 && defined(UOPS_GPU_SHIM_H)
typedef uops_shim_bf16 bfloat; /* emulated: clang's __bf16 arithmetic needs compiler-rt at load time */
#elif __METAL_VERSION__ >= 310
typedef __bf16 bfloat;
#endif
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef float uops_metal_no_double __attribute__((unavailable("Metal has no double (no 64-bit floating point type); use float")));
#define double uops_metal_no_double

/* ---- vector types ---- */
template <class T> struct uops_metal_lanes { static constexpr int n = 1; typedef T elem; };
#define UOPS_METAL_VEC1(T, N, V)                                                                     \
  typedef T V __attribute__((ext_vector_type(N)));                                                \
  template <> struct uops_metal_lanes<V> { static constexpr int n = N; typedef T elem; };
#define UOPS_METAL_VEC(T)                                                                        \
  UOPS_METAL_VEC1(T, 2, T##2) UOPS_METAL_VEC1(T, 3, T##3) UOPS_METAL_VEC1(T, 4, T##4)
UOPS_METAL_VEC(bool) UOPS_METAL_VEC(char) UOPS_METAL_VEC(uchar) UOPS_METAL_VEC(short) UOPS_METAL_VEC(ushort)
UOPS_METAL_VEC(int) UOPS_METAL_VEC(uint) UOPS_METAL_VEC(long) UOPS_METAL_VEC(ulong)
UOPS_METAL_VEC(half) UOPS_METAL_VEC(float)
#if __METAL_VERSION__ >= 310 && !defined(UOPS_GPU_SHIM_H)
UOPS_METAL_VEC(bfloat)
#endif
#undef UOPS_METAL_VEC
#undef UOPS_METAL_VEC1

template <class V, class E, class A>
static inline void uops_metal_put(V &v, int &i, A a) {
  if constexpr (uops_metal_lanes<A>::n == 1) {
    v[i++] = (E)a;
  } else {
    for (int k = 0; k < uops_metal_lanes<A>::n; k++) v[i++] = (E)a[k];
  }
}

/* MSL's vector constructors: one scalar (splat), one vector of the same size (conversion), or
   scalars and vectors whose components add up to the size */
template <class V, class... A>
static inline V uops_metal_make(A... a) {
  typedef typename uops_metal_lanes<V>::elem E;
  constexpr int n = uops_metal_lanes<V>::n;
  constexpr int given = (0 + ... + uops_metal_lanes<A>::n);
  if constexpr (sizeof...(A) == 1 && given == 1) {
    return V((E)(a, ...));
  } else if constexpr (sizeof...(A) == 1 && given == n) {
    return __builtin_convertvector((a, ...), V);
  } else {
    static_assert(given == n, "MSL vector constructor: the components given do not add up to the vector's size");
    V v;
    int i = 0;
    (uops_metal_put<V, E>(v, i, a), ...);
    return v;
  }
}
#define bool2(...) uops_metal_make<bool2>(__VA_ARGS__)
#define bool3(...) uops_metal_make<bool3>(__VA_ARGS__)
#define bool4(...) uops_metal_make<bool4>(__VA_ARGS__)
#define char2(...) uops_metal_make<char2>(__VA_ARGS__)
#define char3(...) uops_metal_make<char3>(__VA_ARGS__)
#define char4(...) uops_metal_make<char4>(__VA_ARGS__)
#define uchar2(...) uops_metal_make<uchar2>(__VA_ARGS__)
#define uchar3(...) uops_metal_make<uchar3>(__VA_ARGS__)
#define uchar4(...) uops_metal_make<uchar4>(__VA_ARGS__)
#define short2(...) uops_metal_make<short2>(__VA_ARGS__)
#define short3(...) uops_metal_make<short3>(__VA_ARGS__)
#define short4(...) uops_metal_make<short4>(__VA_ARGS__)
#define ushort2(...) uops_metal_make<ushort2>(__VA_ARGS__)
#define ushort3(...) uops_metal_make<ushort3>(__VA_ARGS__)
#define ushort4(...) uops_metal_make<ushort4>(__VA_ARGS__)
#define int2(...) uops_metal_make<int2>(__VA_ARGS__)
#define int3(...) uops_metal_make<int3>(__VA_ARGS__)
#define int4(...) uops_metal_make<int4>(__VA_ARGS__)
#define uint2(...) uops_metal_make<uint2>(__VA_ARGS__)
#define uint3(...) uops_metal_make<uint3>(__VA_ARGS__)
#define uint4(...) uops_metal_make<uint4>(__VA_ARGS__)
#define long2(...) uops_metal_make<long2>(__VA_ARGS__)
#define long3(...) uops_metal_make<long3>(__VA_ARGS__)
#define long4(...) uops_metal_make<long4>(__VA_ARGS__)
#define ulong2(...) uops_metal_make<ulong2>(__VA_ARGS__)
#define ulong3(...) uops_metal_make<ulong3>(__VA_ARGS__)
#define ulong4(...) uops_metal_make<ulong4>(__VA_ARGS__)
#define half2(...) uops_metal_make<half2>(__VA_ARGS__)
#define half3(...) uops_metal_make<half3>(__VA_ARGS__)
#define half4(...) uops_metal_make<half4>(__VA_ARGS__)
#define float2(...) uops_metal_make<float2>(__VA_ARGS__)
#define float3(...) uops_metal_make<float3>(__VA_ARGS__)
#define float4(...) uops_metal_make<float4>(__VA_ARGS__)
#if __METAL_VERSION__ >= 310
#define bfloat2(...) uops_metal_make<bfloat2>(__VA_ARGS__)
#define bfloat3(...) uops_metal_make<bfloat3>(__VA_ARGS__)
#define bfloat4(...) uops_metal_make<bfloat4>(__VA_ARGS__)
#endif

/* ---- reinterpretation ---- */
template <class T, class F>
static inline T as_type(F f) {
  static_assert(sizeof(T) == sizeof(F), "as_type<T>(x): T and the type of x must have the same size");
  return __builtin_bit_cast(T, f);
}

/* ---- synchronisation ---- */
enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
static inline constexpr mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((unsigned)a | (unsigned)b); }
#ifndef threadgroup_barrier
#ifdef UOPS_GPU_SHIM_H
static inline void threadgroup_barrier(mem_flags) { uops_shim_barrier(); }
#else
static inline void threadgroup_barrier(mem_flags) {}
#endif
#endif

/* ---- SIMD-group functions and matrices: declared for the check only, but simd_shuffle_xor ----
   They need the 32 threads of a SIMD group in lockstep, which the shim's fibers are not, so an
   emulated kernel that uses them fails to compile (unknown name) instead of computing wrong numbers.
   simd_shuffle_xor is the shim's exchange (two threadgroup barriers: every thread must reach it). */
#ifdef UOPS_GPU_SHIM_H
template <class T> T simd_shuffle_xor(T v, ushort mask) { return uops_shim_shuffle_xor(v, mask); }
#else
template <class T> T simd_shuffle_xor(T, ushort);
void simdgroup_barrier(mem_flags);
template <class T> T simd_sum(T);
template <class T> T simd_max(T);
template <class T> T simd_min(T);
template <class T> T simd_shuffle(T, ushort);
template <class T> T simd_shuffle_down(T, ushort);
template <class T, int Rows, int Cols>
struct simdgroup_matrix {
  typedef T elements __attribute__((ext_vector_type(2)));
  simdgroup_matrix() = default;
  explicit simdgroup_matrix(T value);
  elements &thread_elements();
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
#if __METAL_VERSION__ >= 310
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
#endif
template <class T, int R, int C>
void simdgroup_load(simdgroup_matrix<T, R, C> &d, const T *src, ulong elements_per_row = C, ulong2 origin = 0,
                    bool transpose = false);
template <class T, int R, int C>
void simdgroup_store(simdgroup_matrix<T, R, C> a, T *dst, ulong elements_per_row = C, ulong2 origin = 0,
                     bool transpose = false);
template <class T, int R, int K, int C>
void simdgroup_multiply(simdgroup_matrix<T, R, C> &d, simdgroup_matrix<T, R, K> a, simdgroup_matrix<T, K, C> b);
template <class T, class U, int R, int K, int C>
void simdgroup_multiply_accumulate(simdgroup_matrix<T, R, C> &d, simdgroup_matrix<U, R, K> a,
                                   simdgroup_matrix<U, K, C> b, simdgroup_matrix<T, R, C> c);
template <class T, int R, int C>
simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T value);
#endif

/* ---- math: namespace metal (and metal::precise / metal::fast, the same here) ---- */
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_huge_valf()
#define MAXFLOAT __FLT_MAX__

template <class T> struct uops_metal_is_float { static constexpr bool value = false; };
template <> struct uops_metal_is_float<float> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<half> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<float2> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<float3> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<float4> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<half2> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<half3> { static constexpr bool value = true; };
template <> struct uops_metal_is_float<half4> { static constexpr bool value = true; };
template <bool B, class T = void> struct uops_metal_if {};
template <class T> struct uops_metal_if<true, T> { typedef T type; };
#define UOPS_METAL_FLOAT(T) typename uops_metal_if<uops_metal_is_float<T>::value, T>::type

#define UOPS_METAL_MATH1(name, builtin)                                                          \
  template <class T> static inline UOPS_METAL_FLOAT(T) name(T x) { return builtin(x); }
#define UOPS_METAL_MATH2(name, builtin)                                                          \
  template <class T> static inline UOPS_METAL_FLOAT(T) name(T x, T y) { return builtin(x, y); }
#define UOPS_METAL_MATHLIB                                                                       \
  UOPS_METAL_MATH1(exp2, __builtin_elementwise_exp2)                                             \
  UOPS_METAL_MATH1(exp, __builtin_elementwise_exp)                                               \
  UOPS_METAL_MATH1(log2, __builtin_elementwise_log2)                                             \
  UOPS_METAL_MATH1(log, __builtin_elementwise_log)                                               \
  UOPS_METAL_MATH1(sin, __builtin_elementwise_sin)                                               \
  UOPS_METAL_MATH1(cos, __builtin_elementwise_cos)                                               \
  UOPS_METAL_MATH1(sqrt, __builtin_elementwise_sqrt)                                             \
  UOPS_METAL_MATH1(trunc, __builtin_elementwise_trunc)                                           \
  UOPS_METAL_MATH1(floor, __builtin_elementwise_floor)                                           \
  UOPS_METAL_MATH1(ceil, __builtin_elementwise_ceil)                                             \
  UOPS_METAL_MATH1(fabs, __builtin_elementwise_abs)                                              \
  UOPS_METAL_MATH1(abs, __builtin_elementwise_abs)                                               \
  UOPS_METAL_MATH2(pow, __builtin_elementwise_pow)                                               \
  UOPS_METAL_MATH2(fmax, __builtin_elementwise_max)                                              \
  UOPS_METAL_MATH2(fmin, __builtin_elementwise_min)                                              \
  template <class T> static inline UOPS_METAL_FLOAT(T) rsqrt(T x) { return (T)1 / __builtin_elementwise_sqrt(x); } \
  template <class T> static inline UOPS_METAL_FLOAT(T) fma(T a, T b, T c) { return __builtin_elementwise_fma(a, b, c); }

namespace metal {
UOPS_METAL_MATHLIB
template <class T> static inline T max(T a, T b) { return a < b ? b : a; }
template <class T> static inline T min(T a, T b) { return b < a ? b : a; }
namespace precise {
UOPS_METAL_MATHLIB
}
namespace fast {
UOPS_METAL_MATHLIB
}
}  // namespace metal
#undef UOPS_METAL_MATHLIB
#undef UOPS_METAL_MATH1
#undef UOPS_METAL_MATH2
#undef UOPS_METAL_FLOAT

#endif /* UOPS_METAL_STDLIB_H */
