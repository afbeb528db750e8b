// Register-vector loads/stores (one warp) from/to contiguous fp32 arrays and shared vectors.
//
// load(v, src, n_valid, fill): v[i] = i < n_valid ? src[i] : fill   (src: global or shared pointer)
// store(dst, v, n_valid):      dst[i] = v[i] for i < n_valid (one lane per distinct value writes)
// Lane ownership follows rv.cuh (col_vec: rows g, g+8; row_vec: cols 2t, 2t+1, 2t+8, 2t+9).
#pragma once
#include "../../types/register/rv.cuh"
#include "../../types/shared/sv.cuh"

namespace tk {

template <int N>
__device__ __forceinline__ void load(col_vec<N> &dst, const float *src, int n_valid, float fill = 0.f) {
#pragma unroll
  for (int i = 0; i < col_vec<N>::height; i++)
#pragma unroll
    for (int s = 0; s < 2; s++) {
      const int idx = col_vec<N>::index(i, s);
      dst.data[i][s] = idx < n_valid ? src[idx] : fill;
    }
}
template <int N>
__device__ __forceinline__ void load(row_vec<N> &dst, const float *src, int n_valid, float fill = 0.f) {
#pragma unroll
  for (int j = 0; j < row_vec<N>::width; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int idx = row_vec<N>::index(j, h);
      dst.data[j][h].x = idx < n_valid ? src[idx] : fill;
      dst.data[j][h].y = idx + 1 < n_valid ? src[idx + 1] : fill;
    }
}
// load(v, sv, offset): v = src[offset, offset + N) of a shared fp32 vector with one 8-byte load per
// column pair (a row_vec lane's columns 2t, 2t+1 are adjacent); offset must be even.
template <int N, int M>
__device__ __forceinline__ void load(row_vec<N> &dst, const sv<float, M> &src, int offset) {
  static_assert(N <= M, "load(row_vec, sv, offset): vector longer than the shared vector");
#pragma unroll
  for (int j = 0; j < row_vec<N>::width; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      dst.data[j][h] = *reinterpret_cast<const float2 *>(src.data + offset + row_vec<N>::index(j, h));
}
template <any_rv V, int N>
__device__ __forceinline__ void load(V &dst, const sv<float, N> &src) {
  static_assert(V::length == N, "load(rv, sv): lengths differ");
  load(dst, src.data, N);
}

template <int N>
__device__ __forceinline__ void store(float *dst, const col_vec<N> &src, int n_valid) {
  if ((laneid() & 3) != 0) return;  // the 4 lanes of a quad hold the same rows
#pragma unroll
  for (int i = 0; i < col_vec<N>::height; i++)
#pragma unroll
    for (int s = 0; s < 2; s++) {
      const int idx = col_vec<N>::index(i, s);
      if (idx < n_valid) dst[idx] = src.data[i][s];
    }
}
template <int N>
__device__ __forceinline__ void store(float *dst, const row_vec<N> &src, int n_valid) {
  if (laneid() >= 4) return;  // lanes with the same t hold the same columns
#pragma unroll
  for (int j = 0; j < row_vec<N>::width; j++)
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int idx = row_vec<N>::index(j, h);
      if (idx < n_valid) dst[idx] = src.data[j][h].x;
      if (idx + 1 < n_valid) dst[idx + 1] = src.data[j][h].y;
    }
}

}  // namespace tk
