// Residual add + LayerNorm forward:  s = x + delta (rounded to x's dtype),  y = (s - mean) * rstd * w + b
// (delta: delta + delta_bias rounded to delta's dtype where a delta_bias is given; then dropout, if on)
// with mean = sum(s) / C, var = sum((s - mean)^2) / C (biased, two passes over registers), rstd =
// 1 / sqrt(var + eps), all in fp32. Without delta it is the plain LayerNorm of x (s is not written).
//
// The kernel is a stream: per element it reads x (sizeof X) + delta (sizeof D) and writes s (sizeof
// X) + y (sizeof Y), plus 8 B per row (mean, rstd); weight / bias are L1/L2 resident. fp32 residual,
// bf16 delta and y: 12 B per element. Its speed is set by the bytes in flight per SM (Little's law:
// ~4.3 TB/s x ~1 us of DRAM latency / 132 SMs = ~30 KB per SM must be outstanding), so:
//  - Tiling (config.cuh, max_k = 4): a row group of G threads per row, K <= 4 chunks of 8 elements
//    per thread in registers; a row is read once and both statistics come from registers. Row sums
//    are shuffles inside a warp (G <= 32, up to C = 1024), plus one shared-memory exchange per sum for
//    wider rows. One row per row group, no loop: rows / (256 / G) CTAs of 256 threads.
//  - All loads of a row (x and delta, every chunk) are issued before the first use, in one block
//    with no store in between (a store may alias a later load, which would otherwise pin the order:
//    load chunk, store chunk, load the next). A thread has up to K * 48 B in flight (fp32 x, 16-bit
//    delta): 144 B at C = 768, 192 B at C = 2048.
//  - Registers (ptxas, nvcc 13.0, sm_80 and sm_90a, every dtype combination; no spills, tests/test_build.py
//    reads the SASS): the loads are held as loaded (raw8) until the last is issued, then widened chunk by chunk.
//    60-64 at K = 1..3 under __launch_bounds__(256, 4): 4 CTAs (32 warps) per SM, ~150 KB in flight per SM
//    at C = 768; fp32 x and fp32 delta at K = 3 (48 registers of loads) get (256, 3), 76. K = 4 (C = 776..1024
//    in one warp, 1544..2048 in two, ...) needs 79-92 and gets (256, 3): 3 CTAs, ~150 KB in flight at
//    C = 2048 (fp32 x and delta: (256, 2)). Widened at once (float[K][8] each), every K = 3 / 4 instance
//    spilled 4-88 B on sm_80 and the fp16 ones at K = 3 8-28 B on sm_90a. (Dropping the per-chunk bounds
//    tests for k < K - 1, as the backward does, makes ptxas hoist more and spill at K = 4.)
//  - weight / bias are read after the statistics, per chunk, from L1.
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
// Dropout on delta (DROP = true; ops.py's tk::dropout_add_layer_norm_fwd, the model's residual dropout):
//     s = x + dropout(delta),   dropout(delta) = keep ? round_D(delta * (1 / (1 - p))) : 0
// the kept values rounded to delta's dtype D as F.dropout stores them, so s is bitwise x + F.dropout(delta)
// for the kernel's mask (test_layernorm_dropout_gpu.py checks it). The mask (dropout.cuh) is one Philox4x32-10
// call per 8-element chunk, its counter the chunk's element index / 8, so it does not depend on this
// tiling and the backward regenerates it with its own; seed and offset come from PyTorch's CUDA generator
// (values, or pointers read here under CUDA-graph capture) and CTA 0 writes them to rng_state. Nothing of
// the mask is stored: the same bytes as without dropout, against F.dropout + this kernel's extra
// read + write of delta and write of a 1-byte mask (and the mask's read in the backward).
//  - Each thread computes its K chunks' 8K keep bits (one register) BEFORE issuing its loads. Computed
//    after them, next to the K chunks of x and delta in flight, the Philox rounds' temporaries spilled
//    (ptxas, sm_80 / sm_90a: 24-48 B of stack at K = 3 under (256, 4), 32-48 B at K = 4 under (256, 3)).
//    This way K <= 3 keep the bounds and registers of the kernels without dropout (40-64, no spills), and
//    K = 4 gets (256, 2), 80-96 registers (under (256, 3) sm_90a still spilled 4-16 B): 2 CTAs per SM,
//    ~100 KB in flight at C = 2048, above the ~30-50 KB the DRAM latency asks for.
//  - ALU: a Philox call is ~60 integer instructions (10 rounds of two 32 x 32 -> 64-bit multiplies, xors and
//    key additions) for 8 elements, ~8 per element against 12 B of DRAM traffic; SASS at fp32 x / bf16
//    delta, K = 3, sm_90a: 1408 instructions with dropout, 952 without.
//  - NOT MEASURED YET: the time with dropout (bench/bench_layernorm_dropout.py has not run on a GPU). The
//    expectation is the time without dropout (same bytes, the Philox work overlapping the first loads of
//    other warps), against F.dropout's separate kernel: 0.32 ms per step forward for the shakespeare_char
//    model under CUDA graphs on an H200 (its dropout backward 0.14 ms), out of 5.15 ms of GPU time.
#include "config.cuh"
#include "dropout.cuh"

