// Shared -> register tile loads with ldmatrix (one warp).
//
// load(dst, src): dst (rt, rows x cols) = src (st or st_sub of the same shape), same matrix.
//   * row_l dst: ldmatrix.x4 per 16x16 fragment. Lane l points at row (l % 16), col 8*(l / 16):
//     matrices 0..3 = (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15),
//     (rows 8-15, cols 8-15) -> data[0..3] in the row_l order of rt.cuh.
//   * col_l dst: ldmatrix.x4.trans. Lane l (matrix m = l / 8) points at row (l % 8) + 8*(m / 2),
//     col 8*(m % 2): matrices 0..3 = (rows 0-7, cols 0-7), (rows 0-7, cols 8-15),
//     (rows 8-15, cols 0-7), (rows 8-15, cols 8-15); .trans gives lane (g, t) the pair
//     X[2t..2t+1][g] of each -> data[0..3] in the col_l order of rt.cuh.
// Use col_l for a K x N B operand stored K-major (e.g. V in P.V, or Q / dO in a backward A^T B).
// load_B(dst, src) loads the same tile with the 8x8 matrices in B-operand register order (see below).
#pragma once
#include "../../types/register/rt.cuh"
#include "../../types/shared/st.cuh"

namespace tk {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem)
               : "memory");
}

namespace detail {
// ldmatrix.x4 of every 16x16 fragment. B_ORDER = false: the 4 result registers are data[0..3]
// (a consecutive quad = the mma A operand). B_ORDER = true: they are data[0], data[2], data[1], data[3]
// (consecutive pairs = the B operand of n-cols 0..7 and 8..15). The tile's contents are identical
// either way; only the physical register placement differs, which decides whether the compiler
// must insert register moves before each mma.
template <bool B_ORDER, saddr A, mma_rt RT, any_st ST>
__device__ __forceinline__ void load_frags(RT &dst, const ST &src) {
  static_assert(RT::rows == ST::rows && RT::cols == ST::cols,
                "load(rt, st): register and shared tiles must have the same shape (use subtile<R,C>() for a part)");
  static_assert(std::same_as<typename RT::dtype, typename ST::dtype>, "load(rt, st): dtypes differ");
  using T = typename RT::dtype;
  const int l = laneid();
  // Two lane -> address patterns (m = l / 8 is the 8x8 matrix a lane addresses):
  //   "row-half fastest":  row (l % 16),           col 8 * (l / 16)    -> blocks (r0,c0) (r8,c0) (r0,c8) (r8,c8)
  //   "col-half fastest":  row (l % 8) + 8(m / 2), col 8 * (m % 2)     -> blocks (r0,c0) (r0,c8) (r8,c0) (r8,c8)
  // row_l data[] is ordered row-half fastest, col_l data[] col-half fastest (rt.cuh).
  constexpr bool row_half_fastest = RT::is_row != B_ORDER;
  const int lr = row_half_fastest ? (l & 15) : (l & 7) + 8 * (l >> 4);
  const int lc = row_half_fastest ? 8 * (l >> 4) : 8 * ((l >> 3) & 1);
  // Shared addresses. For storage rows of >= 128 bytes the swizzle is "16-byte chunk ^= row & 7", i.e.
  // byte offset = row * RB + ((2 * col) ^ ((row & 7) << 4)). Fragment (i, j) of this lane sits at
  // row row0 + 16 i + lr (same row & 7 for every i: row0 is a multiple of 16) and column
  // col0 + 16 j + lc, so its address is  (P ^ (32 * (jt & 3))) + 16 i RB + 128 (jt >> 2)  with
  // jt = col0 / 16 + j and one per-lane base P: one XOR per ldmatrix, the rest immediates.
  // (P's 128-byte-aligned part plus an offset < 128 lets the XOR act on the low 7 bits only.)
  constexpr int SC = ST::storage_cols;
  uint32_t quad[RT::height][RT::width];
  if constexpr (SC >= 64 && A == saddr::lane_xor) {
    // saddr::lane_xor (util.cuh). Same addresses, XOR applied to the lane's part only: the XOR touches bits 5..6, and the tile base
    // (128-byte aligned), the sub-tile's row offset (a multiple of 16 rows) and 128-byte column blocks
    // are multiples of 128, so they can be added after it. The XORed lane offsets then do not depend
    // on the tile or the sub-tile (loop-invariant, 4 values), and every runtime offset is one add.
    constexpr int RB = SC * int(sizeof(T));
    const int r0 = src.row_offset(), jt0 = src.col_offset() / 16;
    const uint32_t lane = uint32_t(lr * RB) + uint32_t((2 * lc) ^ ((lr & 7) << 4));
    const uint32_t off = smem_u32(src.base()) + uint32_t(r0 * RB);
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++) {
        const int jt = jt0 + j;
        quad[i][j] = (lane ^ uint32_t(32 * (jt & 3))) + off + uint32_t(16 * i * RB + 128 * (jt >> 2));
      }
  } else if constexpr (SC >= 64) {
    constexpr int RB = SC * int(sizeof(T));
    const int r0 = src.row_offset(), jt0 = src.col_offset() / 16;
    const uint32_t p = smem_u32(src.base()) + uint32_t((r0 + lr) * RB) + uint32_t((2 * lc) ^ ((lr & 7) << 4));
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++) {
        const int jt = jt0 + j;
        quad[i][j] = (p ^ uint32_t(32 * (jt & 3))) + uint32_t(16 * i * RB + 128 * (jt >> 2));
      }
  } else {
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++) quad[i][j] = smem_u32(src.ptr(16 * i + lr, 16 * j + lc));
  }
#pragma unroll
  for (int i = 0; i < RT::height; i++) {
#pragma unroll
    for (int j = 0; j < RT::width; j++) {
      uint32_t r[4];
      if constexpr (RT::is_row) ldmatrix_x4(r, quad[i][j]);
      else ldmatrix_x4_trans(r, quad[i][j]);
      dst.tiles[i][j][0] = from_u32<T>(r[0]);
      dst.tiles[i][j][B_ORDER ? 2 : 1] = from_u32<T>(r[1]);
      dst.tiles[i][j][B_ORDER ? 1 : 2] = from_u32<T>(r[2]);
      dst.tiles[i][j][3] = from_u32<T>(r[3]);
    }
  }
}
}  // namespace detail

// load(dst, src): registers laid out for use as an mma A operand (or anything else).
// load<saddr::lane_xor>(dst, src): the same, other address arithmetic (util.cuh).
template <saddr A = saddr::tile_xor, mma_rt RT, any_st ST>
__device__ __forceinline__ void load(RT &dst, const ST &src) {
  detail::load_frags<false, A>(dst, src);
}
// load_B(dst, src): the same tile, registers laid out for use as an mma B operand
// (K in Q K^T, V in P V, ...). Saves ~4 register moves per 16x16 fragment in the mma loop.
template <saddr A = saddr::tile_xor, mma_rt RT, any_st ST>
__device__ __forceinline__ void load_B(RT &dst, const ST &src) {
  detail::load_frags<true, A>(dst, src);
}

}  // namespace tk
