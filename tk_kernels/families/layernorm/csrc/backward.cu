// Residual add + LayerNorm backward. With xhat = (s - mean) * rstd and g = dy * w (fp32):
//   dx     = rstd * (g - mean(g) - xhat * mean(g * xhat)) + ds       (ds: gradient of the sum output)
//   ddelta = dx (the sum's gradient), written a second time in delta's dtype when that differs from x's
//   dw     = sum over rows of dy * xhat,   db = sum over rows of dy
//
// Tiling (config.cuh): a row group of 32 W threads per row, K chunks of 8 per thread in registers.
// The grid is persistent (as many CTAs as fit on the GPU at once, at most one per row-group tile):
// each row group walks rows  row0, row0 + grid * rows_per_cta, ...  and keeps its columns' dw / db
// partial sums across all its rows, so the weight / bias reductions need no second
// pass over the rows. The partial sums live in shared memory, one (2, cols) fp32 slice per row group
// (a thread reads and writes only its own columns: no synchronization; registers stay free for the
// row, so 3-4 CTAs fit per SM). At the end the CTA adds its groups' slices in a fixed order and writes
// one (2, cols) slice of the workspace; a tiny second kernel sums the grid's slices per column (fixed
// order too: the result is bitwise reproducible). Shared memory: rows_per_cta * 2 * cols * 4 B, at
// most 8 * 1024 * 8 B = 64 KB (opt-in above 48 KB; every sm_80+ GPU has >= 99 KB).
//
// Bytes moved per element: read dy (sizeof Y) + ds (sizeof X, if given) + s (sizeof X), write dx
// (sizeof X) + ddelta (sizeof D, if D != X); fp32 residual, bf16 dy and delta: 2 + 4 + 4 + 4 + 2 = 16 B.
// Plus 8 B per row (mean, rstd) and the workspace: 2 * cols * 4 B per CTA written and read once.
#include <algorithm>

#include "config.cuh"

namespace tk_ln {
namespace {

template <typename X, typename Y, typename D, int K>
__global__ void __launch_bounds__(256, 1) backward_kernel(BwdParams p, int W) {
  extern __shared__ float4 acc_smem4[];  // (groups, 2, cols) fp32: each row group's dw, db partials
  float *acc_smem = reinterpret_cast<float *>(acc_smem4);
  __shared__ float2 red[2][CTA_WARPS];
  const int G = 32 * W;
  const int groups = blockDim.x / G;
  const int group = threadIdx.x / G, t = threadIdx.x % G;
  const int chunks = p.cols / VEC;
  const float inv_cols = 1.f / float(p.cols);
  float *acc_w = acc_smem + int64_t(group) * 2 * p.cols, *acc_b = acc_w + p.cols;

  // a thread only ever touches its own columns of its group's slice: no synchronization needed
  const float zeros[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (c < chunks) {
      tk::store8(acc_w + c * VEC, zeros);
      tk::store8(acc_b + c * VEC, zeros);
    }
  }

  int parity = 0;
  for (int64_t row0 = int64_t(blockIdx.x) * groups; row0 < p.rows; row0 += int64_t(gridDim.x) * groups) {
    const int64_t row = row0 + group;
    const bool active = row < p.rows;
    const int64_t base = row * p.cols;
    float mean = 0.f, rstd = 0.f;
    if (active) {
      mean = p.mean[row];
      rstd = p.rstd[row];
    }
    float xh[K][8], g[K][8];
    float2 sums = make_float2(0.f, 0.f);  // (sum g, sum g * xhat)
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      if (active && c < chunks) {
        float w[8], aw[8], ab[8];
        tk::load8(xh[k], static_cast<const X *>(p.s) + base + c * VEC);
        tk::load8(g[k], static_cast<const Y *>(p.dy) + base + c * VEC);
        tk::load8(w, p.weight + c * VEC);
        tk::load8(aw, acc_w + c * VEC);
        tk::load8(ab, acc_b + c * VEC);
#pragma unroll
        for (int i = 0; i < 8; i++) {
          xh[k][i] = (xh[k][i] - mean) * rstd;
          aw[i] += g[k][i] * xh[k][i];
          ab[i] += g[k][i];
          g[k][i] *= w[i];
          sums.x += g[k][i];
          sums.y += g[k][i] * xh[k][i];
        }
        tk::store8(acc_w + c * VEC, aw);
        tk::store8(acc_b + c * VEC, ab);
      }
    }
    sums = row_group_sum(sums, W, red[parity]);
    parity ^= 1;
    const float mean_g = sums.x * inv_cols, mean_gx = sums.y * inv_cols;
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      if (active && c < chunks) {
        float dx[8];
#pragma unroll
        for (int i = 0; i < 8; i++) dx[i] = rstd * (g[k][i] - mean_g - xh[k][i] * mean_gx);
        if (p.ds != nullptr) {
          float ds[8];
          tk::load8(ds, static_cast<const X *>(p.ds) + base + c * VEC);
#pragma unroll
          for (int i = 0; i < 8; i++) dx[i] += ds[i];
        }
        tk::store8(static_cast<X *>(p.dx) + base + c * VEC, dx);
        if (p.ddelta != nullptr) tk::store8(static_cast<D *>(p.ddelta) + base + c * VEC, dx);
      }
    }
  }

