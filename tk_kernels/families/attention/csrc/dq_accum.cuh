// Attention backward only: the two ways a warp adds its dQ partial (an fp32 register tile) into the
// fp32 dq_accum workspace. Kept next to the attention kernels (not in the DSL) because the layouts are
// the workspace's: a row-major (T, D) head with a compile-time pitch, or 32 x 32 blocks in the xor32
// layout that the TMA bulk-reduction path writes and the convert kernel reads back.
//
//   atomic_add<PITCH>(dst, src, n_rows):  dst[r * PITCH + c] += src[r][c]  for r < n_rows   (red.add)
//   store_xor32(dst, src):                dst (4 KB shared block, xor32 layout) = src (32 x 32 fp32 tile)
//   xor32_offset(r, c):                   offset of element (r, c) in an xor32 block
//   frag64_offset(r, c):                  offset of element (r, c) in a frag64 block (the Hopper backward's)
//   add_frag64(dst, v, tid):              dst (a frag64 block in global memory) += v (a warpgroup thread's
//                                         accumulator registers), red.global.add.v4.f32 (sm_90)
//   store_frag64_warp(dst, v, tid):       a warp's share of a frag64 block, densely into shared dst (one
//                                         tensor reduce-add's box: the Hopper backward at D = 128)
//   frag64_row(offset):                   that box's first 2 KB row for a block `offset` floats into dq_accum
//
// atomic_add<PITCH>, compared with the DSL's atomic_add(gl<float>, rt, coord) (runtime row stride): with
// PITCH known, every fragment's offset from the lane's first element is an immediate, so the warp needs
// one 64-bit address instead of one per fragment (this matters in kernels that run at the register limit).
// row_l tiles only. On sm_90+ each pair is one vector red.add (atomicAdd(float2 *)); earlier
// architectures issue two scalar red.add.
#pragma once
#include "tk.cuh"

