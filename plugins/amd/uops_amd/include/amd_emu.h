/* amd_emu.h: the vocabulary of AMDRenderer's HIP-style source on the GPU shim, for AMD_EMU (uops_amd.emulated).
 *
 * Force-included after uops' gpu_shim.h and the AMD dialect's generated macros (the amdgcn
 * launch-index builtins and __builtin_amdgcn_s_barrier). The dialect's rewrites have already
 * dropped the device-only attributes (global, amdgpu_flat_work_group_size) and turned
 * __attribute__((shared)) into block-shared storage. Vectors (ext_vector_type) and the
 * __builtin_* math are clang's own on the host too.
 */
#ifndef UOPS_AMD_EMU_H
#define UOPS_AMD_EMU_H

#define __restrict__ __restrict
/* clang's 16-bit float types as the shim's, which round like the hardware on every host */
#define _Float16 uops_shim_half
#define __bf16 uops_shim_bf16
/* blocks of one launch run on different OS threads: a fence is a real fence */
#define __builtin_amdgcn_fence(order, scope) __atomic_thread_fence(order)
/* a swizzle among the lanes of a wave: the shim's exchange */
#define __builtin_amdgcn_ds_swizzle(v, pattern) uops_shim_swizzle(v, pattern)

#endif /* UOPS_AMD_EMU_H */