  // this CTA's partial sums of dw, db (its groups' slices added in a fixed order: reproducible)
  // -> workspace slice blockIdx.x
  __syncthreads();
  float *out = p.partial + int64_t(blockIdx.x) * 2 * p.cols;
  for (int i = threadIdx.x * 4; i < 2 * p.cols; i += blockDim.x * 4) {
    float4 total = *reinterpret_cast<const float4 *>(acc_smem + i);
    for (int r = 1; r < groups; r++) {
      const float4 o = *reinterpret_cast<const float4 *>(acc_smem + int64_t(r) * 2 * p.cols + i);
      total.x += o.x; total.y += o.y; total.z += o.z; total.w += o.w;
    }
    *reinterpret_cast<float4 *>(out + i) = total;
  }
}

// dweight[c] = sum_i partial[i][0][c], dbias[c] = sum_i partial[i][1][c] (blockIdx.y: which one).
// 32 columns x 16 slices of the n_partial slices per CTA, then a fixed-order sum of the 16.
constexpr int REDUCE_SLICES = 16;

__global__ void __launch_bounds__(32 * REDUCE_SLICES) reduce_kernel(const float *partial, int n_partial, int cols,
                                                                    float *dweight, float *dbias) {
  __shared__ float part[REDUCE_SLICES][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  const int which = blockIdx.y;
  float acc = 0.f;
  if (col < cols)
    for (int i = threadIdx.y; i < n_partial; i += REDUCE_SLICES)
      acc += partial[(int64_t(i) * 2 + which) * cols + col];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.f;
#pragma unroll
    for (int j = 0; j < REDUCE_SLICES; j++) total += part[j][threadIdx.x];
    (which == 0 ? dweight : dbias)[col] = total;
  }
}

template <typename X, typename Y, typename D, int K>
void *kernel_of() {
  return reinterpret_cast<void *>(&backward_kernel<X, Y, D, K>);
}

// The backward kernel for p's dtypes and K (nullptr for an unsupported combination).
template <int K>
void *kernel_for(DType x, DType y, DType d) {
  if (y == DType::f32) return kernel_of<float, float, float, K>();
  if (y == DType::bf16) {
    if (x == DType::f32)
      return d == DType::f32 ? kernel_of<float, tk::bf16, float, K>() : kernel_of<float, tk::bf16, tk::bf16, K>();
    return kernel_of<tk::bf16, tk::bf16, tk::bf16, K>();
  }
  if (x == DType::f32)
    return d == DType::f32 ? kernel_of<float, tk::half, float, K>() : kernel_of<float, tk::half, tk::half, K>();
  return kernel_of<tk::half, tk::half, tk::half, K>();
}

void *kernel_for(int K, DType x, DType y, DType d) {
  switch (K) {
    case 1: return kernel_for<1>(x, y, d);
    case 2: return kernel_for<2>(x, y, d);
    case 3: return kernel_for<3>(x, y, d);
    case 4: return kernel_for<4>(x, y, d);
    default: return nullptr;
  }
}

struct Launch {
  void *kernel;
  Tiling tl;
  int smem;   // dynamic shared memory bytes
  int ctas;   // persistent grid size
};

cudaError_t plan_launch(int64_t rows, int cols, DType x, DType y, DType d, Launch &out) {
  const Tiling tl = tiling(cols);
  void *kernel = kernel_for(tl.K, x, y, d);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const int smem = tl.rows_per_cta * 2 * cols * int(sizeof(float));  // at most 64 KB (see config.cuh)
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t err;
  if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)) != cudaSuccess)
    return err;
  if ((err = cudaGetDevice(&dev)) != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return err;
  if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tl.threads(), smem)) != cudaSuccess)
    return err;
  const int64_t tiles = (rows + tl.rows_per_cta - 1) / tl.rows_per_cta;
  const int64_t ctas = std::min<int64_t>(tiles, int64_t(std::max(per_sm, 1)) * sms);
  out = {kernel, tl, smem, int(std::max<int64_t>(ctas, 1))};
  return cudaSuccess;
}

}  // namespace

int64_t backward_workspace_floats(const BwdParams &p) {
  Launch l{};
  if (plan_launch(p.rows, p.cols, p.x_t, p.dy_t, p.delta_t, l) != cudaSuccess) return -1;
  return int64_t(l.ctas) * 2 * p.cols;
}

cudaError_t layer_norm_backward(const BwdParams &p, cudaStream_t stream) {
  if (p.cols % VEC != 0 || p.cols < MIN_COLS || p.cols > MAX_COLS || p.rows < 0) return cudaErrorInvalidValue;
  if (!supported_dtypes(p.x_t, p.delta_t, p.dy_t)) return cudaErrorInvalidValue;
  Launch l{};
  cudaError_t err = plan_launch(p.rows, p.cols, p.x_t, p.dy_t, p.delta_t, l);
  if (err != cudaSuccess) return err;
  if (p.rows > 0) {
    int W = l.tl.W;
    void *args[] = {const_cast<BwdParams *>(&p), &W};
    err = cudaLaunchKernel(l.kernel, dim3(l.ctas), dim3(l.tl.threads()), args, size_t(l.smem), stream);
    if (err != cudaSuccess) return err;
  }
  // rows == 0: the kernel is not launched; the reduce kernel sums zero slices (writes zeros)
  const int n_partial = p.rows > 0 ? l.ctas : 0;
  const dim3 grid((p.cols + 31) / 32, p.dbias != nullptr ? 2 : 1), block(32, REDUCE_SLICES);
  reduce_kernel<<<grid, block, 0, stream>>>(p.partial, n_partial, p.cols, p.dweight, p.dbias);
  return cudaGetLastError();
}

}  // namespace tk_ln