namespace tk_attn {

using namespace tk;

template <int PITCH, fp32_rt RT>
__device__ __forceinline__ void atomic_add(float *dst, const RT &src, int n_rows) {
  static_assert(RT::is_row, "atomic_add<PITCH>(float*, rt, n): row_l tiles only");
  static_assert(PITCH % 2 == 0 && PITCH >= RT::cols, "atomic_add<PITCH>: pitch must be even and >= the tile width");
  const int g = laneid() >> 2, t = laneid() & 3;
  float *lane_base = dst + g * PITCH + 2 * t;     // this lane's (row g, col 2t)
  if (n_rows >= RT::rows) {
    // Whole tile in range (the common case): no per-row guards, every address is lane_base + immediate.
    // (Plain loops here, not for_each_pair: with the lambda ptxas spills in the two-barrier split kernel.)
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          detail::red_add_pair(lane_base + (16 * i + 8 * (k & 1)) * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
  } else {
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const int r = 16 * i + 8 * (k & 1);     // row offset of pair k beyond row g
          if (g + r < n_rows) detail::red_add_pair(lane_base + r * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
        }
  }
}

// fp32 32 x 32 blocks in the "xor32" layout: 32 rows of 32 floats (4 KB, contiguous), with the four
// 8-float groups of row r permuted by XOR with (r & 3):  element (r, c) is at  r * 32 + (c ^ 8 (r & 3)).
// A warp's 8-byte fragment stores then cover all 32 banks per half warp (two wavefronts per store, the
// minimum), and a whole block is one contiguous bulk copy (tk::bulk_reduce_add).
__host__ __device__ constexpr int xor32_offset(int r, int c) { return r * 32 + (c ^ (8 * (r & 3))); }

// dst (4 KB shared block, xor32 layout) = src (32 x 32 fp32 row_l register tile).
template <fp32_rt RT>
__device__ __forceinline__ void store_xor32(float *dst, const RT &src) {
  static_assert(RT::is_row && RT::rows == 32 && RT::cols == 32, "store_xor32: 32 x 32 row_l fp32 tiles only");
  const int g = laneid() >> 2, t = laneid() & 3;
  // pair k of fragment (i, j): row 16 i + 8 (k & 1) + g (so r & 3 = g & 3), col 16 j + 8 (k >> 1) + 2 t
  for_each_pair<RT>([&](int i, int j, int k) {
    const int r = 16 * i + 8 * (k & 1) + g, c = 16 * j + 8 * (k >> 1) + 2 * t;
    const float2 v = src.tiles[i][j][k];  // c is even: an 8-byte aligned pair
    store_shared(dst + xor32_offset(r, c), v);
  });
}

// fp32 64 x 64 blocks in the "frag64" layout (16 KB, contiguous): a warpgroup's m64n64 wgmma accumulator
// in register order, thread after thread in 16-byte groups: value v[r] of warpgroup thread tid is at
// (r / 4) * 512 + 4 tid + r % 4. The Hopper backward adds its dQ blocks so (add_frag64): each thread
// issues R / 4 16-byte vector reductions at immediate offsets from one address, a warp instruction covers
// 512 contiguous bytes and no per-element address is computed (until session 37 it staged them in shared
// memory in this order for TMA bulk reductions; the xor32 staging before that needed 32 scattered 4-byte
// stores and ~100 integer instructions for their addresses per query block, SASS, sm_90a). Element (r, c) of
// the accumulator (wgmma's D layout: warp r / 16, lane 4 (r % 8) + (c % 8) / 2, register 4 (c / 8) +
// 2 ((r / 8) % 2) + c % 2) is then at:
__host__ __device__ constexpr int frag64_offset(int r, int c) {
  return (c / 8) * 512 + 4 * (32 * (r / 16) + 4 * (r % 8) + (c % 8) / 2) + 2 * ((r / 8) % 2) + (c % 2);
}

// dst += v: warpgroup thread tid's accumulator registers v[R] (an m64nN wgmma accumulator, N = 2 R) into the
// frag64 block (or, R = 16, the half block of an m64n32 accumulator) at dst in global memory, v[r .. r + 3] at
// the layout's (r / 4) * 512 + 4 tid. sm_90 only (atomicAdd on float4: one red.global.add.v4.f32); its one
// caller, the Hopper backward, has a kernel body only for sm_90a.
template <int R>
__device__ __forceinline__ void add_frag64(float *dst, const float (&v)[R], int tid) {
  static_assert(R % 4 == 0, "add_frag64: whole 16-byte groups");
  float4 *p = reinterpret_cast<float4 *>(dst) + tid;  // 4 tid floats
#pragma unroll
  for (int r = 0; r < R; r += 4) atomicAdd(p + (r / 4) * 128, make_float4(v[r], v[r + 1], v[r + 2], v[r + 3]));
}

// A warp's share of a frag64 block (the R / 4 runs of 512 bytes its threads hold, 2 KB apart) is one box of a
// tensor map over dq_accum with dims (128 floats, 4 warps, rows of 2 KB) and box (128, 1, R / 4). dst = v:
// warp-group thread tid's registers into that box's dense shared-memory image (R / 4 rows of 512 bytes; each
// 16-byte store instruction of a warp covers one row: conflict-free), for one tensor reduce-add per warp.
template <int R>
__device__ __forceinline__ void store_frag64_warp(float *dst, const float (&v)[R], int tid) {
  static_assert(R % 4 == 0, "store_frag64_warp: whole 16-byte groups");
  float4 *p = reinterpret_cast<float4 *>(dst) + (tid & 31);
#pragma unroll
  for (int r = 0; r < R; r += 4) p[(r / 4) * 32] = make_float4(v[r], v[r + 1], v[r + 2], v[r + 3]);
}
// the frag64 block (or half block) that starts `offset` floats into dq_accum: its first 2 KB row of the map
__host__ __device__ constexpr int64_t frag64_row(int64_t offset) { return offset / 512; }
}  // namespace tk_attn
