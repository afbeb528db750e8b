// Residual add + LayerNorm backward. With xhat = (s - mean) * rstd and g = dy * w (fp32):
//   dx     = rstd * (g - mean(g) - xhat * mean(g * xhat)) + ds       (ds: gradient of the sum output)
//   ddelta = dx (the sum's gradient), written a second time in delta's dtype when that differs from x's
//   dw     = sum over rows of dy * xhat,   db = sum over rows of dy
//   ddelta_bias = sum over rows of ddelta as stored (where the forward had a delta_bias: layernorm.h)
// computed as  dx = t - rstd * mean(g) - rstd * mean(g * xhat) * xhat  with t = rstd * g + ds formed
// while the row sums are taken, so a thread keeps 16 floats per chunk across the row sum (xhat, t).
//
// Bytes per element: read dy (sizeof Y) + ds (sizeof X, if given) + s (sizeof X), write dx (sizeof
// X) + ddelta (sizeof D, if D != X); fp32 residual, bf16 dy and delta: 2 + 4 + 4 + 4 + 2 = 16 B. Plus
// 8 B per row (mean, rstd) and the dw / db workspace (2 * cols * 4 B per CTA, written once, read once
// by the reduce kernel: ~1.5 % of the bytes at C = 768, less when wider).
//
// Design (a stream, like the forward: bytes in flight per SM set its speed):
//  - Tiling (config.cuh, max_k = 3): a row group of G threads per row, K <= 3 chunks of 8 per thread
//    (K = 4 only at C > 6144, where 256 threads cannot do with 3). C = 768: one warp per row, K = 3;
//    C = 1024..2048: 2..4 warps per row, K = 2 (a shared-memory exchange + __syncthreads per row sum).
//    Only the last chunk of a thread can fall outside the row (K = ceil(chunks / G)), so the
//    bounds test is compiled in for k = K - 1 only.
//  - All loads of a row (mean, rstd, s, dy, ds, every chunk) are issued before the first use, with no
//    store in between, and held as loaded (raw8: 4 registers per 16-bit chunk, 8 per fp32 chunk)
//    until used: up to K * 80 B in flight per thread (fp32 s and ds, 16-bit dy), 240 B at C = 768.
//  - Registers (ptxas, fp32 s / bf16 dy): 126 at K = 3, 122 at K = 2, under __launch_bounds__(256, 2):
//    2 CTAs (16 warps) per SM, ~120 KB in flight per SM at C = 768 and ~80 KB at C = 2048, against
//    the ~30-50 KB that the DRAM latency asks for. A cap of 80 (3 CTAs) spills at K = 3 and at K = 2
//    for fp32 s; K = 4 (C > 6144 only) gets (256, 1) and uses ~160. Much of the rest is 64-bit
//    addresses of the K chunks (G is a run-time value, so chunk offsets are not immediates): with G
//    a template argument ptxas fits K = 2 into 80 registers (3 CTAs) without spills and K = 3 into
//    114, at 2-3x the instantiations; not done while 2 CTAs keep enough bytes in flight.
//  - Persistent grid (as many CTAs as fit on the GPU at once, at most one per row tile): each row
//    group walks rows  row0, row0 + grid * rows_per_cta, ...  and keeps its columns' dw / db partial
//    sums across all its rows, so the weight / bias reductions need no second pass over the rows.
//    The partial sums live in shared memory, one (2, cols) fp32 slice per row group (a thread reads
//    and writes only its own columns: no synchronization), which keeps registers for the loads in
//    flight (in registers they would cost 16 per chunk). Shared memory: rows_per_cta * 8 * cols B,
//    <= 64 KB (48 KB at C = 768, 32 KB at C = 1024 and 2048).
//  - At the end the CTA adds its groups' slices in a fixed order and writes one (2, cols) slice of
//    the workspace; a second kernel sums the grid's slices per column in a fixed order too (the
//    result is bitwise reproducible): 32 warps per 32 columns, each warp a strided subset of the
//    slices with 8 loads in flight, then a fixed-order sum of the 32 warp sums.
//
// Before (H200, fwd + bwd at N = 16384, fp32 x, bf16 delta / y, do_bench with L2 flush): 0.520 ms at
// C = 768 and 0.712 ms at C = 2048 (eager PyTorch 0.339 / 0.737) with a warp-per-row tiling whose
// loads were interleaved with stores (one memory latency per chunk) and a backward of one 8-warp CTA
// per SM (141 registers under __launch_bounds__(256, 1)). Target: >= 2x the faster of eager and
// torch.compile and >= 70 % of the 4.27 TB/s copy bandwidth over 28 N C + 16 N bytes.
// Measured with this design (H200, fwd + bwd at N = 16384; bench/RESULTS.md):
//   - session 3 (call 4), bench/bench_layernorm.py, the op through its Python autograd: 0.196 / 0.257 /
//     0.298 / 0.272 ms at C = 768 / 1024 / 1600 / 2048 = 1.80 / 1.83 / 2.46 / 3.45 TB/s, 1.70x / 1.57x /
//     2.01x / 2.70x the faster of eager and torch.compile (42 % of the copy bandwidth at 768);
//   - session 4 (call 1), the same kernels as CUDA-graph replays (GPU time alone): 0.1115 / 0.1506 /
//     0.2179 / 0.2712 ms = 3.16 / 3.12 / 3.37 / 3.47 TB/s, 74-81 % of the copy bandwidth at every width,
//     so the gap at 768 was host time (~85 us per fwd + bwd: mostly PyTorch's autograd floor, session 4's
//     dev/layernorm_host.py), not the kernels;
//   - session 5 (call 4), through the C++ autograd op the model calls now: 0.1126 / 0.1520 / 0.2730 ms at
//     C = 768 / 1024 / 2048 = 3.13 / 3.09 / 3.44 TB/s, 2.96x / 2.65x / 2.69x the faster of eager and
//     torch.compile, 73 / 72 / 81 % of the copy bandwidth: the targets are met at 768 and at 2048.
//   Against torch.compile's fused kernel inside a CUDA graph (0.127 ms at C = 768) these kernels are 1.14x,
//   not 2x (session 4, call 1).
//
// delta_bias's gradient (ddelta_bias given): a third column-sum slice beside dw / db, accumulated in the store
// phase from the ddelta values as stored (rounded to delta's dtype), so the GEMM whose bias it is needs no
// column-sum pass over its output gradient (24 such passes in a GPT-2 step, ~15 us each on an H200, session 25).
// Shared memory becomes 3 / 2 of the above (72 KB a CTA at C = 768: still 2 CTAs an SM); registers (ptxas, sm_90a,
// fp32 s / bf16 dy): 121 at K = 3 and 125 at K = 2 (126 / 122 before), 128 / 119 with dropout, no spills.
// Measured (H100, session 29, GPT-2 124M step under CUDA graphs, alternated): 31.47 / 31.40 ms -> 31.20 / 31.25 ms
// with model.py's c_proj biases moved here (the forward's share of that: +1.2 to +2.1 us a call, below); session 30
// (H100, before the merge): GPT-2 31.61 / 31.65 -> 31.48 / 31.38 ms, GPT-2 medium 83.11 / 83.20 -> 82.44 / 82.41 ms.
//
// Dropout (DROP = true: the forward had dropout on delta; ops.py's tk::dropout_add_layer_norm_bwd):
//     ddelta = keep ? round_D(dx * (1 / (1 - p))) : 0       (dx = the gradient of the sum s, as above)
// always written as its own tensor (also where delta's dtype is x's: the two gradients now differ). The
// mask is regenerated chunk by chunk in the store phase (dropout.cuh: the forward's counters, from the
// (seed, offset) the forward wrote to rng_state, read here as a captured tk::philox_state), after the row
// sums, when the raw loads are dead: registers (ptxas) 95-128 at K = 1..3 under the same (256, 2) and
// 187-218 at K = 4 under (256, 1), no spills; SASS at fp32 x / bf16 delta, K = 3, sm_90a: 1688
// instructions with dropout, 1320 without. Bytes: as without dropout where delta's dtype differs from x's
// (autocast: the masked ddelta replaces the plain copy), one more write of ddelta where it is x's (pure
// 16-bit models). NOT MEASURED YET on a GPU (bench/bench_layernorm_dropout.py).
#include <algorithm>
#include <mutex>

