// Fused softmax + cross-entropy + logit gradient of the classifier, in place on a chunk of logits.
//
// Kernel softmax_xent_kernel<T, NV>: one thread block per logit row (V columns, bf16/fp16).
//   Algorithm: the block loads its whole row into registers once (16-byte loads, 8 elements each;
//   the up to 14 elements before the first 16-byte boundary of the row and after the last one with
//   scalar loads), reduces the row max M across the block (warp shuffles, then one value per warp
//   through shared memory), then S = sum exp(x - M) the same way, and writes
//       row_loss = M + log(S) - x[target]                       (fp32)
//       row      = exp(x - M) / S - (col == target)             (in place, in the logits' dtype)
//   A row whose target is ignore_index gets loss 0 and an all-zero row; a target outside [0, V)
//   gets loss NaN (F.cross_entropy would stop with a device assert; we cannot, so the NaN says it).
//   Arithmetic is fp32 from the bf16/fp16 logits, like F.cross_entropy on upcast logits.
//   Tiling: thread t holds the 16-byte vectors t, t + NT, ..., t + (NV - 1) NT of the row, so a warp
//   reads and writes 512 contiguous bytes per step (coalesced). NV (vectors per thread, template) and
//   NT (threads, 32..1024, runtime) are picked per vocabulary by the launcher: the smallest NV in
//   {1, 2, 4, 8, 16} whose NT fits, so V = 50304 runs NV = 8 on 800 threads (32 data registers).
//   Bytes: each logit is read once from DRAM and written once: 4 V bytes per row, plus 8 bytes of
//   target and 4 of loss; the target logit is re-read from L1/L2 by one thread.
//   Measured (H200, torch 2.11, bf16, N = 2048 rows a chunk, V = 50304; bench/RESULTS.md, session 11):
//   0.138 ms a chunk (1.101 ms for a GPT-2 step's 8 chunks, torch.profiler), 3.0 TB/s over the 4 V bytes a row,
//   about what Inductor's fused softmax backward moves (read + write, 3.1 TB/s in session 9's profile). With
//   62 registers at NV = 8 a block fills an SM alone, so its loads, reductions and stores take turns; a
//   persistent variant with two shared-memory row buffers (the next row's cp.async copy in flight while the
//   block reduced and wrote the current one) measured 1.099 ms, the same, and was not kept (git history,
//   session 11): the kernel is at the rate DRAM gives this read-then-write-in-place traffic. NV / NT choices
//   other than "the smallest NV whose NT fits" were not timed.
#include "tk.cuh"

#include <algorithm>
#include <cmath>

#include "classifier.h"

namespace tk_cls {
namespace {

using tk::bf16;
using tk::half;

constexpr int VEC = 8;                      // elements per 16-byte vector
constexpr float LOG2E = 1.4426950408889634f;

// Max (MAX = true) or sum of x over the block; every thread gets the result. red holds 32 floats.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float x, float *red) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = MAX ? fmaxf(x, y) : x + y;
  }
  __syncthreads();  // the previous reduction's readers are done with red
  if (lane == 0) red[warp] = x;
  __syncthreads();
  x = lane < nwarps ? red[lane] : (MAX ? -INFINITY : 0.0f);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = MAX ? fmaxf(x, y) : x + y;
  }
  return x;
}

