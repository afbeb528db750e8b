// Row / column reductions of fp32 row_l register tiles (one warp).
//
//   row_max(v, t)  row_sum(v, t)          v[r] = max_c / sum_c t[r][c]            (v: col_vec)
//   row_max(v, t, init)  row_sum(v, t, init)   ... combined with init[r]          (online softmax)
//   col_max(v, t)  col_sum(v, t)  (+ init)     v[c] = max_r / sum_r t[r][c]       (v: row_vec)
//
// A row of a row_l fragment lives in the 4 lanes of a quad (same g): reduce in-thread, then
// shuffle-xor 1 and 2. A column lives in the 8 lanes with the same t: reduce the two row halves
// in-thread, then shuffle-xor 4, 8, 16. Every lane ends with the full result.
#pragma once
#include "../../types/register/rt.cuh"
#include "../../types/register/rv.cuh"

namespace tk {

namespace detail {
struct op_max { __device__ __forceinline__ static float apply(float a, float b) { return fmaxf(a, b); } };
struct op_sum { __device__ __forceinline__ static float apply(float a, float b) { return a + b; } };

template <typename OP, bool HAS_INIT, fp32_rt RT>
__device__ __forceinline__ void row_reduce(col_vec<RT::rows> &dst, const RT &src, const col_vec<RT::rows> &init) {
  static_assert(RT::is_row, "row_max/row_sum need a row_l tile");
#pragma unroll
  for (int i = 0; i < RT::height; i++)
#pragma unroll
    for (int s = 0; s < 2; s++) {  // s: row g (k = 0, 2) or g + 8 (k = 1, 3)
      float acc = OP::apply(src.tiles[i][0][s].x, src.tiles[i][0][s].y);
      acc = OP::apply(acc, OP::apply(src.tiles[i][0][s + 2].x, src.tiles[i][0][s + 2].y));
#pragma unroll
      for (int j = 1; j < RT::width; j++) {
        acc = OP::apply(acc, OP::apply(src.tiles[i][j][s].x, src.tiles[i][j][s].y));
        acc = OP::apply(acc, OP::apply(src.tiles[i][j][s + 2].x, src.tiles[i][j][s + 2].y));
      }
      acc = OP::apply(acc, __shfl_xor_sync(0xffffffffu, acc, 1));
      acc = OP::apply(acc, __shfl_xor_sync(0xffffffffu, acc, 2));
      dst.data[i][s] = HAS_INIT ? OP::apply(acc, init.data[i][s]) : acc;
    }
}

template <typename OP, bool HAS_INIT, fp32_rt RT>
__device__ __forceinline__ void col_reduce(row_vec<RT::cols> &dst, const RT &src, const row_vec<RT::cols> &init) {
  static_assert(RT::is_row, "col_max/col_sum need a row_l tile");
#pragma unroll
  for (int j = 0; j < RT::width; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {  // h: cols 2t.. (k = 0, 1) or 2t+8.. (k = 2, 3)
      float2 acc;
      acc.x = OP::apply(src.tiles[0][j][2 * h].x, src.tiles[0][j][2 * h + 1].x);
      acc.y = OP::apply(src.tiles[0][j][2 * h].y, src.tiles[0][j][2 * h + 1].y);
#pragma unroll
      for (int i = 1; i < RT::height; i++) {
        acc.x = OP::apply(acc.x, OP::apply(src.tiles[i][j][2 * h].x, src.tiles[i][j][2 * h + 1].x));
        acc.y = OP::apply(acc.y, OP::apply(src.tiles[i][j][2 * h].y, src.tiles[i][j][2 * h + 1].y));
      }
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) {
        acc.x = OP::apply(acc.x, __shfl_xor_sync(0xffffffffu, acc.x, off));
        acc.y = OP::apply(acc.y, __shfl_xor_sync(0xffffffffu, acc.y, off));
      }
      if (HAS_INIT) {
        acc.x = OP::apply(acc.x, init.data[j][h].x);
        acc.y = OP::apply(acc.y, init.data[j][h].y);
      }
      dst.data[j][h] = acc;
    }
}
}  // namespace detail

template <fp32_rt RT> __device__ __forceinline__ void row_max(col_vec<RT::rows> &dst, const RT &src) {
  detail::row_reduce<detail::op_max, false>(dst, src, dst);
}
template <fp32_rt RT>
__device__ __forceinline__ void row_max(col_vec<RT::rows> &dst, const RT &src, const col_vec<RT::rows> &init) {
  detail::row_reduce<detail::op_max, true>(dst, src, init);
}
template <fp32_rt RT> __device__ __forceinline__ void row_sum(col_vec<RT::rows> &dst, const RT &src) {
  detail::row_reduce<detail::op_sum, false>(dst, src, dst);
}
template <fp32_rt RT>
__device__ __forceinline__ void row_sum(col_vec<RT::rows> &dst, const RT &src, const col_vec<RT::rows> &init) {
  detail::row_reduce<detail::op_sum, true>(dst, src, init);
}
template <fp32_rt RT> __device__ __forceinline__ void col_max(row_vec<RT::cols> &dst, const RT &src) {
  detail::col_reduce<detail::op_max, false>(dst, src, dst);
}
template <fp32_rt RT>
__device__ __forceinline__ void col_max(row_vec<RT::cols> &dst, const RT &src, const row_vec<RT::cols> &init) {
  detail::col_reduce<detail::op_max, true>(dst, src, init);
}
template <fp32_rt RT> __device__ __forceinline__ void col_sum(row_vec<RT::cols> &dst, const RT &src) {
  detail::col_reduce<detail::op_sum, false>(dst, src, dst);
}
template <fp32_rt RT>
__device__ __forceinline__ void col_sum(row_vec<RT::cols> &dst, const RT &src, const row_vec<RT::cols> &init) {
  detail::col_reduce<detail::op_sum, true>(dst, src, init);
}

}  // namespace tk
