// Global layouts: gl<T> describes a (B, H, T, D) tensor in global memory by its element strides.
// The last dimension (D) is contiguous (stride 1); b/h/t strides are arbitrary (views such as the
// q/k/v split of a fused qkv projection work without a copy). Row addressing is 64-bit.
#pragma once
#include <cstdint>
#include "../../common/base_types.cuh"

namespace tk {

template <typename T>
struct gl {
  using dtype = T;
  T *ptr;
  int batch, heads, seq, dim;     // B, H, T, D
  int64_t b_stride, h_stride, t_stride;

  // Pointer to element (b, h, t, d).
  __host__ __device__ __forceinline__ T *at(int b, int h, int t, int d = 0) const {
    return ptr + b * b_stride + h * h_stride + t * t_stride + d;
  }
  // The (T, D) matrix of head (b, h) as a gl of batch 1, head 1 (address with coord {0, 0, row, col}).
  __host__ __device__ __forceinline__ gl head(int b, int h) const {
    return gl{at(b, h, 0, 0), 1, 1, seq, dim, b_stride, h_stride, t_stride};
  }
};

// A tile position inside a gl: batch b, head h, first row (t) and first column (d), in ELEMENTS.
struct coord {
  int b, h, row, col;
};

}  // namespace tk
