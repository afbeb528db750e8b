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
#pragma once
#include "../../../types/register/rt.cuh"
#include "../../../types/shared/st.cuh"

namespace tk {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(smem))
               : "memory");
}

template <mma_rt RT, any_st ST>
__device__ __forceinline__ void load(RT &dst, const ST &src) {
  static_assert(RT::rows == ST::rows && RT::cols == ST::cols,
                "load(rt, st): register and shared tiles must have the same shape (use subtile<R,C>() for a part)");
  static_assert(std::same_as<typename RT::dtype, typename ST::dtype>, "load(rt, st): dtypes differ");
  using T = typename RT::dtype;
  const int l = laneid();
#pragma unroll
  for (int i = 0; i < RT::height; i++) {
#pragma unroll
    for (int j = 0; j < RT::width; j++) {
      uint32_t r[4];
      if constexpr (RT::is_row) {
        ldmatrix_x4(r, src.ptr(16 * i + (l & 15), 16 * j + 8 * (l >> 4)));
      } else {
        const int m = l >> 3;
        ldmatrix_x4_trans(r, src.ptr(16 * i + (l & 7) + 8 * (m >> 1), 16 * j + 8 * (m & 1)));
      }
#pragma unroll
      for (int k = 0; k < 4; k++) dst.tiles[i][j][k] = from_u32<T>(r[k]);
    }
  }
}

}  // namespace tk