#include "config.cuh"
#include "dropout.cuh"

namespace tk_ln {
namespace {

constexpr int BWD_MAX_K = 3;
// Column sums a row group keeps: dw and db, and the column sums of ddelta where delta_bias's gradient is asked for.
__host__ __device__ inline int column_sums(const BwdParams &p) { return p.ddelta_bias != nullptr ? 3 : 2; }
// dynamic shared memory of a CTA: rows_per_cta * column_sums * cols floats, rows_per_cta * cols <= 8192 for
// every width (K <= 3: (256 / G) * 8 * 3G = 6144; K = 4: G = 256, one row of <= 8192)
constexpr int BWD_MAX_SMEM = 3 * MAX_COLS * int(sizeof(float));

// DROP: the forward had dropout on delta (dropout.cuh): ddelta = keep * dx / (1 - p), always written.
template <typename X, typename Y, typename D, int K, bool DROP>
__global__ void __launch_bounds__(CTA_THREADS, K >= 4 ? 1 : 2) backward_kernel(const BwdParams p, const int G,
                                                                                const dropout_args drop) {
  extern __shared__ float4 acc_smem4[];  // (groups, nsums, cols) fp32: each row group's dw, db (, ddelta) partials
  float *acc_smem = reinterpret_cast<float *>(acc_smem4);
  const int nsums = column_sums(p);
  __shared__ float2 red[2][CTA_WARPS];
  const int groups = CTA_THREADS / G;
  const int group = threadIdx.x / G, t = threadIdx.x % G;
  const int chunks = p.cols / VEC;
  const float inv_cols = 1.f / float(p.cols);
  // cols is a multiple of 8: both slices are 32-byte aligned (tell the compiler, for 16-byte LDS/STS)
  float *acc_w = static_cast<float *>(__builtin_assume_aligned(acc_smem + group * nsums * p.cols, 16));
  float *acc_b = static_cast<float *>(__builtin_assume_aligned(acc_w + p.cols, 16));
  float *acc_d = p.ddelta_bias != nullptr ? static_cast<float *>(__builtin_assume_aligned(acc_b + p.cols, 16))
                                          : nullptr;
  const bool has_ds = p.ds != nullptr;
  const float *__restrict__ weight = p.weight;
  tk::dropout_key key{};
  if constexpr (DROP) {
    uint64_t seed, offset;
    key = tk::load_dropout_key(drop.rng, drop.threshold, seed, offset);
  }

  // a thread only ever touches its own columns of its group's slice: no synchronization needed
  const float zeros[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (c < chunks) {
      tk::store8(acc_w + c * VEC, zeros);
      tk::store8(acc_b + c * VEC, zeros);
      if (acc_d != nullptr) tk::store8(acc_d + c * VEC, zeros);
    }
  }

  int parity = 0;
  for (int64_t row0 = int64_t(blockIdx.x) * groups; row0 < p.rows; row0 += int64_t(gridDim.x) * groups) {
    const int64_t row = row0 + group;
    const bool active = row < p.rows;
    const int64_t base = row * p.cols;
    const X *__restrict__ s = static_cast<const X *>(p.s) + base;
    const Y *__restrict__ dy = static_cast<const Y *>(p.dy) + base;
    const X *__restrict__ ds = static_cast<const X *>(p.ds) + base;

    // 1. every load of the row first
    float mean = 0.f, rstd = 0.f;
    if (active) {
      mean = p.mean[row];
      rstd = p.rstd[row];
    }
    raw8<X> rs[K], rds[K];
    raw8<Y> rdy[K];
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      const bool ok = active && (k < K - 1 || c < chunks);
      if (ok) { load_raw(rs[k], s + c * VEC); load_raw(rdy[k], dy + c * VEC); }
      else { zero_raw(rs[k]); zero_raw(rdy[k]); }
      if (ok && has_ds) load_raw(rds[k], ds + c * VEC);
      else zero_raw(rds[k]);
    }

    // 2. dw / db partials, the row sums, t = rstd * g + ds
    float xh[K][8], tt[K][8];
    float2 sums = make_float2(0.f, 0.f);  // (sum g, sum g * xhat)
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      to_f32(xh[k], rs[k]);
      to_f32(tt[k], rds[k]);
      if (active && (k < K - 1 || c < chunks)) {
        float w[8], aw[8], ab[8], gy[8];
        to_f32(gy, rdy[k]);
        tk::load8(w, weight + c * VEC);
        tk::load8(aw, acc_w + c * VEC);
        tk::load8(ab, acc_b + c * VEC);
#pragma unroll
        for (int i = 0; i < 8; i++) {
          xh[k][i] = (xh[k][i] - mean) * rstd;
          aw[i] += gy[i] * xh[k][i];
          ab[i] += gy[i];
          const float g = gy[i] * w[i];
          sums.x += g;
          sums.y += g * xh[k][i];
          tt[k][i] += rstd * g;
        }
        tk::store8(acc_w + c * VEC, aw);
        tk::store8(acc_b + c * VEC, ab);
      }
    }
    sums = row_group_sum(sums, G, red[parity]);
    parity ^= 1;
    const float c1 = rstd * sums.x * inv_cols, c2 = rstd * sums.y * inv_cols;

