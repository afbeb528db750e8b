// Register vectors: per-row and per-column statistics of a row_l register tile (fp32).
//
//   col_vec<N>: one value per ROW of an N-row tile (an N x 1 column, e.g. the running max m_i,
//               the softmax denominator l_i, lse_i, delta_i when rows are queries).
//               Lane l holds rows g and g+8 of each 16-row fragment:  data[i][s] = v[16 i + g + 8 s].
//               (The four lanes of a quad hold identical copies.)
//   row_vec<N>: one value per COLUMN of an N-column tile (a 1 x N row, e.g. lse_j / delta_j when the
//               tile is S^T with queries along the columns).
//               Lane l holds columns 2t, 2t+1, 2t+8, 2t+9 of each 16-column fragment:
//               data[j][h] = (v[16 j + 2t + 8 h], v[16 j + 2t + 8 h + 1]).
//               (The eight lanes sharing t hold identical copies.)
// Both match the row_l fragment layout documented in rt.cuh, so row/col broadcasts are
// purely per-thread (no shuffles).
#pragma once
#include "rt.cuh"

namespace tk {

template <int N> struct col_vec {
  static_assert(N > 0 && N % TILE_DIM == 0, "col_vec: length must be a positive multiple of 16");
  static constexpr int length = N, height = N / TILE_DIM;
  float data[height][2];
  __device__ static __forceinline__ int index(int i, int s) { return TILE_DIM * i + (laneid() >> 2) + 8 * s; }
};

template <int N> struct row_vec {
  static_assert(N > 0 && N % TILE_DIM == 0, "row_vec: length must be a positive multiple of 16");
  static constexpr int length = N, width = N / TILE_DIM;
  float2 data[width][2];
  __device__ static __forceinline__ int index(int j, int h) { return TILE_DIM * j + 2 * (laneid() & 3) + 8 * h; }
};

// The vector types matching a row_l tile.
template <row_rt RT> using col_vec_of = col_vec<RT::rows>;
template <row_rt RT> using row_vec_of = row_vec<RT::cols>;

template <typename X> struct is_col_vec : std::false_type {};
template <int N> struct is_col_vec<col_vec<N>> : std::true_type {};
template <typename X> struct is_row_vec : std::false_type {};
template <int N> struct is_row_vec<row_vec<N>> : std::true_type {};
template <typename X> concept any_col_vec = is_col_vec<X>::value;
template <typename X> concept any_row_vec = is_row_vec<X>::value;
template <typename X> concept any_rv = any_col_vec<X> || any_row_vec<X>;

}  // namespace tk
