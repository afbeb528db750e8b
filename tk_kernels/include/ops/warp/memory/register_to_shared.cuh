// Register -> shared tile stores (one warp), converting the dtype if needed (fp32 -> bf16/fp16).
//
// store(dst, src): dst (st / st_sub, 16-bit) = src (rt, any tile dtype, either layout).
//   row_l: one 32-bit store per pair (two adjacent columns; never straddles a 16-byte chunk).
//          With the st swizzle these are bank-conflict free (8 rows x 16 bytes per instruction).
//   col_l: a pair spans two rows -> two 16-bit stores.
#pragma once
#include "../../../types/register/rt.cuh"
#include "../../../types/shared/st.cuh"

namespace tk {

template <any_st ST, any_rt RT>
__device__ __forceinline__ void store(ST &&dst, const RT &src) {
  using S = std::remove_cvref_t<ST>;
  static_assert(S::rows == RT::rows && S::cols == RT::cols, "store(st, rt): tiles must have the same shape");
  using U = typename S::dtype;
  using U2 = packed_t<U>;
#pragma unroll
  for (int i = 0; i < RT::height; i++)
#pragma unroll
    for (int j = 0; j < RT::width; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const U2 v = convert_pair<U2>(src.tiles[i][j][k]);
        const int r = 16 * i + RT::frag_row(k, 0), c = 16 * j + RT::frag_col(k, 0);
        if constexpr (RT::is_row) {
          *reinterpret_cast<U2 *>(dst.ptr(r, c)) = v;
        } else {
          *dst.ptr(r, c) = v.x;
          *dst.ptr(r + 1, c) = v.y;
        }
      }
}

}  // namespace tk