    // 3. stores: dx, ddelta
    if (active) {
      X *__restrict__ dx = static_cast<X *>(p.dx) + base;
      D *__restrict__ ddelta = static_cast<D *>(p.ddelta) + base;
#pragma unroll
      for (int k = 0; k < K; k++) {
        const int c = t + k * G;
        if (k < K - 1 || c < chunks) {
          float out[8];
#pragma unroll
          for (int i = 0; i < 8; i++) out[i] = tt[k][i] - c1 - c2 * xh[k][i];
          tk::store8(dx + c * VEC, out);
          if constexpr (DROP) {
            // the forward's keep mask of this chunk (element index / 8 = row * chunks + c), regenerated
            dropout8<D>(out, key, drop.threshold << 16, uint64_t(row) * chunks + c, drop.keep_scale);
            tk::store8(ddelta + c * VEC, out);
          } else if (p.ddelta != nullptr) {
            tk::store8(ddelta + c * VEC, out);
          }
          if (acc_d != nullptr) {  // delta_bias's gradient: the column sums of ddelta as stored
            float a[8];
            if constexpr (!DROP) tk::round_to<D>(out);  // (dropout8 rounded it already)
            tk::load8(a, acc_d + c * VEC);
#pragma unroll
            for (int i = 0; i < 8; i++) a[i] += out[i];
            tk::store8(acc_d + c * VEC, a);
          }
        }
      }
    }
  }