namespace tk_ln {
namespace {

constexpr int FWD_MAX_K = 4;  // chunks per thread at most (config.cuh); see the header for why

// DROP: dropout on delta (dropout.cuh; delta is then never nullptr), with the threshold and keep scale in drop.
// CTAs per SM in the launch bounds: 4 (64 registers a thread) while the row's loads, held as loaded, take at most
// 36 registers (K chunks of x and delta: 2 * (sizeof(X) + sizeof(D)) a chunk); 3 (85) up to 48 or at K = 4; 2 (128)
// beyond that or with dropout at K = 4. (fp32 x and delta spilled 8-16 B on sm_80 under 4 at K = 3 and 3 at K = 4.)
template <typename X, typename D, int K, bool DROP>
constexpr int fwd_min_ctas() {
  constexpr int raw = K * 2 * int(sizeof(X) + sizeof(D));
  if constexpr (K >= 4) return DROP || raw > 48 ? 2 : 3;
  return raw > 36 ? 3 : 4;
}

template <typename X, typename D, typename Y, int K, bool DROP>
__global__ void __launch_bounds__(CTA_THREADS, fwd_min_ctas<X, D, K, DROP>())
    forward_kernel(const FwdParams p, const int G, const dropout_args drop) {
  __shared__ float red_sum[CTA_WARPS], red_var[CTA_WARPS];
  const int group = threadIdx.x / G, t = threadIdx.x % G;
  const int64_t row = int64_t(blockIdx.x) * (CTA_THREADS / G) + group;
  const bool active = row < p.rows;
  const int chunks = p.cols / VEC;
  const int64_t base = row * p.cols;
  const X *__restrict__ x = static_cast<const X *>(p.x) + base;
  const D *__restrict__ delta = static_cast<const D *>(p.delta) + base;
  const bool has_delta = DROP || p.delta != nullptr;

  // 0. dropout: the keep bits of the thread's chunks (bit 8 k + j: element j of chunk k; a chunk's element
  //    index / 8 is (row * cols + c * 8) / 8 = row * chunks + c), before any load is issued, so that the
  //    Philox rounds do not hold registers while the K chunks of x and delta are in flight (computed after
  //    the loads, they spilled at K = 3 and 4 under the launch bounds below). Padding chunks keep no bits.
  uint32_t keep = 0;
  if constexpr (DROP) {
    uint64_t seed, offset;
    const tk::dropout_key key = tk::load_dropout_key(drop.rng, drop.threshold, seed, offset);
    const uint32_t thr16 = drop.threshold << 16;
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      if (active && c < chunks) keep |= dropout_bits8(key, thr16, uint64_t(row) * chunks + c) << (8 * k);
    }
  }

