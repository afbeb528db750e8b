// Residual add + LayerNorm forward:  s = x + delta (rounded to x's dtype),  y = (s - mean) * rstd * w + b
// with mean = sum(s) / C, var = sum((s - mean)^2) / C (biased, two passes over registers), rstd =
// 1 / sqrt(var + eps), all in fp32. Without delta it is the plain LayerNorm of x (s is not written).
//
// Tiling (config.cuh): a row group of 32 W threads owns one row, each thread K chunks of 8 elements
// held in registers, so a row is read once and both statistics come from registers; row sums are
// warp shuffles (plus one shared-memory exchange per sum when W > 1). One row per row group, no loop:
// rows / rows_per_cta CTAs.
//
// Bytes moved per element: read x (sizeof X) + delta (sizeof D), write s (sizeof X) + y (sizeof Y);
// fp32 residual, bf16 delta and y: 4 + 2 + 4 + 2 = 12 B. Plus 8 B per row (mean, rstd) and the
// weight / bias vectors (L1/L2 resident). Nothing else.
#include "config.cuh"

namespace tk_ln {
namespace {

template <typename X, typename D, typename Y, int K>
__global__ void __launch_bounds__(256, 1) forward_kernel(FwdParams p, int W) {
  __shared__ float red_sum[CTA_WARPS], red_var[CTA_WARPS];
  const int G = 32 * W;                   // threads per row group
  const int group = threadIdx.x / G, t = threadIdx.x % G;
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / G) + group;
  const bool active = row < p.rows;
  const int chunks = p.cols / VEC;
  const int64_t base = row * p.cols;

  float v[K][8];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (active && c < chunks) {
      tk::load8(v[k], static_cast<const X *>(p.x) + base + c * VEC);
      if (p.delta != nullptr) {
        float d[8];
        tk::load8(d, static_cast<const D *>(p.delta) + base + c * VEC);
#pragma unroll
        for (int i = 0; i < 8; i++) v[k][i] += d[i];
        tk::round_to<X>(v[k]);
        tk::store8(static_cast<X *>(p.s) + base + c * VEC, v[k]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; i++) v[k][i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 8; i++) sum += v[k][i];
  }
  const float inv_cols = 1.f / float(p.cols);
  const float mean = row_group_sum(sum, W, red_sum) * inv_cols;

  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    if (t + k * G < chunks) {  // padding slots hold 0, not the mean
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const float d = v[k][i] - mean;
        sq += d * d;
      }
    }
  }
  const float rstd = rsqrtf(row_group_sum(sq, W, red_var) * inv_cols + p.eps);

  if (!active) return;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (c < chunks) {
      float w[8], b[8], out[8];
      tk::load8(w, p.weight + c * VEC);
      if (p.bias != nullptr) tk::load8(b, p.bias + c * VEC);
      else {
#pragma unroll
        for (int i = 0; i < 8; i++) b[i] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < 8; i++) out[i] = (v[k][i] - mean) * rstd * w[i] + b[i];
      tk::store8(static_cast<Y *>(p.y) + base + c * VEC, out);
    }
  }
  if (t == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
}

template <typename X, typename D, typename Y>
cudaError_t launch(const FwdParams &p, cudaStream_t stream) {
  const Tiling tl = tiling(p.cols);
  const int64_t ctas = (p.rows + tl.rows_per_cta - 1) / tl.rows_per_cta;
  if (ctas > INT32_MAX) return cudaErrorInvalidConfiguration;
  const dim3 grid{unsigned(ctas)}, block{unsigned(tl.threads())};
  switch (tl.K) {
    case 1: forward_kernel<X, D, Y, 1><<<grid, block, 0, stream>>>(p, tl.W); break;
    case 2: forward_kernel<X, D, Y, 2><<<grid, block, 0, stream>>>(p, tl.W); break;
    case 3: forward_kernel<X, D, Y, 3><<<grid, block, 0, stream>>>(p, tl.W); break;
    case 4: forward_kernel<X, D, Y, 4><<<grid, block, 0, stream>>>(p, tl.W); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t layer_norm_forward(const FwdParams &p, cudaStream_t stream) {
  if (p.cols % VEC != 0 || p.cols < MIN_COLS || p.cols > MAX_COLS || p.rows < 0) return cudaErrorInvalidValue;
  if (!supported_dtypes(p.x_t, p.delta_t, p.y_t)) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  const DType x = p.x_t, d = p.delta_t, y = p.y_t;
  if (y == DType::f32) return launch<float, float, float>(p, stream);
  if (y == DType::bf16) {
    if (x == DType::f32) return d == DType::f32 ? launch<float, float, tk::bf16>(p, stream) : launch<float, tk::bf16, tk::bf16>(p, stream);
    return launch<tk::bf16, tk::bf16, tk::bf16>(p, stream);
  }
  if (x == DType::f32) return d == DType::f32 ? launch<float, float, tk::half>(p, stream) : launch<float, tk::half, tk::half>(p, stream);
  return launch<tk::half, tk::half, tk::half>(p, stream);
}

}  // namespace tk_ln