  // this CTA's partial sums of dw, db (, ddelta) (its groups' slices added in a fixed order: reproducible)
  // -> workspace slice blockIdx.x
  __syncthreads();
  const int slice = nsums * p.cols;
  float *out = p.partial + int64_t(blockIdx.x) * slice;
  for (int i = threadIdx.x * 4; i < slice; i += CTA_THREADS * 4) {
    float4 total = *reinterpret_cast<const float4 *>(acc_smem + i);
    for (int r = 1; r < groups; r++) {
      const float4 o = *reinterpret_cast<const float4 *>(acc_smem + int64_t(r) * slice + i);
      total.x += o.x; total.y += o.y; total.z += o.z; total.w += o.w;
    }
    *reinterpret_cast<float4 *>(out + i) = total;
  }
}

// out[j] = sum_i partial[i][j] for j < nsums * cols (partial: n_partial slices of nsums * cols floats, (dw, db) or
// (dw, db, ddelta); the first cols go to dweight, the next to dbias (if not nullptr), the last to ddelta_bias).
// A CTA takes 32 consecutive j (tk::sum_slices: warp w of its 32 sums slices w, w + 32, ..., 8 loads in flight,
// then warp 0 adds the 32 warp sums in order).
constexpr int REDUCE_WARPS = 32;

