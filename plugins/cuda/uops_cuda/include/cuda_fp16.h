/* Minimal cuda_fp16.h for NVRTC when no CUDA toolkit headers are installed.
 *
 * Why: the nvidia-cuda-nvrtc wheel ships the compiler but not the toolkit headers, and a
 * machine may have neither a CUDA toolkit nor the nvidia-cuda-runtime wheel. uops' NVRTC
 * compiler puts this directory on the include path only when the real headers are not
 * found. It covers what the uops CUDA renderer emits: the __half type, conversions, and
 * arithmetic done in float and rounded to nearest even per operation (as gpu_shim.h does).
 */
#ifndef UOPS_CUDA_FP16_FALLBACK_H
#define UOPS_CUDA_FP16_FALLBACK_H
#define UOPS_CUDA_FP16_FALLBACK 1

struct __align__(2) __half {
  unsigned short __x;
  __half() = default;
  __device__ __half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(__x) : "f"(f)); }
  __device__ __half(double f) { asm("cvt.rn.f16.f64 %0, %1;" : "=h"(__x) : "d"(f)); }
  __device__ __half(int v) : __half((float)v) {}
  __device__ __half(unsigned int v) : __half((float)v) {}
  __device__ __half(long long v) : __half((float)v) {}
  __device__ __half(unsigned long long v) : __half((float)v) {}
  __device__ __half(short v) : __half((float)v) {}
  __device__ __half(unsigned short v) : __half((float)v) {}
  __device__ __half(signed char v) : __half((float)v) {}
  __device__ __half(unsigned char v) : __half((float)v) {}
  __device__ __half(bool v) : __half(v ? 1.0f : 0.0f) {}
  __device__ operator float() const {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(__x));
    return f;
  }
};
typedef __half half;

__device__ inline __half operator+(__half a, __half b) { return __half((float)a + (float)b); }
__device__ inline __half operator-(__half a, __half b) { return __half((float)a - (float)b); }
__device__ inline __half operator*(__half a, __half b) { return __half((float)a * (float)b); }
__device__ inline __half operator/(__half a, __half b) { return __half((float)a / (float)b); }
__device__ inline __half operator-(__half a) {
  __half r;
  r.__x = (unsigned short)(a.__x ^ 0x8000u);
  return r;
}
__device__ inline bool operator<(__half a, __half b) { return (float)a < (float)b; }
__device__ inline bool operator>(__half a, __half b) { return (float)a > (float)b; }
__device__ inline bool operator<=(__half a, __half b) { return (float)a <= (float)b; }
__device__ inline bool operator>=(__half a, __half b) { return (float)a >= (float)b; }
__device__ inline bool operator==(__half a, __half b) { return (float)a == (float)b; }
__device__ inline bool operator!=(__half a, __half b) { return (float)a != (float)b; }
__device__ inline __half __float2half(float f) { return __half(f); }
__device__ inline __half __float2half_rn(float f) { return __half(f); }
__device__ inline float __half2float(__half h) { return (float)h; }
__device__ inline __half hexp2(__half h) { return __half(exp2f((float)h)); }
__device__ inline __half hlog2(__half h) { return __half(log2f((float)h)); }
__device__ inline __half hsqrt(__half h) { return __half(sqrtf((float)h)); }
__device__ inline __half hsin(__half h) { return __half(sinf((float)h)); }
__device__ inline __half hrcp(__half h) { return __half(1.0f / (float)h); }
__device__ inline __half htrunc(__half h) { return __half(truncf((float)h)); }
__device__ inline __half __hmax(__half a, __half b) { return (float)a < (float)b ? b : a; }

#endif
