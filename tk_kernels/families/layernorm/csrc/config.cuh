// Row tiling shared by the forward and backward kernels of the LayerNorm family.
//
// A row of `cols` elements is split into chunks of 8 (one 16-byte vector of a 16-bit type). A row is
// owned by a "row group" of 32 * W threads (W warps); thread t of the group holds chunks
// t, t + 32W, t + 64W, ... (at most K of them) in registers as float[K][8], so consecutive threads
// touch consecutive 16-byte vectors (fully coalesced 512-byte warp accesses) and each element is
// loaded once. Widths up to 1024 take one warp per row (W = 1, K = ceil(cols / 256) in 1..4); wider
// rows take W = ceil(cols / 1024) warps (2..8) with K = ceil(cols / (256 W)), and their row sums
// go through shared memory. A CTA has 256 threads when W divides 8 (8 / W rows per CTA), else W warps.
#pragma once
#include "tk.cuh"
#include "layernorm.h"

namespace tk_ln {

constexpr int CTA_WARPS = 8;

struct Tiling {
  int W;     // warps per row
  int K;     // chunks of 8 per thread (template argument of the kernels)
  int rows_per_cta;
  int threads() const { return rows_per_cta * W * 32; }
};

inline Tiling tiling(int cols) {
  const int chunks = cols / VEC;
  const int W = chunks <= 128 ? 1 : (chunks + 127) / 128;
  const int K = (chunks + 32 * W - 1) / (32 * W);
  const int rows_per_cta = CTA_WARPS % W == 0 ? CTA_WARPS / W : 1;
  return {W, K, rows_per_cta};
}

// The element type of each DType.
template <DType D> struct ctype;
template <> struct ctype<DType::f32> { using type = float; };
template <> struct ctype<DType::bf16> { using type = tk::bf16; };
template <> struct ctype<DType::f16> { using type = tk::half; };

// Sum of `v` over the row group of the calling thread (all threads of the CTA must call it, in the
// same order; `red` is CTA_WARPS slots of shared memory used by this call site only, or by every
// other call so that consecutive uses are separated by a __syncthreads).
template <typename V>
__device__ __forceinline__ V row_group_sum(V v, int W, V *red) {
  v = tk::warp_sum(v);
  if (W == 1) return v;
  const int warp = tk::warpid();
  if (tk::laneid() == 0) red[warp] = v;
  __syncthreads();
  const int first = warp - warp % W;
  V total = red[first];
  for (int i = 1; i < W; i++) {
    const V o = red[first + i];
    if constexpr (sizeof(V) == sizeof(float)) total += o;
    else { total.x += o.x; total.y += o.y; }
  }
  return total;
}

}  // namespace tk_ln
