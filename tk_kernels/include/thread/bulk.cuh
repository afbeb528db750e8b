// Bulk asynchronous operations of Hopper's TMA unit (sm_90+), issued by ONE thread.
//
//   fence_proxy_async_shared()          make this thread's (and, after a __syncwarp, its warp's) shared-memory
//                                       writes visible to the bulk (async) proxy
//   bulk_reduce_add(dst, src, bytes)    dst[0 .. bytes/4) += src[0 .. bytes/4)   (global fp32 += shared fp32)
//   bulk_commit_group()                 close this thread's group of bulk operations
//   bulk_wait_group_read<N>()           wait until at most N of this thread's groups still READ shared memory
//   bulk_wait_group<N>()                wait until at most N of this thread's groups are incomplete
//
// Typical use by a warp that hands a block it wrote in shared memory to the TMA unit:
// bulk_wait_group_read<0> (the previous operation has read the block) -> __syncwarp -> write the block ->
// fence_proxy_async_shared -> __syncwarp -> bulk_reduce_add by one lane -> bulk_commit_group; and
// bulk_wait_group<0> before the CTA exits. Addresses 16-byte aligned, bytes a multiple of 16.
//
// Declared for every architecture so kernels that pick the path at run time compile everywhere: before
// sm_90 the fence and the waits compile to nothing and bulk_reduce_add traps (launchers must not take a
// bulk path there). The __CUDA_ARCH__ checks are about instruction availability only.
#pragma once
#include "../common/util.cuh"

namespace tk {

__device__ __forceinline__ void fence_proxy_async_shared() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_reduce_add(float *dst, const float *src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   __cvta_generic_to_global(dst)),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void bulk_commit_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace tk
