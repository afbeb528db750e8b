// Masking of register tiles (one warp). Coordinates are tile-local (row r, col c) plus the
// caller's global offsets; works for row_l and col_l tiles of any dtype.
//
//   masked_fill(t, pred, v)          t[r][c] = v where pred(r, c)   (PyTorch: t.masked_fill(mask, v))
//   make_causal(t, row0, col0, v)    keep col0 + c <= row0 + r (rows = queries, cols = keys), else v
//   make_causal_t(t, row0, col0, v)  the transpose: keep row0 + r <= col0 + c (rows = keys, cols = queries)
//   mask_cols(t, col0, limit, v)     t[:, c] = v where col0 + c >= limit   (keys past the sequence end)
//   mask_rows(t, row0, limit, v)     t[r, :] = v where row0 + r >= limit
// v defaults to -inf.
#pragma once
#include "../../types/register/rt.cuh"

namespace tk {

template <any_rt RT, typename P>
__device__ __forceinline__ void masked_fill(RT &t, P pred, float v) {
  using T = typename RT::dtype;
  const T val = from_float<T>(v);
  for_each_pair<RT>([&](int i, int j, int k) {
    if (pred(16 * i + RT::frag_row(k, 0), 16 * j + RT::frag_col(k, 0))) t.tiles[i][j][k].x = val;
    if (pred(16 * i + RT::frag_row(k, 1), 16 * j + RT::frag_col(k, 1))) t.tiles[i][j][k].y = val;
  });
}

template <any_rt RT>
__device__ __forceinline__ void make_causal(RT &t, int row0, int col0, float v = neg_infty()) {
  const int d = row0 - col0;
  masked_fill(t, [d](int r, int c) { return c > r + d; }, v);
}
template <any_rt RT>
__device__ __forceinline__ void make_causal_t(RT &t, int row0, int col0, float v = neg_infty()) {
  const int d = row0 - col0;
  masked_fill(t, [d](int r, int c) { return r + d > c; }, v);
}
template <any_rt RT>
__device__ __forceinline__ void mask_cols(RT &t, int col0, int limit, float v = neg_infty()) {
  const int n = limit - col0;
  masked_fill(t, [n](int, int c) { return c >= n; }, v);
}
template <any_rt RT>
__device__ __forceinline__ void mask_rows(RT &t, int row0, int limit, float v = neg_infty()) {
  const int n = limit - row0;
  masked_fill(t, [n](int r, int) { return r >= n; }, v);
}

}  // namespace tk
