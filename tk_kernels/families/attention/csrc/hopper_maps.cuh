// Host side shared by the family's Hopper kernels (hopper_forward.cu, hopper_backward.cu): the TMA tensor
// maps of their (B, H, T, D) operands and the size of a persistent grid.
#pragma once

#include <cstdint>

#include "attention.h"
#include "host/tensor_map.cuh"

namespace tk_attn {

// Rank-4 map over (D, T, H, B) of a (B, H, T, D) tensor with the given element strides, box
// (64 columns, box_rows rows, 1, 1), 128B swizzle: a box row is one 128-byte swizzle row of 16-bit
// elements. Size-1 dims may come with stride 0 (strides_of in bindings.cpp): any multiple of 16 bytes is
// fine there, the coordinate is always 0.
template <typename T>
CUtensorMap bhtd_map(const void *ptr, const Strides &st, int B, int H, int T_, int D, int box_rows) {
  const uint64_t e = sizeof(T);
  auto stride_or = [](int64_t s, uint64_t packed) { return s == 0 ? packed : uint64_t(s); };
  const uint64_t t_s = stride_or(st.t, D), h_s = stride_or(st.h, uint64_t(T_) * D),
                 b_s = stride_or(st.b, uint64_t(H) * T_ * D);
  return tk::host::tensor_map_4d<T>(ptr, {uint64_t(D), uint64_t(T_), uint64_t(H), uint64_t(B)}, {t_s * e, h_s * e, b_s * e},
                                {64u, uint32_t(box_rows), 1u, 1u}, 128);
}

// A persistent grid of `items` work items: one CTA per SM of the current device, fewer when there are fewer items.
inline cudaError_t persistent_blocks(int64_t items, int64_t &blocks) {
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  blocks = items < sms ? items : sms;
  return cudaSuccess;
}

}  // namespace tk_attn
