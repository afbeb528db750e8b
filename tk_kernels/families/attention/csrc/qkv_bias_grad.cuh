// The gradient of a fused qkv projection's bias (model.py's c_attn.bias), summed inside the Hopper backward's two
// row passes instead of a column-sum pass over qkv's whole gradient (B T x 3C, 16-bit) after it:
//   d b_q = sum over tokens of dq      the dQ convert kernel's rows (it holds scale * dq_accum in fp32)
//   d b_k = 0                          exactly: S_ij = scale q_i . (k_j + b_k) adds the constant scale q_i . b_k
//                                      to every key of row i, which the softmax cancels (the causal mask too)
//   d b_v = sum over tokens of dO      the prep kernel's rows (it reads dO for Delta): O_i = sum_j P_ij (v_j + b_v)
//                                      = sum_j P_ij v_j + b_v, as every row of P sums to 1 (without dropout only;
//                                      with dropout the rows of the dropped P do not, and ops.py sums dv instead)
// Both passes are row-wise, D / 8 lanes a row, 256 threads a CTA, every CTA inside one head (their rows run over
// the padded dq_accum_rows(T) rows of each head, a multiple of the CTA's 32 or 16 rows). Each CTA writes one row
// of column partials: partial[b * (Tp / rows) + t0 / rows][h * D + d] (rows = the CTA's rows, t0 its first),
// and qkv_bias_grad_finish_kernel sums those rows in a fixed order (bitwise reproducible), writing
// [d b_q | 0 | d b_v]. GPT-2 124M (B 16, T 1024, 12 heads, D 64): 512 partial rows of 768 floats a pass (1.5 MB),
// in place of the 75 MB that the column-sum pass over dqkv read (28 us a layer on an H100, session 30).
#pragma once
#include <cstdint>

namespace tk_attn {

constexpr int ROW_PASS_THREADS = 256;  // the threads of a row-pass CTA (the prep and the dQ convert kernels)

// Column sums of a row-pass CTA's rows: thread i holds x[0..7], columns (i % (D / 8)) * 8 .. + 7 of the CTA's row
// i / (D / 8); out[0 .. D) gets each column's sum over the CTA's rows. Every thread of the CTA must call it (it
// synchronises the CTA); D <= 128.
__device__ __forceinline__ void cta_column_sums(float (&x)[8], int D, float *out) {
  __shared__ float warp_sums[ROW_PASS_THREADS / 32][128];
  const int lanes = D / 8, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int off = lanes; off < 32; off <<= 1) {  // the warp's rows that hold the same columns
#pragma unroll
    for (int e = 0; e < 8; e++) x[e] += __shfl_xor_sync(0xffffffffu, x[e], off);
  }
  if (lane < lanes) {
#pragma unroll
    for (int e = 0; e < 8; e++) warp_sums[warp][lane * 8 + e] = x[e];
  }
  __syncthreads();
  if (threadIdx.x < D) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < ROW_PASS_THREADS / 32; w++) s += warp_sums[w][threadIdx.x];
    out[threadIdx.x] = s;
  }
}

// Where a row-pass CTA whose first row is (b, h, t0) writes its D partials: partial rows of heads * D floats,
// rows_per_head / rows_per_cta of them per batch entry.
__device__ __forceinline__ float *qkv_bias_partial_row(float *partial, int b, int h, int t0, int heads, int D,
                                                       int rows_per_head, int rows_per_cta) {
  const int64_t row = int64_t(b) * (rows_per_head / rows_per_cta) + t0 / rows_per_cta;
  return partial + row * heads * D + int64_t(h) * D;
}

}  // namespace tk_attn
