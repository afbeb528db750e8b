// Attention backward, the two small row-wise kernels around the dK / dV kernel (overview: backward.cu):
//   bwd_delta_kernel        delta = rowsum(dO * O), before it
//   bwd_dq_convert_kernel   dq = scale * dq_accum, after it (default, atomic dQ path; hopper_backward.cu
//                           launches it too)
// (The deterministic path's bwd_dq_kernel is in backward_dkdv.cu.)
// Both are one pass over their rows with no data reuse, so they are bound by memory traffic: delta reads
// dO and O once (2 x 2 B per element, 16-bit) and writes 4 B per row; convert reads the fp32 dq_accum once
// (4 B per element) and writes dq (2 B). Tiling: every lane moves 16-byte vectors (8 elements of 16 bits,
// two float4 of dq_accum), consecutive lanes cover consecutive 16-byte pieces of a row, 256 threads per CTA,
// one element group per thread, no loop, and no shared memory except the convert's optional column sums.
// Not measured on their own: bench/RESULTS.md has no timing of these two kernels (they are inside the
// backward totals there), so the 256-thread CTAs and this lane mapping were not compared with alternatives.
#include "backward.cuh"
#include "qkv_bias_grad.cuh"

namespace tk_attn {
namespace {

using namespace tk;

// delta = rowsum(dO * O):
// One row of D elements is handled by D/8 consecutive lanes, each reading 16 bytes of dO and of O;
// the partial dot products are summed with xor-shuffles inside the lane group. A row group never
// straddles a warp (D/8 divides 32), and every lane takes part in the shuffles (rows past the end
// contribute 0 and are not stored).
constexpr int DELTA_THREADS = 256;

template <typename T, int D>
__global__ void __launch_bounds__(DELTA_THREADS) bwd_delta_kernel(const gl<T> o, const gl<T> dout, float *delta) {
  constexpr int LANES_PER_ROW = D / 8;
  constexpr int ROWS_PER_CTA = DELTA_THREADS / LANES_PER_ROW;
  const int64_t rows = int64_t(o.shape[0]) * o.shape[1] * o.shape[2];
  const int64_t row = int64_t(blockIdx.x) * ROWS_PER_CTA + threadIdx.x / LANES_PER_ROW;
  const int col = (threadIdx.x % LANES_PER_ROW) * 8;

  float acc = 0.f;
  if (row < rows) {
    const int t = int(row % o.shape[2]);
    const int bh = int(row / o.shape[2]);
    const int b = bh / o.shape[1], h = bh % o.shape[1];
    const int4 ov = *reinterpret_cast<const int4 *>(o.at(b, h, t, col));
    const int4 dv = *reinterpret_cast<const int4 *>(dout.at(b, h, t, col));
    const packed_t<T> *o2 = reinterpret_cast<const packed_t<T> *>(&ov);
    const packed_t<T> *d2 = reinterpret_cast<const packed_t<T> *>(&dv);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 a = convert_pair<float2>(o2[i]), c = convert_pair<float2>(d2[i]);
      acc += a.x * c.x + a.y * c.y;
    }
  }
#pragma unroll
  for (int off = LANES_PER_ROW / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (row < rows && col == 0) delta[row] = acc;
}

// dq = scale * dq_accum (atomic path)
// One thread per 8 consecutive elements of a row, one 16-byte store. The 8 elements are contiguous in the
// row-major and xor32 layouts (xor32 permutes whole groups of 8 within a row): two 16-byte fp32 loads. In
// frag64's (queries, dims) blocks they are 4 pairs 4 floats apart: 4 8-byte loads, each 32-byte sector holding a
// pair of query t and of query t + 8 (which another warp of the CTA reads: half of each sector per instruction).
// With colsum_partial (frag64: the Hopper backward's qkv bias gradient, qkv_bias_grad.cuh) the rows run over each
// head's dq_rows padded rows, so that a CTA lies in one head, and each CTA also writes its column sums of dq.
constexpr int CONVERT_THREADS = ROW_PASS_THREADS;

template <typename T>
__global__ void __launch_bounds__(CONVERT_THREADS) bwd_dq_convert_kernel(const __grid_constant__ bwd_args<T> a) {
  const int D = a.dq.shape[3];
  const int chunks_per_row = D / 8;
  const int rows_per_head = a.colsum_partial ? a.dq_rows : a.seq;
  const int64_t i = int64_t(blockIdx.x) * CONVERT_THREADS + threadIdx.x;
  const int64_t rows = int64_t(a.dq.shape[0]) * a.heads * rows_per_head;
  const int64_t row = i / chunks_per_row;
  const int col = int(i % chunks_per_row) * 8;
  const int t = int(row % rows_per_head);
  const int bh = int(row / rows_per_head);
  const int b = bh / a.heads, h = bh % a.heads;
  float x[8] = {};
  if (row < rows && t < a.seq) {
    const float *head = a.dq_accum.ptr + int64_t(bh) * (a.dq_xor32 || a.dq_frag64 ? a.dq_rows : a.seq) * D;
    if (a.dq_frag64) {
      const float *block = head + int64_t((t / 64) * (D / 64) + col / 64) * 4096;
      // (queries, dims) blocks: dims 2e, 2e + 1 of a row are adjacent, 4 floats after dims 2e - 2, 2e - 1
      // (frag64_offset): 4 8-byte loads
      const float2 *row = reinterpret_cast<const float2 *>(block + frag64_offset(t % 64, col % 64));
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float2 v = row[2 * e];
        x[2 * e] = v.x, x[2 * e + 1] = v.y;
      }
    } else {
      const int64_t off = a.dq_xor32 ? int64_t((t / 32) * (D / 32) + col / 32) * 1024 + xor32_offset(t % 32, col % 32)
                                     : int64_t(t) * D + col;
      const float4 *src = reinterpret_cast<const float4 *>(head + off);
      const float4 lo = src[0], hi = src[1];
      x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w, x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
    }
#pragma unroll
    for (int e = 0; e < 8; e++) x[e] *= a.scale;
    packed_t<T> out[4];
#pragma unroll
    for (int e = 0; e < 4; e++) out[e] = convert_pair<packed_t<T>>(make_float2(x[2 * e], x[2 * e + 1]));
    *reinterpret_cast<int4 *>(a.dq.at(b, h, t, col)) = *reinterpret_cast<const int4 *>(out);
  }
  if (a.colsum_partial != nullptr) {  // the same for the whole grid; every thread of the CTA takes part
    const int rows_per_cta = CONVERT_THREADS / chunks_per_row;
    const int64_t row0 = int64_t(blockIdx.x) * rows_per_cta;
    const int bh0 = int(row0 / rows_per_head);
    cta_column_sums(x, D, qkv_bias_partial_row(a.colsum_partial, bh0 / a.heads, bh0 % a.heads,
                                               int(row0 % rows_per_head), a.heads, D, rows_per_head, rows_per_cta));
  }
}

}  // namespace

