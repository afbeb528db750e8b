// Fused softmax + cross-entropy + logit gradient of the classifier, in place on a chunk of logits.
//
// Per row of V logits (bf16/fp16) with target t, both kernels below compute, in fp32 from the logits,
//     M = max(row), S = sum exp(row - M)
//     row_loss = M + log(S) - row[t]
//     row      = exp(row - M) / S - (col == t)                   (in place, in the logits' dtype)
// A row whose target is ignore_index gets loss 0 and an all-zero row (not read); a target outside
// [0, V) gets loss NaN (F.cross_entropy would stop with a device assert; we cannot, so the NaN says it).
// Each logit is read once from DRAM and written once: 4 V bytes per row, plus 8 bytes of target and 4
// of loss. A row is addressed as 16-byte vectors of 8 elements (the buffer base is 16-byte aligned, so
// the up to 7 elements before a row's first aligned one and the up to 7 after its last vector are
// handled as scalars, by threads 0 .. 13), thread t taking vectors t, t + NT, t + 2 NT, ... (a warp
// reads and writes 512 contiguous bytes per step). The two reductions go through warp shuffles, then
// one value per warp in shared memory.
//
// Kernel softmax_xent_rows_kernel<T> (the default): a persistent grid of one 1024-thread block per SM,
//   each block walking rows blockIdx.x, blockIdx.x + gridDim.x, ...; two shared-memory row buffers, so
//   the cp.async copy of the next row is in flight while the block reduces and writes the current one.
//   Each thread copies, reads and rewrites only its own vectors, so a thread's cp.async.wait_group is
//   the only synchronisation the buffers need (the reductions keep their __syncthreads). Needs 2 x 16
//   ceil(V / 8) bytes of shared memory: V <= 58112 on H100/H200 (227 KB a block), 41600 on A100.
//   Why: the register kernel below holds a whole row in registers (62 registers at V = 50304, one
//   800-thread block per SM), so each SM's loads, reductions and stores take turns; at N = 2048 rows,
//   V = 50304, bf16 it took 0.138 ms a chunk (1.101 ms for a GPT-2 step's 8 chunks, 3.0 TB/s over the
//   4 V bytes a row; H200, torch 2.11, session 11, torch.profiler), against a 4.27 TB/s copy.
// Kernel softmax_xent_kernel<T, NV> (larger V, and GPUs with less shared memory): one block per row,
//   the row in registers (NV 16-byte vectors per thread, NT threads): the launcher picks the smallest
//   NV in {1, 2, 4, 8, 16} whose NT fits (1024 threads for NV <= 8, else 512).
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

// The vectors and scalars of row `row` of a (rows, V) buffer whose base is 16-byte aligned.
template <typename T>
struct RowSpan {
  T *ptr;       // the row's first element
  uint4 *vec;   // its first 16-byte aligned element, as vectors
  int head;     // elements before vec (0..7, fewer if V is smaller)
  int nvec;     // whole vectors from vec on
  int tail;     // first column after the vectors
  int nscalar;  // head + (V - tail) <= 14: columns handled one by one
  __device__ __forceinline__ RowSpan(void *base, int64_t row, int V) {
    ptr = reinterpret_cast<T *>(base) + row * V;
    head = min(int((VEC - (row * V) % VEC) % VEC), V);
    nvec = (V - head) / VEC;
    tail = head + nvec * VEC;
    nscalar = head + (V - tail);
    vec = reinterpret_cast<uint4 *>(ptr + head);
  }
  __device__ __forceinline__ int scalar_col(int i) const { return i < head ? i : tail + (i - head); }
};

constexpr int ROWS_THREADS = 1024;

// Start the cp.async copies of this thread's vectors of a row into buf (one commit group per call, even
// if empty, so that wait_group<1> always means "the previous row's copies landed").
template <typename T>
__device__ __forceinline__ void copy_row_async(const RowSpan<T> &r, bool skip, uint4 *buf) {
  if (!skip) {
    for (int j = threadIdx.x; j < r.nvec; j += ROWS_THREADS) tk::cp_async_16(buf + j, r.vec + j, true);
  }
  tk::commit_group();
}

