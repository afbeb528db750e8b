// Thread-block clusters (sm_90): the CTAs of a cluster run at the same time on one GPC, and each may write the
// others' shared memory (TMA multicast, thread/tma.cuh) and arrive on their mbarriers.
//
//   cluster_rank()            this CTA's rank in its cluster (%cluster_ctarank)
//   cluster_sync()            every non-exited thread of the cluster meets here (barrier.cluster, release /
//                             acquire): after mbarrier initialisation (fence_barrier_init), before any CTA of the
//                             cluster arrives on another's barriers or multicasts into its shared memory. All the
//                             threads of a warp execute it together.
//   arrive_cluster(b, rank)   arrive on barrier b of the cluster's CTA `rank` (b's offset in that CTA's shared
//                             memory; this CTA's own rank included). The arrival's default semantics (release at
//                             CTA scope) order nothing for the other CTA: use it to say that reads are done whose
//                             completion the thread has already waited for (a wgmma group's reads of a ring slot,
//                             after wgmma.wait_group). With .release.cluster ptxas emits MEMBAR.ALL.GPU before
//                             every arrival.
//
// A CTA's shared memory goes with its last thread: a kernel whose CTAs arrive on each other's barriers keeps each
// CTA alive until every arrival meant for it has landed (the pipeline's producer waits on its empty barriers once
// more at the end: pipeline/producer_consumer.cuh).
#pragma once
#include <cstdint>
#include "../common/util.cuh"
#include "mbarrier.cuh"

namespace tk {

__device__ __forceinline__ int cluster_rank() {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return int(r);
}

__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void arrive_cluster(barrier &b, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(&b)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
#endif
}

}  // namespace tk