  // delta_bias, the sublayer's bias (a GEMM's, moved here: layernorm.h), added to delta in step 1 below and
  // rounded to delta's dtype as the GEMM's epilogue would have stored it, is staged once per CTA in shared
  // memory before the row's loads are issued (ptxas, sm_90a, fp32 x / bf16 delta: no spills at any K).
  // Read per chunk from global memory it took 64-bit addresses and spilled at K = 3 and 4 under the launch
  // bounds below; staged while the row's loads were in flight, it spilled at every K. Cost (H100, session 29,
  // N = 16384, fp32 x / bf16 delta, forward alone): 31.7 -> 32.3 us at C = 384, 57.1 -> 58.5 at 768, 74.3 -> 75.9
  // at 1024; staging it before the dropout's Philox rounds instead of after measured the same.
  const float *bias_s = nullptr;
  if (p.delta_bias != nullptr) {
    extern __shared__ float4 delta_bias_smem[];  // (cols,) fp32, when delta_bias is given
    for (int i = threadIdx.x; i < 2 * chunks; i += CTA_THREADS)
      delta_bias_smem[i] = reinterpret_cast<const float4 *>(p.delta_bias)[i];
    __syncthreads();
    bias_s = reinterpret_cast<const float *>(delta_bias_smem);
  }

  // 1. every load of the row first: x, then delta (nothing is stored before they are all issued), held as loaded
  //    (raw8: 4 registers a chunk for a 16-bit type, 8 for fp32) until the last is issued, then widened chunk by
  //    chunk (the header's Registers item says why)
  raw8<X> xr[K];
  raw8<D> dr[K];
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (active && c < chunks) load_raw(xr[k], x + c * VEC);
    else zero_raw(xr[k]);
  }
  if (has_delta) {
#pragma unroll
    for (int k = 0; k < K; k++) {
      const int c = t + k * G;
      if (active && c < chunks) load_raw(dr[k], delta + c * VEC);
      else zero_raw(dr[k]);
    }
  }
  float v[K][8];
#pragma unroll
  for (int k = 0; k < K; k++) {
    to_f32(v[k], xr[k]);
    if (has_delta) {
      const int c = t + k * G;
      float d[8];
      to_f32(d, dr[k]);
      if (bias_s != nullptr && c < chunks) {
        float b[8];
        tk::load8(b, bias_s + c * VEC);
#pragma unroll
        for (int i = 0; i < 8; i++) d[i] += b[i];
        tk::round_to<D>(d);
      }
      if constexpr (DROP) apply_keep8<D>(d, keep >> (8 * k), drop.keep_scale);
#pragma unroll
      for (int i = 0; i < 8; i++) v[k][i] += d[i];
      tk::round_to<X>(v[k]);
    }
  }

  // 2. statistics (padding slots hold 0 and are left out of the squared deviations)
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
#pragma unroll
    for (int i = 0; i < 8; i++) sum += v[k][i];
  }
  const float inv_cols = 1.f / float(p.cols);
  const float mean = row_group_sum(sum, G, red_sum) * inv_cols;
  float sq = 0.f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    if (t + k * G < chunks) {
#pragma unroll
      for (int i = 0; i < 8; i++) {
        const float dv = v[k][i] - mean;
        sq += dv * dv;
      }
    }
  }
  const float rstd = rsqrtf(row_group_sum(sq, G, red_var) * inv_cols + p.eps);
  if (!active) return;

  // 3. stores: s, y, and the row's mean / rstd
  X *__restrict__ s = static_cast<X *>(p.s) + base;
  Y *__restrict__ y = static_cast<Y *>(p.y) + base;
  const float *__restrict__ weight = p.weight;
  const float *__restrict__ bias = p.bias;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = t + k * G;
    if (c < chunks) {
      if (has_delta) tk::store8(s + c * VEC, v[k]);
      float w[8], b[8], out[8];
      tk::load8(w, weight + c * VEC);
      if (bias != nullptr) tk::load8(b, bias + c * VEC);
      else {
#pragma unroll
        for (int i = 0; i < 8; i++) b[i] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < 8; i++) out[i] = (v[k][i] - mean) * rstd * w[i] + b[i];
      tk::store8(y + c * VEC, out);
    }
  }
  if (t == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
  if constexpr (DROP) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {  // the (seed, offset) this call used, for the backward
      uint64_t seed, offset;
      tk::load_dropout_key(drop.rng, drop.threshold, seed, offset);
      drop.rng_out[0] = int64_t(seed);
      drop.rng_out[1] = int64_t(offset);
    }
  }
}

