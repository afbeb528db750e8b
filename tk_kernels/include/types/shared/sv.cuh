// Shared vectors: sv<T, N>, a plain aligned array (per-row statistics staged through shared memory).
#pragma once
#include "../../common/base_types.cuh"
#include "../../common/util.cuh"

namespace tk {

template <typename T, int N>
struct sv {
  static_assert(N > 0, "sv: length must be positive");
  using dtype = T;
  static constexpr int length = N;
  alignas(16) T data[N];
  __device__ __forceinline__ T &operator[](int i) { return data[i]; }
  __device__ __forceinline__ const T &operator[](int i) const { return data[i]; }
};

}  // namespace tk
