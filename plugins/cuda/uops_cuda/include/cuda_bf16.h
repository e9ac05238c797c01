/* Minimal cuda_bf16.h for NVRTC when no CUDA toolkit headers are installed.
 *
 * Why: see cuda_fp16.h beside this file. bfloat16 <-> float conversions are integer bit
 * operations (round to nearest even, NaN kept quiet), so they work on every architecture.
 */
#ifndef UOPS_CUDA_BF16_FALLBACK_H
#define UOPS_CUDA_BF16_FALLBACK_H
#define UOPS_CUDA_BF16_FALLBACK 1

struct __align__(2) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __device__ __nv_bfloat16(float f) {
    unsigned int u = __float_as_uint(f);
    __x = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u)
                                          : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  __device__ __nv_bfloat16(double f) : __nv_bfloat16((float)f) {}
  __device__ __nv_bfloat16(int v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(unsigned int v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(long long v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(unsigned long long v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(short v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(unsigned short v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(signed char v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(unsigned char v) : __nv_bfloat16((float)v) {}
  __device__ __nv_bfloat16(bool v) : __nv_bfloat16(v ? 1.0f : 0.0f) {}
  __device__ operator float() const { return __uint_as_float((unsigned int)__x << 16); }
};
typedef __nv_bfloat16 nv_bfloat16;

__device__ inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a + (float)b); }
__device__ inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a - (float)b); }
__device__ inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a * (float)b); }
__device__ inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16((float)a / (float)b); }
__device__ inline __nv_bfloat16 operator-(__nv_bfloat16 a) {
  __nv_bfloat16 r;
  r.__x = (unsigned short)(a.__x ^ 0x8000u);
  return r;
}
__device__ inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b; }
__device__ inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a > (float)b; }
__device__ inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a <= (float)b; }
__device__ inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a >= (float)b; }
__device__ inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a == (float)b; }
__device__ inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a != (float)b; }
__device__ inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
__device__ inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
__device__ inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
__device__ inline __nv_bfloat16 hexp2(__nv_bfloat16 h) { return __nv_bfloat16(exp2f((float)h)); }
__device__ inline __nv_bfloat16 hlog2(__nv_bfloat16 h) { return __nv_bfloat16(log2f((float)h)); }
__device__ inline __nv_bfloat16 hsqrt(__nv_bfloat16 h) { return __nv_bfloat16(sqrtf((float)h)); }
__device__ inline __nv_bfloat16 hsin(__nv_bfloat16 h) { return __nv_bfloat16(sinf((float)h)); }
__device__ inline __nv_bfloat16 hrcp(__nv_bfloat16 h) { return __nv_bfloat16(1.0f / (float)h); }
__device__ inline __nv_bfloat16 htrunc(__nv_bfloat16 h) { return __nv_bfloat16(truncf((float)h)); }
__device__ inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return (float)a < (float)b ? b : a; }

#endif
