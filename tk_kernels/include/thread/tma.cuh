// Tensor loads and stores through Hopper's TMA unit (cp.async.bulk.tensor, sm_90), issued by ONE
// thread, completing on an mbarrier (loads) or a bulk group (stores).
//
//   load_async(dst, map, bar, col, row)    box of `map` at element (col, row) -> shared dst;
//                                          out-of-bounds elements are zero-filled
//   load_async_multicast(dst, map, bar, col, row, ctas)   the same box into every CTA of the cluster in the
//                                          bit mask `ctas` (thread/cluster.cuh), at dst's offset in each
//   store_async(map, src, col, row)        shared src -> box at (col, row); out-of-bounds parts dropped
//   store_add_async(map, src, col, row)    the same, adding into global memory (fp32: reduce-add)
//   prefetch_l2(map, col, row)             the box at (col, row) into L2 only (no shared memory, no completion to
//                                          wait for): e.g. an output tile an epilogue will read back
//   load_async(dst, map, bar, c0, c1, c2, c3)   the same for a rank-4 map (e.g. (D, T, H, B) of an
//   store_async(map, src, c0, c1, c2, c3)       attention operand, any strides): each dimension is
//   store_add_async(map, src, c0, c1, c2, c3)   bounds-checked on its own, so a box never reads or
//                                               writes across the end of its row range (the attention
//                                               backward adds a warp's dQ share through a rank-4 map)
//
// `map` is a CUtensorMap built on the host (host/tensor_map.cuh) and passed to the kernel as a
// `const __grid_constant__ CUtensorMap` parameter. Coordinates are in elements, innermost first.
// Shared buffers: 128-byte aligned, 1024-byte aligned for the 128-byte swizzle.
#pragma once
#include <cstdint>
#include <cuda.h>
#include "../common/util.cuh"
#include "mbarrier.cuh"

namespace tk::tma {

__device__ __forceinline__ void load_async(void *dst, const CUtensorMap &map, barrier &bar, int col, int row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(&bar)), "r"(col), "r"(row)
      : "memory");
#else
  __trap();
#endif
}

// The same box into the shared memory of every CTA of the cluster in the mask `ctas` (bit r: rank r), at dst's
// offset, each completing its bytes on the barrier at bar's offset in that CTA (which must expect them).
__device__ __forceinline__ void load_async_multicast(void *dst, const CUtensorMap &map, barrier &bar, int col, int row,
                                                     uint16_t ctas) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(&bar)), "r"(col), "r"(row), "h"(ctas)
      : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void store_async(const CUtensorMap &map, const void *src, int col, int row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(src)), "r"(col), "r"(row)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void store_add_async(const CUtensorMap &map, const void *src, int col, int row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(src)), "r"(col), "r"(row)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void load_async(void *dst, const CUtensorMap &map, barrier &bar, int c0, int c1, int c2,
                                           int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
      ::"r"(smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(&bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3)
      : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void store_async(const CUtensorMap &map, const void *src, int c0, int c1, int c2, int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void store_add_async(const CUtensorMap &map, const void *src, int c0, int c1, int c2, int c3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               ::"l"(reinterpret_cast<uint64_t>(&map)), "r"(smem_u32(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void prefetch_l2(const CUtensorMap &map, int col, int row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n"
               ::"l"(reinterpret_cast<uint64_t>(&map)), "r"(col), "r"(row)
               : "memory");
#endif
}

// Warm the tensor map's cache line before the first load (optional).
__device__ __forceinline__ void prefetch(const CUtensorMap &map) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
#endif
}

}  // namespace tk::tma
