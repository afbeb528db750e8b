// Kernel xent_rows_kernel<T>: each row's log-sum-exp and loss from the logits GEMM's tile statistics
// (hopper_gemm.cu), for the Hopper path's dx GEMM and the loss.
//
//   Algorithm: one warp per row. Lane l merges the (max m_t, sum s_t of exp(l - m_t)) pairs of tiles
//   l, l + 32, ... (online: M = max, S = sum s_t exp(m_t - M)), then the warp merges its 32 pairs by
//   shuffles; lse = M + log S. Then, like softmax_xent.cu: row_loss = lse - logit[target] (fp32 from the
//   stored 16-bit logit), 0 for ignored rows, NaN for a target outside [0, V). For the dx GEMM it writes
//   lse2 = lse * log2(e) (+inf for an ignored row, so that its G row is exp2(-inf) = 0) and the target column
//   (-1 when there is no onehot to subtract).
//   Bytes: 8 per tile (197 tiles at V = 50304: 1.6 KB a row), one logit, a few words: a few microseconds a
//   chunk (8 rows per 256-thread block).
//
// Kernel finish_rows_kernel<T>: after the dx GEMM (which multiplied the softmax without its onehot), per row with a
//   target column t: dx = dx32 - W[t] rounded to T, and G[t] = exp2(L[t] log2 e - lse2) - 1 recomputed from the logit
//   (the value the softmax kernel would have written); other rows dx = dx32. One block per row, 4 columns a thread
//   step (C is a multiple of 8). Moves 6 C bytes a row (+ 2 C of W for a target): ~5 MB a 1024-row chunk.
#include "tk.cuh"

#include <cmath>

#include "classifier.h"

namespace tk_cls {
namespace {

constexpr float LOG2E = 1.4426950408889634f;
constexpr int ROWS_PER_BLOCK = 8;

__device__ __forceinline__ void merge(float &m, float &s, float mo, float so) {
  const float mn = fmaxf(m, mo), base = mn == -INFINITY ? 0.f : mn;
  s = s * exp2f((m - base) * LOG2E) + so * exp2f((mo - base) * LOG2E);
  m = mn;
}

template <typename T>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK) xent_rows_kernel(HopperXentParams p, int tiles) {
  const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= p.rows) return;
  float m = -INFINITY, s = 0.f;
  for (int t = lane; t < tiles; t += 32) {
    const float2 st = p.stats[int64_t(row) * tiles + t];
    merge(m, s, st.x, st.y);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float mo = __shfl_xor_sync(0xffffffffu, m, o), so = __shfl_xor_sync(0xffffffffu, s, o);
    merge(m, s, mo, so);
  }
  if (lane != 0) return;
  const int64_t target = p.targets[row];
  const bool ignored = target == p.ignore_index, in_range = target >= 0 && target < p.V;
  const float lse = m + logf(s);
  float loss;
  if (ignored) loss = 0.f;
  else if (in_range) loss = lse - tk::to_float(static_cast<const T *>(p.logits)[int64_t(row) * p.ldl + target]);
  else loss = NAN;
  p.row_loss[row] = loss;
  p.lse2[row] = ignored ? INFINITY : lse * LOG2E;
  p.tcol[row] = !ignored && in_range ? static_cast<int>(target) : -1;
}

template <typename T>
__global__ void __launch_bounds__(256) finish_rows_kernel(HopperXentParams p, T *dx) {
  const int row = blockIdx.x;
  const int t = p.tcol[row];
  const float *src = p.dx32 + int64_t(row) * p.C;
  const T *wt = static_cast<const T *>(p.w) + int64_t(t < 0 ? 0 : t) * p.C;
  T *out = dx + int64_t(row) * p.C;
  for (int c = 4 * threadIdx.x; c < p.C; c += 4 * blockDim.x) {
    float4 v = *reinterpret_cast<const float4 *>(src + c);
    if (t >= 0) {
      v.x -= tk::to_float(wt[c]), v.y -= tk::to_float(wt[c + 1]);
      v.z -= tk::to_float(wt[c + 2]), v.w -= tk::to_float(wt[c + 3]);
    }
    out[c] = tk::from_float<T>(v.x), out[c + 1] = tk::from_float<T>(v.y);
    out[c + 2] = tk::from_float<T>(v.z), out[c + 3] = tk::from_float<T>(v.w);
  }
  if (t >= 0 && threadIdx.x == 0) {
    const float l = tk::to_float(static_cast<const T *>(p.logits)[int64_t(row) * p.ldl + t]);
    static_cast<T *>(p.grad)[int64_t(row) * p.ldl + t] = tk::from_float<T>(exp2f(fmaf(l, LOG2E, -p.lse2[row])) - 1.f);
  }
}

}  // namespace

cudaError_t finish_rows(const HopperXentParams &p, void *dx, cudaStream_t stream) {
  if (p.rows < 0 || p.C % 8) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  if (p.dtype == DType::bf16) finish_rows_kernel<tk::bf16><<<p.rows, 256, 0, stream>>>(p, static_cast<tk::bf16 *>(dx));
  else finish_rows_kernel<tk::half><<<p.rows, 256, 0, stream>>>(p, static_cast<tk::half *>(dx));
  return cudaGetLastError();
}

cudaError_t xent_rows(const HopperXentParams &p, cudaStream_t stream) {
  if (p.rows < 0 || p.V < 1) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((p.rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK));
  if (p.dtype == DType::bf16) xent_rows_kernel<tk::bf16><<<grid, 32 * ROWS_PER_BLOCK, 0, stream>>>(p, logits_tiles(p.V));
  else xent_rows_kernel<tk::half><<<grid, 32 * ROWS_PER_BLOCK, 0, stream>>>(p, logits_tiles(p.V));
  return cudaGetLastError();
}

}  // namespace tk_cls