template <typename X, typename D, typename Y, bool DROP>
cudaError_t launch(const FwdParams &p, cudaStream_t stream, const FwdDropout *fd) {
  const Tiling tl = tiling(p.cols, FWD_MAX_K);
  const int64_t ctas = (p.rows + tl.rows_per_cta() - 1) / tl.rows_per_cta();
  if (ctas > INT32_MAX) return cudaErrorInvalidConfiguration;
  const dim3 grid{unsigned(ctas)}, block{unsigned(CTA_THREADS)};
  const size_t smem = p.delta_bias != nullptr ? size_t(p.cols) * sizeof(float) : 0;  // <= 32 KB: no opt-in needed
  dropout_args drop{};
  if constexpr (DROP) drop = make_dropout_args(fd->rng, fd->p, fd->rng_state);
  switch (tl.K) {
    case 1: forward_kernel<X, D, Y, 1, DROP><<<grid, block, smem, stream>>>(p, tl.G, drop); break;
    case 2: forward_kernel<X, D, Y, 2, DROP><<<grid, block, smem, stream>>>(p, tl.G, drop); break;
    case 3: forward_kernel<X, D, Y, 3, DROP><<<grid, block, smem, stream>>>(p, tl.G, drop); break;
    case 4: forward_kernel<X, D, Y, 4, DROP><<<grid, block, smem, stream>>>(p, tl.G, drop); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename X, typename D, typename Y>
cudaError_t launch(const FwdParams &p, cudaStream_t stream, const FwdDropout *fd) {
  return fd != nullptr ? launch<X, D, Y, true>(p, stream, fd) : launch<X, D, Y, false>(p, stream, fd);
}

}  // namespace

cudaError_t layer_norm_forward(const FwdParams &p, cudaStream_t stream, const FwdDropout *fd) {
  if (p.cols % VEC != 0 || p.cols < MIN_COLS || p.cols > MAX_COLS || p.rows < 0) return cudaErrorInvalidValue;
  if (!supported_dtypes(p.x_t, p.delta_t, p.y_t)) return cudaErrorInvalidValue;
  if (fd != nullptr && (!(fd->p > 0.f && fd->p < 1.f) || p.delta == nullptr || fd->rng_state == nullptr))
    return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  const DType x = p.x_t, d = p.delta_t, y = p.y_t;
  if (y == DType::f32) return launch<float, float, float>(p, stream, fd);
  if (y == DType::bf16) {
    if (x == DType::f32) return d == DType::f32 ? launch<float, float, tk::bf16>(p, stream, fd) : launch<float, tk::bf16, tk::bf16>(p, stream, fd);
    return launch<tk::bf16, tk::bf16, tk::bf16>(p, stream, fd);
  }
  if (x == DType::f32) return d == DType::f32 ? launch<float, float, tk::half>(p, stream, fd) : launch<float, tk::half, tk::half>(p, stream, fd);
  return launch<tk::half, tk::half, tk::half>(p, stream, fd);
}

}  // namespace tk_ln