template <typename T>
__global__ void __launch_bounds__(ROWS_THREADS, 1)
softmax_xent_rows_kernel(XentParams p, int buf_vecs) {
  extern __shared__ uint4 rows_buf[];  // two row buffers of buf_vecs vectors
  __shared__ float red[32];
  const int V = p.V, tid = threadIdx.x;
  int64_t row = blockIdx.x;
  if (row >= p.rows) return;
  RowSpan<T> r(p.logits, row, V);
  int64_t target = p.targets[row];
  copy_row_async(r, target == p.ignore_index, rows_buf);

  for (int b = 0; row < p.rows; row += gridDim.x, b ^= 1) {
    // the next row's copy first, into the other buffer (this thread's reads of it ended last iteration)
    const int64_t next = row + gridDim.x;
    const bool has_next = next < p.rows;
    const RowSpan<T> rn(p.logits, has_next ? next : row, V);
    const int64_t next_target = has_next ? p.targets[next] : p.ignore_index;
    copy_row_async(rn, !has_next || next_target == p.ignore_index, rows_buf + (b ^ 1) * buf_vecs);

    const uint4 *buf = rows_buf + b * buf_vecs;
    const bool in_range = target >= 0 && target < V;
    if (target == p.ignore_index) {  // no loss, no gradient: zeros, the row was not copied
      for (int j = tid; j < r.nvec; j += ROWS_THREADS) r.vec[j] = uint4{0u, 0u, 0u, 0u};
      if (tid < r.nscalar) r.ptr[r.scalar_col(tid)] = tk::from_float<T>(0.0f);
      if (tid == 0) p.row_loss[row] = 0.0f;
    } else {
      const int scol = r.scalar_col(tid);
      const float sx = tid < r.nscalar ? tk::to_float(r.ptr[scol]) : -INFINITY;
      const float tx = (tid == 0 && in_range) ? tk::to_float(r.ptr[target]) : 0.0f;
      const int tcol = in_range ? static_cast<int>(target) : -1;
      tk::wait_group<1>();  // this thread's vectors of `row` are in buf

      float m = sx;
      for (int j = tid; j < r.nvec; j += ROWS_THREADS) m = fmaxf(m, vec_max<T>(buf[j]));
      const float M = block_reduce<true>(m, red);
      const float Ml2 = M * LOG2E;

      float s = tid < r.nscalar ? exp2f(sx * LOG2E - Ml2) : 0.0f;
      for (int j = tid; j < r.nvec; j += ROWS_THREADS) {
        float f[VEC];
        unpack<T>(buf[j], f);
#pragma unroll
        for (int e = 0; e < VEC; ++e) s += exp2f(f[e] * LOG2E - Ml2);
      }
      const float S = block_reduce<false>(s, red);
      const float inv_S = 1.0f / S;
      if (tid == 0) p.row_loss[row] = in_range ? M + logf(S) - tx : NAN;

      for (int j = tid; j < r.nvec; j += ROWS_THREADS) {
        float f[VEC];
        unpack<T>(buf[j], f);
        const int d = tcol - (r.head + j * VEC);  // the target's position in this vector, if in [0, 8)
#pragma unroll
        for (int e = 0; e < VEC; ++e) f[e] = exp2f(f[e] * LOG2E - Ml2) * inv_S - (e == d ? 1.0f : 0.0f);
        r.vec[j] = pack<T>(f);
      }
      if (tid < r.nscalar) r.ptr[scol] = tk::from_float<T>(exp2f(sx * LOG2E - Ml2) * inv_S - (scol == tcol ? 1.0f : 0.0f));
    }
    r = rn;
    target = next_target;
  }
  tk::wait_group<0>();  // no copy outlives the block
}

// Threads for NV vectors per thread at this vocabulary (a multiple of 32), or 0 if they do not fit.
int threads_for(int V, int nv) {
  const int limit = nv <= 8 ? 1024 : 512;
  const int need = (V / VEC + nv - 1) / nv;  // vectors per row <= V / 8
  const int nt = std::max(32, (need + 31) / 32 * 32);
  return nt <= limit ? nt : 0;
}

// Shared memory of the rows kernel's two row buffers at vocabulary V, and whether it fits this device.
size_t rows_smem_bytes(int V) { return 2 * size_t((V + VEC - 1) / VEC) * sizeof(uint4); }

bool rows_kernel_fits(int V, int device) {
  int optin = 0;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) return false;
  return rows_smem_bytes(V) + 1024 <= size_t(optin);  // 1 KB for the static `red` and the runtime's share
}

template <typename T>
cudaError_t launch(const XentParams &p, cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (rows_kernel_fits(p.V, device)) {
    const size_t smem = rows_smem_bytes(p.V);
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return err;
    if ((err = cudaFuncSetAttribute(softmax_xent_rows_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem))) != cudaSuccess) return err;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(p.rows, sms));
    softmax_xent_rows_kernel<T><<<grid, ROWS_THREADS, smem, stream>>>(p, (p.V + VEC - 1) / VEC);
    return cudaGetLastError();
  }
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

bool uses_rows_kernel(int V) {
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess && rows_kernel_fits(V, device);
}

cudaError_t softmax_xent_grad(const XentParams &p, cudaStream_t stream) {
  if (p.V < 1 || p.V > max_vocab() || p.rows < 0 || p.rows > INT32_MAX) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(p.logits) % 16 != 0) return cudaErrorInvalidValue;
  if (p.rows == 0) return cudaSuccess;
  return p.dtype == DType::bf16 ? launch<bf16>(p, stream) : launch<half>(p, stream);
}

}  // namespace tk_cls
