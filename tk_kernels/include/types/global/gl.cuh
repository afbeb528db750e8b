// Global layouts: gl<T, N> describes an N-dimensional tensor in global memory by its sizes and element
// strides. The last dimension is contiguous (stride 1); the other strides are arbitrary (views such as
// the q/k/v split of a fused qkv projection work without a copy). Addressing is 64-bit.
//
// Tile ops (load_async, store, atomic_add) treat the last two dimensions as the rows and columns of a
// matrix and the leading N - 2 as an index into a batch of such matrices: attention uses N = 4
// (B, H, T, D), a GEMM or LayerNorm N = 2 (rows, cols). A tile's position is a coord<N>: the leading
// indices, then its first row and first column, in elements. Rows at or beyond rows() are out of range
// (tile loads zero-fill them, tile stores skip them).
#pragma once
#include <concepts>
#include <cstdint>
#include <utility>
#include "../../common/base_types.cuh"

namespace tk {

// Where a tile sits in a gl<T, N>: idx[0 .. N-2) leading indices, idx[N-2] first row, idx[N-1] first column.
template <int N>
struct coord {
  int idx[N];
  __host__ __device__ __forceinline__ int row() const { return idx[N - 2]; }
  __host__ __device__ __forceinline__ int col() const { return idx[N - 1]; }
};

template <typename T, int N = 4>
struct gl {
  static_assert(N >= 2, "gl: at least 2 dimensions (rows, cols)");
  using dtype = T;
  static constexpr int rank = N;
  T *ptr;
  int shape[N];             // sizes
  int64_t stride[N - 1];    // element strides of dims 0 .. N-2 (the last dim has stride 1)

  __host__ __device__ __forceinline__ int rows() const { return shape[N - 2]; }
  __host__ __device__ __forceinline__ int cols() const { return shape[N - 1]; }
  __host__ __device__ __forceinline__ int64_t row_stride() const { return stride[N - 2]; }

  // Pointer to element (i_0, ..., i_{N-1}):  ((ptr + i_0 s_0) + i_1 s_1) + ... + i_{N-1}.
  template <std::integral... I>
    requires(sizeof...(I) == N)
  __host__ __device__ __forceinline__ T *at(I... i) const {
    return offset(std::make_index_sequence<N - 1>{}, int(i)...);
  }
  // Pointer to element (row, col) of the matrix at the leading indices of c.
  __host__ __device__ __forceinline__ T *at(const coord<N> &c, int row, int col) const {
    return at_coord(std::make_index_sequence<N - 2>{}, c, row, col);
  }
  // The matrix at leading indices i_0 .. i_{N-3}, as a gl of the same rank whose leading sizes are 1
  // (address it with coord {0, ..., 0, row, col}). Attention: q.matrix(b, h) is one head's (T, D).
  template <std::integral... I>
    requires(sizeof...(I) == N - 2)
  __host__ __device__ __forceinline__ gl matrix(I... i) const {
    return sub(std::make_index_sequence<N - 2>{}, std::make_index_sequence<N - 1>{}, at(i..., 0, 0));
  }

 private:
  template <size_t... D, typename... I>
  __host__ __device__ __forceinline__ T *offset(std::index_sequence<D...>, I... i) const {
    const int ix[N] = {i...};
    return (ptr + ... + (ix[D] * stride[D])) + ix[N - 1];
  }
  template <size_t... D>
  __host__ __device__ __forceinline__ T *at_coord(std::index_sequence<D...>, const coord<N> &c, int row, int col) const {
    return (ptr + ... + (c.idx[D] * stride[D])) + row * stride[N - 2] + col;
  }
  template <size_t... L, size_t... S>
  __host__ __device__ __forceinline__ gl sub(std::index_sequence<L...>, std::index_sequence<S...>, T *p) const {
    return gl{p, {(void(L), 1)..., shape[N - 2], shape[N - 1]}, {stride[S]...}};
  }
};

}  // namespace tk
