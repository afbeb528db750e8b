// Synchronisation inside one warpgroup (128 threads), without stopping the rest of the CTA:
// a named hardware barrier per warpgroup (ids 1..15; id 0 is __syncthreads).
//
//   wg::sync(id)   all 128 threads of this warpgroup meet at barrier `id`
#pragma once

namespace tk::wg {

__device__ __forceinline__ void sync(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}

}  // namespace tk::wg