__global__ void __launch_bounds__(32 * REDUCE_WARPS) reduce_kernel(const float *__restrict__ partial, int n_partial,
                                                                   int cols, int nsums, float *dweight, float *dbias,
                                                                   float *ddelta_bias) {
  const int j = blockIdx.x * 32 + threadIdx.x, which = j / cols;
  float *dst = which == 0 ? dweight : which == 1 ? dbias : ddelta_bias;
  const bool wanted = j < nsums * cols && dst != nullptr;
  const float total = tk::sum_slices<REDUCE_WARPS, 8>(partial, n_partial, int64_t(nsums) * cols, j, wanted);
  if (threadIdx.y == 0 && wanted) dst[j - which * cols] = total;
}

template <typename X, typename Y, typename D, int K, bool DROP>
void *kernel_of() {
  return reinterpret_cast<void *>(&backward_kernel<X, Y, D, K, DROP>);
}

// The backward kernel for p's dtypes, K and dropout (nullptr for an unsupported combination).
template <int K, bool DROP>
void *kernel_for(DType x, DType y, DType d) {
  if (y == DType::f32) return kernel_of<float, float, float, K, DROP>();
  if (y == DType::bf16) {
    if (x == DType::f32)
      return d == DType::f32 ? kernel_of<float, tk::bf16, float, K, DROP>()
                             : kernel_of<float, tk::bf16, tk::bf16, K, DROP>();
    return kernel_of<tk::bf16, tk::bf16, tk::bf16, K, DROP>();
  }
  if (x == DType::f32)
    return d == DType::f32 ? kernel_of<float, tk::half, float, K, DROP>() : kernel_of<float, tk::half, tk::half, K, DROP>();
  return kernel_of<tk::half, tk::half, tk::half, K, DROP>();
}

template <bool DROP>
void *kernel_for(int K, DType x, DType y, DType d) {
  switch (K) {
    case 1: return kernel_for<1, DROP>(x, y, d);
    case 2: return kernel_for<2, DROP>(x, y, d);
    case 3: return kernel_for<3, DROP>(x, y, d);
    case 4: return kernel_for<4, DROP>(x, y, d);
    default: return nullptr;
  }
}

void *kernel_for(int K, DType x, DType y, DType d, bool drop) {
  return drop ? kernel_for<true>(K, x, y, d) : kernel_for<false>(K, x, y, d);
}

struct Launch {
  void *kernel;
  Tiling tl;
  int smem;   // dynamic shared memory bytes
  int ctas;   // persistent grid size
};

