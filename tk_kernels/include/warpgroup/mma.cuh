// Warpgroup matrix multiply (Hopper wgmma, sm_90a): shared-memory matrix descriptors, the fences
// and groups that order asynchronous MMAs, register reallocation between warpgroups, and the
// layout of the fp32 accumulator a warpgroup holds.
//
// A warpgroup is 4 consecutive warps (128 threads) starting at a warp index divisible by 4.
// Operands live in shared memory in the layout TMA writes with a 128-byte swizzle: rows of 64
// 16-bit elements (128 bytes, the K extent of one tile), 8-row atoms of 1024 bytes whose 16-byte
// chunks are XOR-permuted by the row index. Tiles must start on a 1024-byte boundary.
//
//   desc_k128(tile)              descriptor of a [rows x 64] K-major 128B-swizzled tile
//   desc_advance_k(desc, k)      the same tile, starting at K element 16 k (k-th k16 slice)
//   desc_mn128(tile, block_bytes) descriptor of an MN-major tile: K rows of 64 MN elements per
//                                128B-swizzled block, blocks of 64 MN columns block_bytes apart
//   desc_advance_k_mn(desc, k)   the same MN-major tile, starting at K row 16 k
//   (an MN-major operand needs the transpose flag of wgmma_ss: TRANS_A / TRANS_B = 1)
//   mma_fence(acc) / mma_commit() / mma_wait<N>()
//   set_max_registers<R>() grow (consumers) or shrink (producers) this warpgroup's registers
//   accumulator<N>               fp32 D[64 x N] of one warpgroup, with row/col of each value
//
// Use: fence -> N x wgmma_ss over the k16 slices -> commit; wait<0> (or <1> to keep one group in
// flight) before reading the accumulator or overwriting the operand tiles.
#pragma once
#include <cstdint>
#include "../common/util.cuh"
#include "wgmma_ops.cuh"

namespace tk::wg {

constexpr int WARPGROUP_THREADS = 128;
constexpr int SWIZZLE128_ROW_BYTES = 128;   // one row of a K-major tile: 64 bf16/fp16
constexpr int SWIZZLE128_ATOM_BYTES = 1024; // 8 rows

__device__ __forceinline__ int warpgroupid() { return threadIdx.x / WARPGROUP_THREADS; }
__device__ __forceinline__ int warpgroup_thread() { return threadIdx.x % WARPGROUP_THREADS; }

// Matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address, leading-dimension byte
// offset (unused for K-major swizzled tiles whose K slice fits in one swizzle row: 1), stride-
// dimension byte offset (from one 8-row atom to the next: 1024 B), swizzle mode 1 = 128 B.
// Addresses and offsets are stored >> 4.
__device__ __forceinline__ uint64_t desc_k128(const void *tile) {
  uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t(1) << 16;                                   // leading-dimension byte offset
  desc |= uint64_t(SWIZZLE128_ATOM_BYTES >> 4) << 32;          // stride-dimension byte offset
  desc |= uint64_t(1) << 62;                                   // 128-byte swizzle
  return desc;
}

// Step along K inside the swizzle row: k16 slice k starts 32 k bytes further (the hardware applies
// the swizzle to the full address, so a plain offset of the start address is right).
__device__ __forceinline__ uint64_t desc_advance_k(uint64_t desc, int k) {
  return desc + uint64_t((k * 32) >> 4);
}

// MN-major tiles (the operand's M or N index is the contiguous one: A = X^T or B = W for a row-major
// X or W). TMA writes such a tile as blocks of [K rows x 64 MN elements], each row 128 bytes, 8-row
// atoms of 1024 bytes swizzled like the K-major layout. The leading-dimension byte offset is the
// distance from one 64-element MN block to the next (block_bytes = K rows x 128 B for a tile loaded
// as consecutive [K x 64] boxes); the stride-dimension byte offset steps from one 8-row K atom to the
// next (1024 B). A k16 slice is 16 K rows: 2048 bytes further.
__device__ __forceinline__ uint64_t desc_mn128(const void *tile, int block_bytes) {
  uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t((block_bytes >> 4) & 0x3FFF) << 16;         // leading-dimension byte offset
  desc |= uint64_t(SWIZZLE128_ATOM_BYTES >> 4) << 32;          // stride-dimension byte offset
  desc |= uint64_t(1) << 62;                                   // 128-byte swizzle
  return desc;
}
__device__ __forceinline__ uint64_t desc_advance_k_mn(uint64_t desc, int k) {
  return desc + uint64_t((k * 16 * SWIZZLE128_ROW_BYTES) >> 4);
}

// Orders this thread's register accesses of the accumulator before the next wgmma reads them
// (wgmma.fence), and keeps the compiler from moving accumulator accesses across it.
template <int R>
__device__ __forceinline__ void mma_fence(float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(acc[i])::"memory");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Wait until at most N committed groups of this warpgroup are pending; acc is pinned so that the
// compiler reads it only after the wait.
template <int N, int R>
__device__ __forceinline__ void mma_wait(float (&acc)[R]) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(acc[i])::"memory");
}

// setmaxnreg: every thread of the warpgroup executes it. Takes effect only in kernels compiled
// with a register cap at entry (__launch_bounds__(threads, 1)). R is a multiple of 8 in [24, 256].
template <int R>
__device__ __forceinline__ void set_max_registers() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (R >= 128) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

// fp32 D[64 x N] of one warpgroup: warp w holds rows 16w..16w+15; lane l holds, for each 8-column
// group j, the pairs (row 16w + l/4, cols 8j + 2(l%4) + {0,1}) in v[4j], v[4j+1] and
// (row + 8, same cols) in v[4j+2], v[4j+3].
template <int N>
struct accumulator {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N is a multiple of 8 up to 256");
  static constexpr int REGS = N / 2;
  float v[REGS];
  __device__ static int row(int i) {
    int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    return 16 * warp + lane / 4 + ((i & 2) ? 8 : 0);
  }
  __device__ static int col(int i) { return 8 * (i / 4) + 2 * ((threadIdx.x & 31) % 4) + (i & 1); }
};

}  // namespace tk::wg
