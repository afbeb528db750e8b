// Layout and shape changes of register tiles (one warp).
//
//   transpose(dst, src)     dst = src^T. Free: rt<T,C,R,col_l> of X^T has the registers of rt<T,R,C,row_l>
//                           of X (see rt.cuh), so only the fragment grid is re-indexed.
//   swap_layout(dst, src)   same matrix, other layout (row_l <-> col_l), 16-bit tiles only:
//                           each 8x8 sub-matrix is transposed across the warp with movmatrix, and the
//                           off-diagonal 8x8 blocks trade places (col data = {mov r0, mov r2, mov r1, mov r3}).
//   col_slice<C2>(src, j)   columns [j*C2, (j+1)*C2) as a new tile (by value; free after inlining)
//   row_slice<R2>(src, i)   rows [i*R2, (i+1)*R2)
#pragma once
#include "../../types/register/rt.cuh"

namespace tk {

template <any_rt RD, any_rt RS>
__device__ __forceinline__ void transpose(RD &dst, const RS &src) {
  static_assert(std::same_as<typename RD::dtype, typename RS::dtype>, "transpose: dtypes differ");
  static_assert(RD::rows == RS::cols && RD::cols == RS::rows, "transpose: dst must be cols x rows of src");
  static_assert(RD::is_row != RS::is_row, "transpose: dst must have the other layout (free transpose)");
  for_each_pair<RS>([&](int i, int j, int k) { dst.tiles[j][i][k] = src.tiles[i][j][k]; });
}

__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

template <mma_rt RD, mma_rt RS>
__device__ __forceinline__ void swap_layout(RD &dst, const RS &src) {
  static_assert(std::same_as<typename RD::dtype, typename RS::dtype>, "swap_layout: dtypes differ");
  static_assert(same_shape<RD, RS>, "swap_layout: shapes differ (use transpose for X -> X^T)");
  static_assert(RD::is_row != RS::is_row, "swap_layout: dst must have the other layout");
  using T = typename RS::dtype;
  constexpr int src_k[4] = {0, 2, 1, 3};
  for_each_pair<RS>([&](int i, int j, int k) {
    dst.tiles[i][j][k] = from_u32<T>(movmatrix_trans(as_u32<T>(src.tiles[i][j][src_k[k]])));
  });
}

template <int C2, any_rt RT>
__device__ __forceinline__ rt<typename RT::dtype, RT::rows, C2, typename RT::layout> col_slice(const RT &src, int j) {
  static_assert(C2 % TILE_DIM == 0 && RT::cols % C2 == 0, "col_slice: width must be a multiple of 16 dividing the tile");
  rt<typename RT::dtype, RT::rows, C2, typename RT::layout> dst;
  constexpr int W = C2 / TILE_DIM;
#pragma unroll
  for (int i = 0; i < RT::height; i++)
#pragma unroll
    for (int jj = 0; jj < W; jj++)
#pragma unroll
      for (int k = 0; k < 4; k++) dst.tiles[i][jj][k] = src.tiles[i][j * W + jj][k];
  return dst;
}

template <int R2, any_rt RT>
__device__ __forceinline__ rt<typename RT::dtype, R2, RT::cols, typename RT::layout> row_slice(const RT &src, int i) {
  static_assert(R2 % TILE_DIM == 0 && RT::rows % R2 == 0, "row_slice: height must be a multiple of 16 dividing the tile");
  rt<typename RT::dtype, R2, RT::cols, typename RT::layout> dst;
  constexpr int H = R2 / TILE_DIM;
#pragma unroll
  for (int ii = 0; ii < H; ii++)
#pragma unroll
    for (int j = 0; j < RT::width; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) dst.tiles[ii][j][k] = src.tiles[i * H + ii][j][k];
  return dst;
}

}  // namespace tk
