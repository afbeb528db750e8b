// Register tiles: rt<T, ROWS, COLS, Layout>, owned by ONE warp, built from 16x16 fragments.
//
// Fragment layout (lane l, g = l / 4, t = l % 4). Each 16x16 fragment is 4 packed pairs
// `data[k]`, k = 0..3; pair element e = 0, 1.
//
//   row_l (pairs run along a row; the mma A operand and the fp32 accumulator C/D):
//       data[k].e  holds  X[ g + 8*(k & 1) ][ 2t + e + 8*(k >> 1) ]
//       i.e. data[0] = (g, 2t..2t+1)   data[1] = (g+8, 2t..)   data[2] = (g, 2t+8..)   data[3] = (g+8, 2t+8..)
//       This is exactly mma.m16n8k16's A fragment {a0,a1,a2,a3}, and for fp32 it is the
//       accumulator of two m16n8 mmas: cols 0..7 -> {data[0], data[1]} = {c0c1, c2c3},
//       cols 8..15 -> {data[2], data[3]}.  So an fp32 accumulator converted pairwise to
//       bf16/fp16 IS an A operand (how P = softmax(S) feeds P.V without shared memory).
//
//   col_l (pairs run along a column; the mma B operand when the tile is K x N):
//       data[k].e  holds  X[ 2t + e + 8*(k >> 1) ][ g + 8*(k & 1) ]
//       i.e. the col_l fragment of X is bit-for-bit the row_l fragment of X^T.
//       For B (K x N): n-tile 0 (cols 0..7) uses {data[0], data[2]}, n-tile 1 uses {data[1], data[3]}.
//
// Consequences used throughout the DSL:
//   * rt<T,R,C,col_l> holding X has the same registers as rt<T,C,R,row_l> holding X^T
//     (`transpose` is free: only the fragment grid is re-indexed).
//   * Changing the layout of the SAME matrix (row_l <-> col_l) needs data movement
//     (`swap_layout`, movmatrix).
#pragma once
#include <concepts>
#include <type_traits>
#include "../../common/base_types.cuh"
#include "../../common/util.cuh"

namespace tk {

struct row_l {};
struct col_l {};
template <typename L>
concept tile_layout = std::same_as<L, row_l> || std::same_as<L, col_l>;
template <typename L> using transpose_layout_t = std::conditional_t<std::same_as<L, row_l>, col_l, row_l>;

template <tile_dtype T, int ROWS, int COLS, tile_layout L = row_l>
struct rt {
  static_assert(ROWS > 0 && COLS > 0 && ROWS % TILE_DIM == 0 && COLS % TILE_DIM == 0,
                "rt: ROWS and COLS must be positive multiples of 16 (the tensor-core fragment size)");
  using dtype = T;
  using dtype2 = packed_t<T>;
  using layout = L;
  static constexpr int rows = ROWS, cols = COLS;
  static constexpr int height = ROWS / TILE_DIM;  // fragments down
  static constexpr int width = COLS / TILE_DIM;   // fragments across
  static constexpr bool is_row = std::same_as<L, row_l>;

  dtype2 tiles[height][width][4];

  // Tile-local coordinates of pair element (k, e) of THIS lane, within one 16x16 fragment.
  __device__ static __forceinline__ int frag_row(int k, int e) {
    const int l = laneid();
    if constexpr (is_row) return (l >> 2) + 8 * (k & 1);
    else return 2 * (l & 3) + e + 8 * (k >> 1);
  }
  __device__ static __forceinline__ int frag_col(int k, int e) {
    const int l = laneid();
    if constexpr (is_row) return 2 * (l & 3) + e + 8 * (k >> 1);
    else return (l >> 2) + 8 * (k & 1);
  }
};

// f(i, j, k) for pair k of every 16x16 fragment (i, j) of an RT tile: the one loop nest behind the
// element-wise maps, fills, copies, masks and register -> shared / global stores (fully unrolled, so
// i, j, k are constants once inlined).
template <typename RT, typename F>
__device__ __forceinline__ void for_each_pair(F &&f) {
#pragma unroll
  for (int i = 0; i < RT::height; i++)
#pragma unroll
    for (int j = 0; j < RT::width; j++)
#pragma unroll
      for (int k = 0; k < 4; k++) f(i, j, k);
}

// Handy aliases.
template <int R, int C, tile_layout L = row_l> using rt_fl = rt<float, R, C, L>;
template <int R, int C, tile_layout L = row_l> using rt_bf = rt<bf16, R, C, L>;
template <int R, int C, tile_layout L = row_l> using rt_hf = rt<half, R, C, L>;

// ---- concepts for static checks ----
template <typename X> struct is_rt : std::false_type {};
template <typename T, int R, int C, typename L> struct is_rt<rt<T, R, C, L>> : std::true_type {};
template <typename X> concept any_rt = is_rt<X>::value;
template <typename X> concept row_rt = any_rt<X> && X::is_row;
template <typename X> concept col_rt = any_rt<X> && !X::is_row;
template <typename X> concept fp32_rt = any_rt<X> && std::same_as<typename X::dtype, float>;
template <typename X> concept mma_rt = any_rt<X> && mma_dtype<typename X::dtype>;

template <typename A, typename B>
concept same_shape = A::rows == B::rows && A::cols == B::cols;

}  // namespace tk