template <typename T>
cudaError_t launch_delta(const bwd_args<T> &a, const gl<T> &o, int D, cudaStream_t stream) {
  const int64_t rows = int64_t(o.shape[0]) * o.shape[1] * o.shape[2];
  if (D == 64) {
    constexpr int rows_per_cta = DELTA_THREADS / (64 / 8);
    bwd_delta_kernel<T, 64><<<unsigned(cdiv64(rows, rows_per_cta)), DELTA_THREADS, 0, stream>>>(o, a.dout, const_cast<float *>(a.delta));
  } else if (D == 128) {
    constexpr int rows_per_cta = DELTA_THREADS / (128 / 8);
    bwd_delta_kernel<T, 128><<<unsigned(cdiv64(rows, rows_per_cta)), DELTA_THREADS, 0, stream>>>(o, a.dout, const_cast<float *>(a.delta));
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_dq_convert(const bwd_args<T> &a, int D, cudaStream_t stream) {
  const int64_t chunks = int64_t(a.dq.shape[0]) * a.heads * (a.colsum_partial ? a.dq_rows : a.seq) * (D / 8);
  bwd_dq_convert_kernel<T><<<unsigned(cdiv64(chunks, CONVERT_THREADS)), CONVERT_THREADS, 0, stream>>>(a);
  return cudaGetLastError();
}

template cudaError_t launch_delta<bf16>(const bwd_args<bf16> &, const gl<bf16> &, int, cudaStream_t);
template cudaError_t launch_dq_convert<bf16>(const bwd_args<bf16> &, int, cudaStream_t);
template cudaError_t launch_delta<half>(const bwd_args<half> &, const gl<half> &, int, cudaStream_t);
template cudaError_t launch_dq_convert<half>(const bwd_args<half> &, int, cudaStream_t);

}  // namespace tk_attn