// The 8 elements of a 16-byte vector as floats, and back.
template <typename T>
__device__ __forceinline__ void unpack(const uint4 &v, float (&f)[VEC]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = tk::convert_pair<float2>(tk::from_u32<T>(w[i]));
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack(const float (&f)[VEC]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = tk::as_u32<T>(tk::convert_pair<tk::packed_t<T>>(float2{f[2 * i], f[2 * i + 1]}));
  return uint4{w[0], w[1], w[2], w[3]};
}

// Max of the 8 elements of a 16-byte vector, taken on packed pairs (exact: max picks an input).
template <typename T>
__device__ __forceinline__ float vec_max(const uint4 &v) {
  using P = tk::packed_t<T>;
  const P a = __hmax2(tk::from_u32<T>(v.x), tk::from_u32<T>(v.y));
  const P b = __hmax2(tk::from_u32<T>(v.z), tk::from_u32<T>(v.w));
  const float2 c = tk::convert_pair<float2>(__hmax2(a, b));
  return fmaxf(c.x, c.y);
}

template <typename T, int NV>
__global__ void __launch_bounds__(NV <= 8 ? 1024 : 512)
softmax_xent_kernel(XentParams p) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int V = p.V, tid = threadIdx.x, nt = blockDim.x;
  T *rowp = reinterpret_cast<T *>(p.logits) + row * V;
  // the buffer base is 16-byte aligned: elements before the row's first aligned one are the head
  const int head = min(int((VEC - (row * V) % VEC) % VEC), V);
  const int nvec = (V - head) / VEC;
  const int tail = head + nvec * VEC;            // first column after the vectors
  const int nscalar = head + (V - tail);         // <= 14 < 32 <= nt
  uint4 *vecp = reinterpret_cast<uint4 *>(rowp + head);
  const int64_t target = p.targets[row];
  const bool ignored = target == p.ignore_index;
  const bool in_range = target >= 0 && target < V;

  if (ignored) {  // no loss, no gradient: write zeros without reading the row
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      const int j = tid + i * nt;
      if (j < nvec) vecp[j] = uint4{0u, 0u, 0u, 0u};
    }
    if (tid < nscalar) rowp[tid < head ? tid : tail + (tid - head)] = tk::from_float<T>(0.0f);
    if (tid == 0) p.row_loss[row] = 0.0f;
    return;
  }

  // one read of the row, into registers
  uint4 v[NV];
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int j = tid + i * nt;
    if (j < nvec) v[i] = vecp[j];
  }
  const int scol = tid < head ? tid : tail + (tid - head);  // this thread's scalar column, if any
  const float sx = tid < nscalar ? tk::to_float(rowp[scol]) : -INFINITY;
  const float tx = (tid == 0 && in_range) ? tk::to_float(rowp[target]) : 0.0f;
  const int tcol = in_range ? static_cast<int>(target) : -1;

  float m = sx;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    if (tid + i * nt < nvec) m = fmaxf(m, vec_max<T>(v[i]));
  }
  const float M = block_reduce<true>(m, red);
  const float Ml2 = M * LOG2E;

  float s = tid < nscalar ? exp2f(sx * LOG2E - Ml2) : 0.0f;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    if (tid + i * nt < nvec) {
      float f[VEC];
      unpack<T>(v[i], f);
#pragma unroll
      for (int e = 0; e < VEC; ++e) s += exp2f(f[e] * LOG2E - Ml2);
    }
  }
  const float S = block_reduce<false>(s, red);
  const float inv_S = 1.0f / S;
  if (tid == 0) p.row_loss[row] = in_range ? M + logf(S) - tx : NAN;

  // one write of the gradient, over the row just read
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int j = tid + i * nt;
    if (j < nvec) {
      float f[VEC];
      unpack<T>(v[i], f);
      const int d = tcol - (head + j * VEC);  // the target's position in this vector, if in [0, 8)
#pragma unroll
      for (int e = 0; e < VEC; ++e) f[e] = exp2f(f[e] * LOG2E - Ml2) * inv_S - (e == d ? 1.0f : 0.0f);
      vecp[j] = pack<T>(f);
    }
  }
  if (tid < nscalar) {
    const float g = exp2f(sx * LOG2E - Ml2) * inv_S - (scol == tcol ? 1.0f : 0.0f);
    rowp[scol] = tk::from_float<T>(g);
  }
}

// Threads for NV vectors per thread at this vocabulary (a multiple of 32), or 0 if they do not fit.
int threads_for(int V, int nv) {
  const int limit = nv <= 8 ? 1024 : 512;
  const int need = (V / VEC + nv - 1) / nv;  // vectors per row <= V / 8
  const int nt = std::max(32, (need + 31) / 32 * 32);
  return nt <= limit ? nt : 0;
}

template <typename T>
cudaError_t launch(const XentParams &p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.rows));
  int nt;
  if ((nt = threads_for(p.V, 1))) softmax_xent_kernel<T, 1><<<grid, nt, 0, stream>>>(p);
  else if ((nt = threads_for(p.V, 2))) softmax_xent_kernel<T, 2><<<grid, nt, 0, stream>>>(p);
  else if ((nt = threads_for(p.V, 4))) softmax_xent_kernel<T, 4><<<grid, nt, 0, stream>>>(p);
  else if ((nt = threads_for(p.V, 8))) softmax_xent_kernel<T, 8><<<grid, nt, 0, stream>>>(p);
  else if ((nt = threads_for(p.V, 16))) softmax_xent_kernel<T, 16><<<grid, nt, 0, stream>>>(p);
  else return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace

int max_vocab() { return 512 * 16 * VEC; }

cudaError_t softmax_xent_grad(const XentParams &p, cudaStream_t stream) {
  if (p.V < 1 || p.V > max_vocab() || p.rows < 0 || p.rows > INT32_MAX) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(p.logits) % 16 != 0) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  return p.dtype == DType::bf16 ? launch<bf16>(p, stream) : launch<half>(p, stream);
}

}  // namespace tk_cls
