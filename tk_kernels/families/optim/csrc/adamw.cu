// AdamW over every fp32 parameter of a model in two kernel launches, with torch.nn.utils.clip_grad_norm_
// folded in (the optimizer family's launcher, optim.h). Portable CUDA (sm_80+), memory-bound.
//
// What train.py's step did before (clip_grad_norm_, then torch.optim.AdamW(fused=True)): a norm per tensor
// (_foreach_norm), their norm, an in-place scaling of every gradient (_foreach_mul_: reads and writes each
// gradient once more), then the fused AdamW in launches of at most a few dozen tensors each (multi_tensor_apply's
// chunk tables). GPT-2 124M on an H200 (bench/RESULTS.md, session 6): AdamW 1.01 ms + scaling 0.28 + norms 0.16.
//
// Here (one "batch" = up to BATCH tensors, all of GPT-2 124M's 148 and half of GPT-2 medium's 292):
//   1. grad_sq_sum_kernel, once per batch: each block sums g^2 over the chunks it takes (CHUNK elements of one
//      tensor at a time, grid-stride over the batch's chunks) and writes its partial sum; no atomics, so the
//      norm is the same bits on every run.
//   2. adamw_kernel, once per batch: every block first adds all partial sums (same order in every block, so
//      every block has the same scale), then updates its chunks: p, g, m, v read once, p, m, v written once,
//      g multiplied by the clip factor in registers (the gradients themselves are left as they were), and, for
//      the parameters that have one, the updated p rounded into a 16-bit copy (2 bytes more written a parameter):
//      the weight copies the model's GEMMs read (model.py, GPT.keep_weight16), which autocast would otherwise
//      cast from p on every forward, micro-steps included (4 + 2 bytes a parameter each time). Measured (H100,
//      session 31, GPT-2 124M's step with CUDA graphs): this kernel 1.23 -> 1.30 ms with the copies, the step's 48
//      weight casts (0.27 ms) gone, the step 31.50 -> 31.27 ms; GPT-2 medium's 82.40 -> 81.92.
// The per-tensor parameters (pointers, length, the step's folded hyper-parameters) travel in the kernel's
// parameter space (__grid_constant__, 17 KB for 256 tensors: CUDA 12.1+ allows 32 KB), so a step needs no
// host-to-device copy; a chunk finds its tensor by binary search over the batch's chunk offsets.
// Elements go 8 a thread (two 16-byte loads per array) where a tensor's four pointers are 16-byte aligned,
// one by one otherwise and at a tensor's ragged end.
// The arithmetic is torch's fused AdamW (aten/src/ATen/native/cuda/fused_adam_utils.cuh) in fp32, with IEEE
// square root and division although the family builds with --use_fast_math.
// Measured (H100, torch 2.11, session 23, dev/optim_step.py, do_bench medians, a step of clip at 1.0 + AdamW over
// the model's parameters): GPT-2 124M (148 tensors) 1.427 ms against 1.978 for clip_grad_norm_ + fused AdamW and
// 1.334 for a plain copy of the same 32 bytes a parameter (93% of its rate); GPT-2 medium (292 tensors, two
// batches) 4.037 against 5.508 (copy 3.770). The AdamW kernel uses 80 registers (3 blocks of 256 an SM), the norm
// kernel 28; no local memory.
#include "tk.cuh"

#include <algorithm>
#include <vector>

#include "optim.h"

