// Global -> shared tile loads (cp.async, 16 bytes per copy), cooperative over NT threads.
//
// load_async<NT>(dst, src, c): rows [c.row(), c.row() + dst.rows) and cols [c.col(), c.col() + dst.cols)
// of the matrix of `src` at c's leading indices into the shared tile `dst`. Rows >= src.rows() are ZERO-FILLED
// (ragged tails need no padding copies). NT = number of cooperating threads (32 = one warp,
// blockDim.x = whole CTA); thread i of the group is threadIdx.x % NT. The caller commits/waits
// (commit_group / wait_group) and synchronises before reading the tile.
#pragma once
#include "../../types/global/gl.cuh"
#include "../../types/shared/st.cuh"
#include "../../types/shared/sv.cuh"
#include "async.cuh"

namespace tk {

template <int NT = WARP_THREADS, any_st ST, typename T, int N>
__device__ __forceinline__ void load_async(ST &&dst, const gl<T, N> &src, const coord<N> &c) {
  using S = std::remove_cvref_t<ST>;
  static_assert(std::same_as<typename S::dtype, T>, "load_async: shared tile and global layout dtypes differ");
  constexpr int CPR = S::cols / 8;                 // 16-byte chunks per row
  constexpr int CHUNKS = S::rows * CPR;
  const int tid = threadIdx.x % NT;
  if constexpr (NT % CPR == 0 && CHUNKS % NT == 0) {
    // Fast path: each thread owns one fixed 16-byte column chunk and walks rows with a constant
    // step, so the global address advances by one 64-bit add and the shared offset by a constant.
    constexpr int ROW_STEP = NT / CPR;
    const int r_first = tid / CPR, cc = (tid % CPR) * 8;
    const T *g = src.at(c, c.row() + r_first, c.col() + cc);
    const int64_t g_step = int64_t(ROW_STEP) * src.row_stride();
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; i++) {
      const int r = r_first + i * ROW_STEP;
      const bool valid = c.row() + r < src.rows();
      cp_async_16(dst.ptr(r, cc), valid ? g : src.ptr, valid);
      g += g_step;
    }
  } else {
    const T *head = src.at(c, 0, c.col());
#pragma unroll
    for (int q = tid; q < CHUNKS; q += NT) {
      const int r = q / CPR, cc = (q % CPR) * 8;
      const int t = c.row() + r;
      const bool valid = t < src.rows();
      const T *g = valid ? head + int64_t(t) * src.row_stride() + cc : src.ptr;
      cp_async_16(dst.ptr(r, cc), g, valid);
    }
  }
}

// Shared vector from a contiguous fp32 (or other 4-byte) array: dst[i] = src[i] for i < n_valid,
// else 0. 4-byte copies, so src needs only 4-byte alignment.
template <int NT = WARP_THREADS, int N>
__device__ __forceinline__ void load_async(sv<float, N> &dst, const float *src, int n_valid) {
  const int tid = threadIdx.x % NT;
#pragma unroll
  for (int i = tid; i < N; i += NT) {
    const bool valid = i < n_valid;
    cp_async_4(&dst.data[i], valid ? src + i : src, valid);
  }
}

}  // namespace tk
