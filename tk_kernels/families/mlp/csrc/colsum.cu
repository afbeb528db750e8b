// Column sums of a row-major (rows, cols) matrix, in fp32 and in a fixed order (bitwise reproducible on a
// given GPU): the MLP's bias gradients,
//   db_proj = sum over tokens of dy          (dy: (N, C) in the activations' 16-bit dtype)
//   db_fc   = sum over 64-row blocks of the GELU' GEMM's block sums   ((N / 64, 4C) fp32, gemm.cu's colsum)
//   db_proj = the same over the GELU' GEMM's block sums of dy          ((N / 64, C) fp32, gemm.cu's a_colsum)
//
// Two launches, or for an fp32 matrix of at most FINISH_ROWS rows (the GEMMs' block sums: 256 rows at N = 16384)
// the second alone, reading the matrix as its partial sums; that one launch can also sum a second such matrix of
// the same rows (db_fc and db_proj from the GELU' GEMM's two block-sum matrices: one launch a step, not two):
//   1. colsum_partial_kernel: CTA (column tile, row chunk). 8 warps; a lane owns 8 consecutive columns (one
//      16-byte vector of a 16-bit type, two of fp32), so a warp covers a 256-column tile of one row per load;
//      warp w adds rows w, w + 8, ... of the chunk (four rows' loads in flight per thread), then the CTA adds
//      its 8 warp sums in warp order into one row of the partial-sum workspace (chunks, cols).
//      Chunks: enough for ~4 CTAs per SM in all, one wave (the rows are split evenly; cols / 256 tiles alone
//      would give 3 CTAs at C = 768). Session 24's ~2 CTAs per SM took 21.4 us at (16384, 768) bf16 in eager
//      do_bench, where Inductor's fused sum takes 8.2 us in the step: 4 halves each warp's serial row loop.
//   2. colsum_finish_kernel: out[c] = sum over chunks of partial[chunk][c], 32 columns per CTA, warp y adding
//      chunks y, y + 32, ..., then warp 0 the 32 warp sums in order (tk::sum_slices, as the LayerNorm backward's
//      reduce), written in the bias's dtype (fp32, bf16, fp16): a 16-bit bias's gradient needs no cast launch
//      after it, rounded once from the fp32 sum exactly as the cast rounded it.
//
// Why: at GPT-2's shapes (H100, in the train step, session 23's profile) PyTorch's dh_sums.sum(0) over the
// (256, 3072) block sums took 12.3 us and the ones-row cuBLAS GEMM for db_proj over (16384, 768) 11.7 us, a
// call each per layer and step. Since session 25 it also takes the attention projections' bias gradients (the
// linear op), where Inductor's fused sums ran before. In GPT-2's tk step (H100, session 25, torch.profiler, ms
// per step): all 48 calls 0.714 (partial bf16 0.576 for c_attn's, c_proj's and db_proj's 36, finish 0.095, the
// 12 fp32 db_fc partials 0.043) against 0.695 for what they replaced (Inductor's c_attn / c_proj sums 0.409, the
// ones-row GEMM 0.138, ATen's reduce 0.148): about even. A single 25 MB bf16 sum is ~11.5 us here, Inductor's
// 8.0: the two launches and the short per-warp row loops dominate at that size (do_bench, H200: (16384, 2304)
// 32.3 us, (16384, 768) 15.0, like the ones-row GEMM's 31.7 / 14.6).
#include <algorithm>

#include "tk.cuh"
#include "mlp.h"

