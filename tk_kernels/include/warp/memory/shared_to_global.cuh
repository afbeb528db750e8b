// Shared -> global tile stores, cooperative over NT threads, 16 bytes per thread per step.
//
// store<NT>(dst, src, c): rows [c.row(), c.row() + src.rows) and columns [c.col(), c.col() + src.cols) of
// the matrix of `dst` at c's leading indices, from the shared tile `src`. Rows >= dst.rows() are skipped.
// The caller synchronises (so the tile is complete) before calling.
#pragma once
#include "../../types/global/gl.cuh"
#include "../../types/shared/st.cuh"

namespace tk {

template <int NT = WARP_THREADS, typename T, int N, any_st ST>
__device__ __forceinline__ void store(const gl<T, N> &dst, const ST &src, const coord<N> &c) {
  static_assert(std::same_as<typename ST::dtype, T>, "store(gl, st): dtypes differ");
  constexpr int CPR = ST::cols / 8;
  constexpr int CHUNKS = ST::rows * CPR;
  const int tid = threadIdx.x % NT;
  if constexpr (NT % CPR == 0 && CHUNKS % NT == 0) {
    // Fast path: a fixed 16-byte column chunk per thread, rows at a constant step (see load_async).
    constexpr int ROW_STEP = NT / CPR;
    const int r_first = tid / CPR, cc = (tid % CPR) * 8;
    T *g = dst.at(c, c.row() + r_first, c.col() + cc);
    const int64_t g_step = int64_t(ROW_STEP) * dst.row_stride();
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; i++) {
      const int r = r_first + i * ROW_STEP;
      if (c.row() + r < dst.rows()) *reinterpret_cast<int4 *>(g) = *reinterpret_cast<const int4 *>(src.ptr(r, cc));
      g += g_step;
    }
  } else {
    T *head = dst.at(c, 0, c.col());
#pragma unroll
    for (int q = tid; q < CHUNKS; q += NT) {
      const int r = q / CPR, cc = (q % CPR) * 8;
      const int t = c.row() + r;
      if (t < dst.rows()) {
        const int4 v = *reinterpret_cast<const int4 *>(src.ptr(r, cc));
        *reinterpret_cast<int4 *>(head + int64_t(t) * dst.row_stride() + cc) = v;
      }
    }
  }
}

}  // namespace tk
