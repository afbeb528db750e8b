// fp32 atomic-add of a register tile into a row-major fp32 array whose row pitch is a compile-time
// constant (one warp). Added for the attention backward (dQ partial sums into a (B, H, T, D)
// contiguous fp32 workspace, pitch D).
//
//   atomic_add<PITCH>(dst, src, n_rows):  dst[r * PITCH + c] += src[r][c]  for r < n_rows
//
// Compared with atomic_add(gl<float>, rt, coord) (runtime t_stride): with PITCH known, every
// fragment's offset from the lane's first element is an immediate, so the warp needs one 64-bit
// address instead of one per fragment (this matters in kernels that run at the register limit).
// row_l tiles only. On sm_90+ each pair is one vector red.add (atomicAdd(float2 *)); earlier
// architectures issue two scalar red.add.
#pragma once
#include "register_to_global.cuh"  // detail::red_add_pair

namespace tk {

template <int PITCH, fp32_rt RT>
__device__ __forceinline__ void atomic_add(float *dst, const RT &src, int n_rows) {
  static_assert(RT::is_row, "atomic_add<PITCH>(float*, rt, n): row_l tiles only");
  static_assert(PITCH % 2 == 0 && PITCH >= RT::cols, "atomic_add<PITCH>: pitch must be even and >= the tile width");
  const int g = laneid() >> 2, t = laneid() & 3;
  float *lane_base = dst + g * PITCH + 2 * t;     // this lane's (row g, col 2t)
  if (n_rows >= RT::rows) {
    // Whole tile in range (the common case): no per-row guards, every address is lane_base + immediate.
    // (Plain loops here, not for_each_pair: with the lambda ptxas spills in the two-barrier split kernel.)
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          detail::red_add_pair(lane_base + (16 * i + 8 * (k & 1)) * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
  } else {
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const int r = 16 * i + 8 * (k & 1);     // row offset of pair k beyond row g
          if (g + r < n_rows) detail::red_add_pair(lane_base + r * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
        }
  }
}

}  // namespace tk
