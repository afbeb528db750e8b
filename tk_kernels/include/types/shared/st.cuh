// Shared-memory tiles: st<T, ROWS, COLS>, row-major with an XOR swizzle of 16-byte chunks.
//
// Swizzle: a row of COLS 16-bit elements is CPR = COLS/8 chunks of 16 bytes. Chunk c of row r
// is stored at chunk position  c ^ ((r / RPL) & MASK),  where RPL = max(1, 8/CPR) rows share
// one 128-byte line and MASK = min(CPR, 8) - 1. For 64- and 128-column bf16 tiles this is the
// classic c ^ (r & 7). Effect: the 8 row addresses of one ldmatrix 8x8 matrix (8 consecutive
// rows, same logical chunk) land in 8 distinct 16-byte bank groups, as do the 8 rows written by
// one 32-bit register->shared store of a fragment, and the 16-byte cp.async writes of a warp.
// So all of ldmatrix, ldmatrix.trans, fragment stores and cp.async are bank-conflict free.
//
// st_sub<ST, R, C> is a view of an R x C sub-block (offsets multiples of 16 rows / 8 cols)
// that keeps the parent's swizzle; loads/stores accept either.
#pragma once
#include <type_traits>
#include "../../common/base_types.cuh"
#include "../../common/util.cuh"

namespace tk {

template <mma_dtype T, int ROWS, int COLS>
struct st {
  static_assert(ROWS > 0 && COLS > 0 && ROWS % TILE_DIM == 0 && COLS % TILE_DIM == 0,
                "st: ROWS and COLS must be positive multiples of 16");
  using dtype = T;
  static constexpr int rows = ROWS, cols = COLS;
  static constexpr int num_elements = ROWS * COLS;
  static constexpr int chunks_per_row = COLS / 8;  // 16-byte chunks
  static constexpr int rows_per_line = chunks_per_row >= 8 ? 1 : 8 / chunks_per_row;
  static constexpr int swizzle_mask = (chunks_per_row >= 8 ? 8 : chunks_per_row) - 1;

  alignas(128) T data[num_elements];

  // Uniform view interface shared with st_sub: storage base, offset of this view, storage width.
  static constexpr int storage_cols = COLS;
  __device__ __forceinline__ const T *base() const { return data; }
  __device__ __forceinline__ int row_offset() const { return 0; }
  __device__ __forceinline__ int col_offset() const { return 0; }

  // Element offset of (r, c) in the swizzled storage.
  __device__ static __forceinline__ int offset(int r, int c) {
    const int chunk = (c >> 3) ^ ((r / rows_per_line) & swizzle_mask);
    return r * COLS + (chunk << 3) + (c & 7);
  }
  __device__ __forceinline__ T *ptr(int r, int c) { return data + offset(r, c); }
  __device__ __forceinline__ const T *ptr(int r, int c) const { return data + offset(r, c); }
};

// A view of rows [row0, row0+R) x cols [col0, col0+C) of a shared tile.
template <typename ST, int R, int C>
struct st_sub {
  static_assert(R % TILE_DIM == 0 && C % TILE_DIM == 0, "st_sub: sub-tile dims must be multiples of 16");
  static_assert(R <= ST::rows && C <= ST::cols, "st_sub: sub-tile larger than its parent");
  using dtype = typename ST::dtype;
  static constexpr int rows = R, cols = C;
  ST *parent;
  int row0, col0;
  __device__ __forceinline__ dtype *ptr(int r, int c) const { return parent->ptr(row0 + r, col0 + c); }

  static constexpr int storage_cols = ST::cols;
  __device__ __forceinline__ const dtype *base() const { return parent->data; }
  __device__ __forceinline__ int row_offset() const { return row0; }
  __device__ __forceinline__ int col_offset() const { return col0; }
};

// subtile<R, C>(tile, i, j): the (i, j)-th R x C block of `tile` (block indices, not elements).
template <int R, int C, typename ST>
__device__ __forceinline__ st_sub<ST, R, C> subtile(ST &tile, int i, int j) {
  static_assert(ST::rows % R == 0 && ST::cols % C == 0, "subtile: block size must divide the tile");
  return st_sub<ST, R, C>{&tile, i * R, j * C};
}
template <int R, int C, typename ST>
__device__ __forceinline__ st_sub<ST, R, C> subtile(const ST &tile, int i, int j) {
  return subtile<R, C>(const_cast<ST &>(tile), i, j);
}

template <typename X> struct is_st : std::false_type {};
template <typename T, int R, int C> struct is_st<st<T, R, C>> : std::true_type {};
template <typename P, int R, int C> struct is_st<st_sub<P, R, C>> : std::true_type {};
// Anything shaped like a shared tile: st or a st_sub view.
template <typename X> concept any_st = is_st<std::remove_cvref_t<X>>::value;

template <int R, int C> using st_bf = st<bf16, R, C>;
template <int R, int C> using st_hf = st<half, R, C>;

}  // namespace tk
