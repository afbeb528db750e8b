// Register -> global tile stores (one warp), with row masking, and an fp32 atomic-add store.
//
// store(dst, src, c):       dst[c's leading indices, c.row() + r, c.col() + col] = src[r][col]  for c.row() + r < dst.rows(),
//                           converting the dtype (e.g. fp32 accumulator -> bf16 output).
// atomic_add(dst, src, c):  dst[...] += src[r][col] (fp32, red.global.add; float2 on sm_90+),
//                           same masking. For split-K style accumulation (e.g. dQ in attention backward).
// Direct fragment stores write 8 rows x 16 bytes per instruction (row_l). For large coalesced
// stores stage through shared memory (store(st, rt) then store<NT>(gl, st, c)).
#pragma once
#include "../../types/global/gl.cuh"
#include "../../types/register/rt.cuh"

namespace tk {

template <typename T, int N, any_rt RT>
__device__ __forceinline__ void store(const gl<T, N> &dst, const RT &src, const coord<N> &c) {
  using T2 = packed_t<T>;
  T *head = dst.at(c, 0, c.col());
  for_each_pair<RT>([&](int i, int j, int k) {
    const T2 v = convert_pair<T2>(src.tiles[i][j][k]);
    const int r = c.row() + 16 * i + RT::frag_row(k, 0), col = 16 * j + RT::frag_col(k, 0);
    if constexpr (RT::is_row) {
      if (r < dst.rows()) *reinterpret_cast<T2 *>(head + int64_t(r) * dst.row_stride() + col) = v;
    } else {
      if (r < dst.rows()) head[int64_t(r) * dst.row_stride() + col] = v.x;
      if (r + 1 < dst.rows()) head[int64_t(r + 1) * dst.row_stride() + col] = v.y;
    }
  });
}

namespace detail {
// One adjacent pair: p[0..1] += v (one vector red.add on sm_90+, two scalar ones before; p 8-byte aligned).
__device__ __forceinline__ void red_add_pair(float *p, const float2 &v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2 *>(p), v);
#else
  atomicAdd(p, v.x);
  atomicAdd(p + 1, v.y);
#endif
}
}  // namespace detail

template <int N, fp32_rt RT>
__device__ __forceinline__ void atomic_add(const gl<float, N> &dst, const RT &src, const coord<N> &c) {
  float *head = dst.at(c, 0, c.col());
  for_each_pair<RT>([&](int i, int j, int k) {
    const float2 v = src.tiles[i][j][k];
    const int r = c.row() + 16 * i + RT::frag_row(k, 0), col = 16 * j + RT::frag_col(k, 0);
    if constexpr (RT::is_row) {
      if (r < dst.rows()) detail::red_add_pair(head + int64_t(r) * dst.row_stride() + col, v);  // col even, D-stride 1
    } else {
      if (r < dst.rows()) atomicAdd(head + int64_t(r) * dst.row_stride() + col, v.x);
      if (r + 1 < dst.rows()) atomicAdd(head + int64_t(r + 1) * dst.row_stride() + col, v.y);
    }
  });
}

}  // namespace tk
