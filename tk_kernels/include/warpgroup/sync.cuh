// Synchronisation between warpgroups without stopping the rest of the CTA: named hardware barriers
// (ids 1..15; id 0 is __syncthreads). Thread counts are multiples of 32 (whole warps).
//
//   wg::sync(id)                  all 128 threads of this warpgroup meet at barrier `id`
//   wg::named_sync(id, threads)   wait at barrier `id` until `threads` threads have arrived (this
//                                 warpgroup's included)
//   wg::named_arrive(id, threads) arrive at barrier `id` without waiting (the producer side of a
//                                 hand-off: e.g. "the other consumer may issue its wgmmas now")
//
// Hand-off between two warpgroups A and B ("ping-pong"): A named_sync(a, 256), works, then
// named_arrive(b, 256); B named_sync(b, 256), works, named_arrive(a, 256). Arrivals and syncs on each
// id must balance by the time the CTA exits.
#pragma once

namespace tk::wg {

__device__ __forceinline__ void sync(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace tk::wg
