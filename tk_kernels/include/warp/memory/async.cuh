// cp.async primitives: 16-byte (and 4-byte) global->shared copies that complete asynchronously.
// Copies issued by a thread are grouped with commit_group(); wait_group<N>() blocks until at most N
// of this thread's groups are still in flight. Other threads' copies become visible only after a
// barrier (__syncthreads / __syncwarp) that follows the wait.
#pragma once
#include <cstdint>
#include "../../common/util.cuh"

namespace tk {

// Copy 16 bytes; if !valid, write 16 zero bytes instead (src is not read: src-size 0).
__device__ __forceinline__ void cp_async_16(void *smem_dst, const void *gmem_src, bool valid) {
  const uint32_t dst = smem_u32(smem_dst);
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes)
               : "memory");
}
// Copy 4 bytes (through L1); if !valid, write 4 zero bytes.
__device__ __forceinline__ void cp_async_4(void *smem_dst, const void *gmem_src, bool valid) {
  const uint32_t dst = smem_u32(smem_dst);
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes)
               : "memory");
}

// Close the current group of cp.async copies issued by this thread.
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Wait until at most N of this thread's committed groups are still pending.
template <int N> __device__ __forceinline__ void wait_group() {
  static_assert(N >= 0 && N < 8, "wait_group: N must be in [0, 8)");
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace tk