namespace tk_mlp {
namespace {

constexpr int CS_WARPS = 8;
constexpr int CS_TILE = 32 * 8;  // columns of a CTA: 32 lanes x 8
constexpr int CS_UNROLL = 4;     // rows a thread has in flight
constexpr int FIN_WARPS = 32;
// fp32 matrices of up to this many rows skip the partial pass: the finish kernel's warps then add <= 16 rows each,
// 4 loads in flight, where the partial pass would add 8 rows a CTA and the finish launch the chunks after it
constexpr int64_t FINISH_ROWS = 512;

template <typename T>
__global__ void __launch_bounds__(32 * CS_WARPS, 4) colsum_partial_kernel(const T *__restrict__ x, int64_t ld,
                                                                       int64_t rows, int cols, int64_t chunk_rows,
                                                                       float *__restrict__ partial) {
  __shared__ float warp_sums[CS_WARPS][CS_TILE];
  const int lane = tk::laneid(), warp = tk::warpid();
  const int col = blockIdx.x * CS_TILE + lane * 8;
  const int64_t r0 = int64_t(blockIdx.y) * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (col < cols) {
    const T *p = x + col;
    int64_t r = r0 + warp;
    for (; r + (CS_UNROLL - 1) * CS_WARPS < r1; r += CS_UNROLL * CS_WARPS) {
      float v[CS_UNROLL][8];
#pragma unroll
      for (int u = 0; u < CS_UNROLL; u++) tk::load8(v[u], p + (r + u * CS_WARPS) * ld);
#pragma unroll
      for (int u = 0; u < CS_UNROLL; u++)
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] += v[u][i];
    }
    for (; r < r1; r += CS_WARPS) {
      float v[8];
      tk::load8(v, p + r * ld);
#pragma unroll
      for (int i = 0; i < 8; i++) acc[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < 8; i++) warp_sums[warp][lane * 8 + i] = acc[i];
  __syncthreads();
  const int c = blockIdx.x * CS_TILE + threadIdx.x;
  if (threadIdx.x < CS_TILE && c < cols) {
    float total = warp_sums[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < CS_WARPS; w++) total += warp_sums[w][threadIdx.x];
    partial[int64_t(blockIdx.y) * cols + c] = total;
  }
}

// One fp32 (chunks, cols) matrix the finish kernel sums down its columns into out.
struct FinishPart {
  const float *partial;
  int64_t ld;
  int cols;
  void *out;
};

// The CTAs before a's (a.cols + 31) / 32 take a's columns, the rest b's (b.cols = 0: none).
template <typename O>
__global__ void __launch_bounds__(32 * FIN_WARPS) colsum_finish_kernel(FinishPart a, FinishPart b, int chunks) {
  const int tiles_a = (a.cols + 31) / 32;
  const bool in_a = int(blockIdx.x) < tiles_a;
  const float *partial = in_a ? a.partial : b.partial;
  const int64_t ld = in_a ? a.ld : b.ld;
  const int cols = in_a ? a.cols : b.cols;
  O *out = static_cast<O *>(in_a ? a.out : b.out);
  const int c = (in_a ? int(blockIdx.x) : int(blockIdx.x) - tiles_a) * 32 + threadIdx.x;
  const float total = tk::sum_slices<FIN_WARPS, 4>(partial, chunks, ld, c, c < cols);
  if (threadIdx.y == 0 && c < cols) out[c] = tk::from_float<O>(total);
}

// the finish launch: a.out, b.out <- the column sums of the fp32 (chunks, cols) matrices a and b
cudaError_t finish(const FinishPart &a, const FinishPart &b, int chunks, ColumnSumParams::Type out_dtype,
                   cudaStream_t stream) {
  const dim3 grid((a.cols + 31) / 32 + (b.cols + 31) / 32), block(32, FIN_WARPS);
  switch (out_dtype) {
    case ColumnSumParams::f32:
      colsum_finish_kernel<float><<<grid, block, 0, stream>>>(a, b, chunks);
      break;
    case ColumnSumParams::bf16:
      colsum_finish_kernel<tk::bf16><<<grid, block, 0, stream>>>(a, b, chunks);
      break;
    case ColumnSumParams::fp16:
      colsum_finish_kernel<tk::half><<<grid, block, 0, stream>>>(a, b, chunks);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

int column_sum_chunks(int64_t rows, int cols, int sms, bool f32) {
  if (f32 && rows <= FINISH_ROWS) return 0;
  const int64_t tiles = (cols + CS_TILE - 1) / CS_TILE;
  const int64_t want = std::max<int64_t>(1, (4 * int64_t(sms) + tiles - 1) / tiles);
  // at least 8 rows (one per warp) a chunk, at most 65535 chunks (grid.y)
  return int(std::max<int64_t>(1, std::min<int64_t>({want, (rows + CS_WARPS - 1) / CS_WARPS, 65535})));
}

cudaError_t column_sums(const ColumnSumParams &p, cudaStream_t stream) {
  if (p.cols <= 0 || p.cols % 8 != 0 || p.rows < 0 || p.chunks < 0 || p.ld < p.cols) return cudaErrorInvalidValue;
  const FinishPart second{static_cast<const float *>(p.x2), p.ld2, p.x2 != nullptr ? p.cols2 : 0, p.out2};
  if (p.x2 != nullptr && (p.chunks != 0 || p.cols2 <= 0 || p.cols2 % 8 != 0 || p.ld2 < p.cols2))
    return cudaErrorInvalidValue;
  if (p.chunks == 0) {  // x (and x2) itself is the partial sums
    if (p.dtype != ColumnSumParams::f32 || p.rows > FINISH_ROWS) return cudaErrorInvalidValue;
    return finish({static_cast<const float *>(p.x), p.ld, p.cols, p.out}, second, int(p.rows), p.out_dtype, stream);
  }
  const int64_t chunk_rows = std::max<int64_t>(1, (p.rows + p.chunks - 1) / p.chunks);
  const dim3 grid((p.cols + CS_TILE - 1) / CS_TILE, p.chunks);
  switch (p.dtype) {
    case ColumnSumParams::f32:
      colsum_partial_kernel<float><<<grid, 32 * CS_WARPS, 0, stream>>>(
          static_cast<const float *>(p.x), p.ld, p.rows, p.cols, chunk_rows, p.partial);
      break;
    case ColumnSumParams::bf16:
      colsum_partial_kernel<tk::bf16><<<grid, 32 * CS_WARPS, 0, stream>>>(
          static_cast<const tk::bf16 *>(p.x), p.ld, p.rows, p.cols, chunk_rows, p.partial);
      break;
    case ColumnSumParams::fp16:
      colsum_partial_kernel<tk::half><<<grid, 32 * CS_WARPS, 0, stream>>>(
          static_cast<const tk::half *>(p.x), p.ld, p.rows, p.cols, chunk_rows, p.partial);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  return finish({p.partial, p.cols, p.cols, p.out}, second, p.chunks, p.out_dtype, stream);
}

}  // namespace tk_mlp