namespace tk_optim {
namespace {

constexpr int THREADS = 256;
constexpr int CHUNK = 8192;  // elements of one tensor a block takes at a time (4 passes of 8 x 256)
constexpr int BATCH = 256;   // tensors per launch
constexpr int NORM_BLOCKS_PER_SM = 4;  // the norm kernel's grid: at most this many blocks an SM (one partial each)

struct Batch {
  AdamWTensor t[BATCH];
  int first_chunk[BATCH + 1];  // tensor i owns chunks [first_chunk[i], first_chunk[i + 1]); the last is the total
  int count;
};
static_assert(sizeof(Batch) <= 32764 - 64, "a batch must fit the kernel parameter space with the other arguments");

// The tensor that owns chunk c: the last i with first_chunk[i] <= c.
__device__ __forceinline__ int tensor_of(const Batch &b, int c) {
  int lo = 0, hi = b.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (b.first_chunk[mid] <= c) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Chunk c of a batch: the tensor that owns it and the chunk's elements [begin, end) in that tensor.
struct Chunk {
  const AdamWTensor &x;
  int64_t begin, end;
};
__device__ __forceinline__ Chunk chunk_of(const Batch &b, int c) {
  const int k = tensor_of(b, c);
  const int64_t begin = int64_t(c - b.first_chunk[k]) * CHUNK;
  return {b.t[k], begin, std::min<int64_t>(begin + CHUNK, b.t[k].numel)};
}

__device__ __forceinline__ bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// v[0..8) = p[i .. i + n) for n <= 8, zeros after: two 16-byte loads when the group is whole and vec.
__device__ __forceinline__ void load_group(float (&v)[8], const float *p, int64_t i, int n, bool vec) {
  if (vec && n == 8) {
    tk::load8(v, p + i);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++) v[e] = e < n ? p[i + e] : 0.f;
}

// p[i .. i + n) = v[0..n) in T (fp32, or rounded to nearest even for a 16-bit copy: what p.to(T) gives), n <= 8.
template <typename T>
__device__ __forceinline__ void store_group(T *p, int64_t i, int n, bool vec, const float (&v)[8]) {
  if (vec && n == 8) {
    tk::store8(p + i, v);
    return;
  }
#pragma unroll
  for (int e = 0; e < 8; e++)
    if (e < n) p[i + e] = tk::from_float<T>(v[e]);
}

// Sum of v over the block, on every thread; the same order every time.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[THREADS / 32];
  v = tk::warp_sum(v);
  if (tk::laneid() == 0) warp_sums[tk::warpid()] = v;
  __syncthreads();
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < THREADS / 32; w++) s += warp_sums[w];
  return s;
}

// partial[blockIdx.x] = sum of g^2 over the chunks of this block.
__global__ void __launch_bounds__(THREADS) grad_sq_sum_kernel(const __grid_constant__ Batch b, float *partial) {
  float acc = 0.f;
  for (int c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    const auto [x, begin, end] = chunk_of(b, c);
    const bool vec = aligned16(x.grad);
    for (int64_t i = begin + 8 * threadIdx.x; i < end; i += 8 * THREADS) {
      float g[8];
      load_group(g, x.grad, i, int(std::min<int64_t>(8, end - i)), vec);
#pragma unroll
      for (int e = 0; e < 8; e++) acc = fmaf(g[e], g[e], acc);
    }
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// The gradients' scale: min(1, max_norm / (norm + 1e-6)) as clip_grad_norm_ computes it (a NaN norm gives a
// NaN scale, as torch.clamp keeps it), 1 without clipping. Block 0 writes the norm.
__device__ __forceinline__ float clip_scale(const float *partial, int n_partial, float max_norm, float *norm_out) {
  if (max_norm <= 0.f) return 1.f;
  float acc = 0.f;
  for (int j = threadIdx.x; j < n_partial; j += THREADS) acc += partial[j];
  const float norm = __fsqrt_rn(block_sum(acc));
  if (norm_out != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *norm_out = norm;
  const float coef = __fdiv_rn(max_norm, norm + 1e-6f);
  return coef >= 1.f ? 1.f : coef;
}

__global__ void __launch_bounds__(THREADS) adamw_kernel(const __grid_constant__ Batch b, const float *partial,
                                                         int n_partial, float max_norm, float *norm_out) {
  const float scale = clip_scale(partial, n_partial, max_norm, norm_out);
  for (int c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    const auto [x, begin, end] = chunk_of(b, c);
    const bool vec = aligned16(x.param) && aligned16(x.grad) && aligned16(x.exp_avg) && aligned16(x.exp_avg_sq);
    // The arrays as __restrict__ pointers read once here: with the copy's stores after the fp32 ones, which the
    // compiler could not tell apart from them, it split every 16-byte store into four 4-byte ones (no STG.E.128 in
    // the SASS; the kernel took 2.72 ms instead of ~1.05 of a GPT-2 step on an H100, session 31).
    float *const __restrict__ param = x.param;
    float *const __restrict__ exp_avg = x.exp_avg;
    float *const __restrict__ exp_avg_sq = x.exp_avg_sq;
    void *const __restrict__ copy16 = x.copy16;
    const int copy_dtype = x.copy_dtype;
    const bool vec16 = vec && aligned16(copy16);
    const float one_minus_beta1 = 1.f - x.beta1, one_minus_beta2 = 1.f - x.beta2;
    for (int64_t i = begin + 8 * threadIdx.x; i < end; i += 8 * THREADS) {
      const int n = int(std::min<int64_t>(8, end - i));
      float p[8], g[8], m[8], v[8];
      load_group(p, x.param, i, n, vec);
      load_group(g, x.grad, i, n, vec);
      load_group(m, x.exp_avg, i, n, vec);
      load_group(v, x.exp_avg_sq, i, n, vec);
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const float grad = g[e] * scale;
        m[e] = x.beta1 * m[e] + one_minus_beta1 * grad;
        v[e] = x.beta2 * v[e] + one_minus_beta2 * grad * grad;
        const float denom = __fdiv_rn(__fsqrt_rn(v[e]), x.bc2_sqrt) + x.eps;
        p[e] = p[e] * x.decay - __fdiv_rn(x.step_size * m[e], denom);
      }
      store_group(param, i, n, vec, p);
      store_group(exp_avg, i, n, vec, m);
      store_group(exp_avg_sq, i, n, vec, v);
      if (copy_dtype == COPY_BF16) store_group(static_cast<tk::bf16 *>(copy16), i, n, vec16, p);
      else if (copy_dtype == COPY_FP16) store_group(static_cast<tk::half *>(copy16), i, n, vec16, p);
    }
  }
}

// The launches' batches: consecutive runs of at most BATCH tensors.
std::vector<Batch> make_batches(const AdamWTensor *tensors, int count) {
  std::vector<Batch> out;
  for (int start = 0; start < count; start += BATCH) {
    Batch b{};
    b.count = std::min(BATCH, count - start);
    int chunks = 0;
    for (int i = 0; i < b.count; i++) {
      b.t[i] = tensors[start + i];
      b.first_chunk[i] = chunks;
      chunks += int((b.t[i].numel + CHUNK - 1) / CHUNK);
    }
    b.first_chunk[b.count] = chunks;
    out.push_back(b);
  }
  return out;
}

int norm_grid(const Batch &b, int sms) {
  return std::max(1, std::min(b.first_chunk[b.count], NORM_BLOCKS_PER_SM * sms));
}

}  // namespace

int64_t scratch_floats(int count, int sms) {
  return int64_t((count + BATCH - 1) / BATCH) * NORM_BLOCKS_PER_SM * std::max(sms, 1);
}

cudaError_t adamw_step(const AdamWStep &s, cudaStream_t stream) {
  if (s.count < 0 || s.sms < 1 || (s.count > 0 && s.tensors == nullptr)) return cudaErrorInvalidValue;
  int64_t total_chunks = 0;
  for (int i = 0; i < s.count; i++) {
    const AdamWTensor &x = s.tensors[i];
    if (x.numel < 1 || !x.param || !x.grad || !x.exp_avg || !x.exp_avg_sq) return cudaErrorInvalidValue;
    if (x.copy_dtype != 0 && ((x.copy_dtype != COPY_BF16 && x.copy_dtype != COPY_FP16) || !x.copy16))
      return cudaErrorInvalidValue;
    total_chunks += (x.numel + CHUNK - 1) / CHUNK;
  }
  if (total_chunks > INT32_MAX) return cudaErrorInvalidValue;
  if (s.count == 0) return cudaSuccess;
  const bool clip = s.max_norm > 0.f;
  if (clip && s.scratch == nullptr) return cudaErrorInvalidValue;
  const std::vector<Batch> batches = make_batches(s.tensors, s.count);
  int n_partial = 0;
  if (clip) {
    for (const Batch &b : batches) {
      const int grid = norm_grid(b, s.sms);
      grad_sq_sum_kernel<<<grid, THREADS, 0, stream>>>(b, s.scratch + n_partial);
      n_partial += grid;
    }
  }
  // blocks resident at once (8 of 256 threads an SM when registers allow), at most one per chunk
  static int per_sm = 0;
  if (per_sm == 0) {
    const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, adamw_kernel, THREADS, 0);
    if (err != cudaSuccess) return err;
    per_sm = std::max(per_sm, 1);
  }
  for (size_t j = 0; j < batches.size(); j++) {
    const Batch &b = batches[j];
    const int grid = std::max(1, std::min(b.first_chunk[b.count], per_sm * s.sms));
    adamw_kernel<<<grid, THREADS, 0, stream>>>(b, s.scratch, n_partial, clip ? s.max_norm : 0.f,
                                               j == 0 ? s.norm_out : nullptr);
  }
  return cudaGetLastError();
}

}  // namespace tk_optim