// CTAs of `kernel` that fit on the current device at once with `smem` bytes of dynamic shared
// memory (raises the kernel's shared-memory limit to BWD_MAX_SMEM first). Cached per (device,
// kernel, smem): the backward runs once per LayerNorm per step, and these queries cost microseconds
// of host time.
cudaError_t resident_ctas(void *kernel, int smem, int &out) {
  struct Entry { int dev; void *kernel; int smem; int ctas; };
  static std::mutex mu;
  static Entry cache[64];
  static int n_cached = 0;
  int dev = 0;
  cudaError_t err;
  if ((err = cudaGetDevice(&dev)) != cudaSuccess) return err;
  {
    const std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < n_cached; i++)
      if (cache[i].dev == dev && cache[i].kernel == kernel && cache[i].smem == smem) {
        out = cache[i].ctas;
        return cudaSuccess;
      }
  }
  int sms = 0, per_sm = 0;
  // the limit is the largest any width needs (not this smem: a later, larger width hitting the cache
  // must find it set); it does not change what the occupancy query below sees
  if ((err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWD_MAX_SMEM)) != cudaSuccess)
    return err;
  if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return err;
  if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, CTA_THREADS, smem)) != cudaSuccess)
    return err;
  out = std::max(per_sm, 1) * sms;
  const std::lock_guard<std::mutex> lock(mu);
  if (n_cached < 64) cache[n_cached++] = {dev, kernel, smem, out};
  return cudaSuccess;
}

cudaError_t plan_launch(int64_t rows, int cols, int nsums, DType x, DType y, DType d, bool drop, Launch &out) {
  const Tiling tl = tiling(cols, BWD_MAX_K);
  void *kernel = kernel_for(tl.K, x, y, d, drop);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  const int smem = tl.rows_per_cta() * nsums * cols * int(sizeof(float));  // <= BWD_MAX_SMEM
  int resident = 0;
  const cudaError_t err = resident_ctas(kernel, smem, resident);
  if (err != cudaSuccess) return err;
  const int64_t tiles = (rows + tl.rows_per_cta() - 1) / tl.rows_per_cta();
  out = {kernel, tl, smem, int(std::max<int64_t>(std::min<int64_t>(tiles, resident), 1))};
  return cudaSuccess;
}

}  // namespace

int64_t backward_workspace_floats(const BwdParams &p, const BwdDropout *bd) {
  Launch l{};
  if (plan_launch(p.rows, p.cols, column_sums(p), p.x_t, p.dy_t, p.delta_t, bd != nullptr, l) != cudaSuccess)
    return -1;
  return int64_t(l.ctas) * column_sums(p) * p.cols;
}

cudaError_t layer_norm_backward(const BwdParams &p, cudaStream_t stream, const BwdDropout *bd) {
  if (p.cols % VEC != 0 || p.cols < MIN_COLS || p.cols > MAX_COLS || p.rows < 0) return cudaErrorInvalidValue;
  if (!supported_dtypes(p.x_t, p.delta_t, p.dy_t)) return cudaErrorInvalidValue;
  const bool drop = bd != nullptr;
  if (drop && (!(bd->p > 0.f && bd->p < 1.f) || p.ddelta == nullptr || bd->rng_state == nullptr))
    return cudaErrorInvalidValue;
  Launch l{};
  cudaError_t err = plan_launch(p.rows, p.cols, column_sums(p), p.x_t, p.dy_t, p.delta_t, drop, l);
  if (err != cudaSuccess) return err;
  if (p.rows > 0) {
    int G = l.tl.G;
    dropout_args da{};  // the forward's (seed, offset), read from rng_state as a captured state
    if (drop) da = make_dropout_args(bd->rng_state, bd->p);
    void *args[] = {const_cast<BwdParams *>(&p), &G, &da};
    err = cudaLaunchKernel(l.kernel, dim3(l.ctas), dim3(CTA_THREADS), args, size_t(l.smem), stream);
    if (err != cudaSuccess) return err;
  }
  // rows == 0: the kernel is not launched; the reduce kernel sums zero slices (writes zeros)
  const int n_partial = p.rows > 0 ? l.ctas : 0, nsums = column_sums(p);
  const dim3 grid((nsums * p.cols + 31) / 32), block(32, REDUCE_WARPS);
  reduce_kernel<<<grid, block, 0, stream>>>(p.partial, n_partial, p.cols, nsums, p.dweight, p.dbias, p.ddelta_bias);
  return cudaGetLastError();
}

}  // namespace tk_ln
