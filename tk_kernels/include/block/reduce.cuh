// CTA-level reductions: every warp of the CTA takes part.
#pragma once
#include <cstdint>

namespace tk {

// The sum over slices i = 0 .. n - 1 of p[i * stride + j], in a fixed order (bitwise reproducible on a given GPU),
// for a CTA of dim3(32, WARPS) threads that reduces 32 consecutive columns j (one per lane, threadIdx.x): warp y adds
// slices y, y + WARPS, ... (UNROLL loads in flight), then warp 0 adds the WARPS warp sums in warp order. Columns
// with valid == false read nothing. Returns the total on warp 0 (threadIdx.y == 0), 0 elsewhere. Every thread of
// the CTA must call it (it has a __syncthreads). Users: the LayerNorm backward's dweight / dbias over its CTAs'
// partial sums, the MLP family's column sums over their row chunks.
template <int WARPS, int UNROLL>
__device__ __forceinline__ float sum_slices(const float *__restrict__ p, int n, int64_t stride, int j, bool valid) {
  __shared__ float part[WARPS][33];
  float acc = 0.f;
  if (valid) {
#pragma unroll UNROLL
    for (int i = threadIdx.y; i < n; i += WARPS) acc += p[int64_t(i) * stride + j];
  }
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.y == 0 && valid) {
#pragma unroll
    for (int w = 0; w < WARPS; w++) total += part[w][threadIdx.x];
  }
  return total;
}

}  // namespace tk
