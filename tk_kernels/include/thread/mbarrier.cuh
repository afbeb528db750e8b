// Shared-memory barriers (mbarrier, sm_90) with transaction counts, for TMA pipelines.
//
//   barrier b (in shared memory)
//   init(b, arrivals)             one thread, before any use; then fence_barrier_init + __syncthreads
//   expect_bytes(b, bytes)        this thread arrives and announces `bytes` of TMA data to come
//   arrive(b)                     this thread arrives
//   wait(b, parity)               block until the phase with this parity has completed
//
// A phase completes when all `arrivals` have arrived and every announced byte has landed. Phase
// parity starts at 0; a ring slot used for the n-th time waits on parity n & 1. Waiting on the
// parity of the phase before the first (1) returns at once: producers use that for a ring's
// first pass over empty slots.
#pragma once
#include <cstdint>
#include "../common/util.cuh"

namespace tk {

struct alignas(8) barrier {
  uint64_t state;
};

__device__ __forceinline__ void init(barrier &b, int arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(&b)), "r"(arrivals) : "memory");
#endif
}
// Makes barrier initialisation visible to the async proxy (TMA) and other threads.
__device__ __forceinline__ void fence_barrier_init() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void expect_bytes(barrier &b, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(&b)), "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void arrive(barrier &b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(&b)) : "memory");
#endif
}
__device__ __forceinline__ void wait(barrier &b, int parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(smem_u32(&b)),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace tk
