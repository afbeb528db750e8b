// C launcher interface of the MLP kernel family: one Hopper GEMM with the epilogues an MLP needs.
// gemm.cu implements it; bindings.cpp calls it. No torch headers here or in the kernel files.
//
//   C[M x N] = sum_k A(m, k) B(n, k)        (nn.Linear's x W^T when both are K-major)
//
// An operand is K-major when its K index is the contiguous one (x (M, K) and W (N, K) of x W^T) and
// MN-major when its M / N index is (A = dy^T for dy (K, M); B = W for a (K, N) row-major W). The three
// layouts an MLP's forward and backward need:
//   forward  y  = x W^T         A K-major,  B K-major
//   backward dx = dy W          A K-major,  B MN-major
//   backward dW = dy^T x        A MN-major, B MN-major   (fp32 output, K = tokens)
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace tk_mlp {

enum class DType : int { bf16 = 0, fp16 = 1 };
enum class Major : int { K = 0, MN = 1 };
enum class Epilogue : int {
  store = 0,   // C = acc (+ bias), in the input dtype
  gelu = 1,    // pre = acc (+ bias) rounded to the input dtype, C = gelu(pre), aux = gelu'(pre) (what the
               // backward needs; the pre-activation itself is not written)
  dgelu = 2,   // C = acc * aux, aux the forward's gelu'(pre)
  store_f32 = 3,  // C = acc in fp32 (weight gradients); added atomically when K is split
};

struct GemmParams {
  DType dtype;
  Major a_major, b_major;
  Epilogue epilogue;
  int M, N, K;              // N a multiple of 8, K too when an operand is K-major (16-byte rows); any M
  const void *a;            // K-major: (M, K) with row stride lda; MN-major: (K, M), row stride lda
  int64_t lda;
  const void *b;            // K-major: (N, K) with row stride ldb; MN-major: (K, N), row stride ldb
  int64_t ldb;
  void *c;                  // (M, N), row stride ldc: input dtype, or fp32 for store_f32
  int64_t ldc;
  const void *bias;         // (N,) fp32, or in the operands' dtype when bias16; nullptr: none (store / gelu)
  bool bias16;
  void *aux;                // gelu: gelu'(pre) out (M, N); dgelu: it in; row stride ldc
  float *colsum;            // dgelu only, or nullptr: column sums of C (the rounded outputs) per block of 64
                            // rows, fp32 ((M + 63) / 64, N) contiguous, every element written (sum it over
                            // rows for the bias gradient)
  float *a_colsum;          // store and dgelu with A K-major and B MN-major (dx = dy W, dh = (dy W_proj) * gelu'),
                            // or nullptr: column sums of A per block of 64 rows, fp32 ((M + 63) / 64, K)
                            // contiguous, every element written (sum it over rows for the bias gradient of the
                            // layer whose output gradient A is, without a pass over A of its own)
  bool tanh_gelu;           // gelu: the tanh approximation instead of the exact erf form
  int splits;               // store_f32 only: K split over this many CTAs per tile (c must be zeroed
                            // first when > 1); 0 = choose (gemm_splits)
};

// K splits that fill the GPU for a store_f32 problem (1 when the tiles alone fill it).
int gemm_splits(int M, int N, int K, int sms);

// cudaSuccess, or the first CUDA error; cudaErrorInvalidValue for unsupported parameters (with the
// reason in *why when given). Needs an sm_90a build and an sm_90 GPU.
cudaError_t gemm(const GemmParams &p, cudaStream_t stream, const char **why = nullptr);

// Column sums (colsum.cu): out[c] = sum over r of x[r, c] in fp32, in a fixed order (the bias gradients), rounded
// once to out_dtype.
struct ColumnSumParams {
  enum Type : int { f32 = 0, bf16 = 1, fp16 = 2 } dtype, out_dtype;
  const void *x;    // (rows, cols), row stride ld elements, 16-byte aligned rows
  int64_t ld, rows;
  int cols;         // a multiple of 8
  int chunks;       // row chunks summed separately first: column_sum_chunks(rows, cols, SMs, fp32); 0: none, x
                    // (fp32, at most 512 rows: a GEMM's block sums) is itself the partial sums
  float *partial;   // workspace: chunks x cols fp32
  void *out;        // (cols,) in out_dtype (a bias's own dtype: no cast pass after the sums)
  const float *x2;  // or nullptr: a second fp32 (rows, cols2) matrix (row stride ld2) summed in the same launch into
  int64_t ld2;      // out2 (cols2,) in out_dtype; only with chunks == 0 (both are partial sums already)
  int cols2;
  void *out2;
};
// Row chunks that give ~4 CTAs per SM (one wave) on a GPU of `sms` SMs; 0 for an fp32 x of few rows.
int column_sum_chunks(int64_t rows, int cols, int sms, bool f32);
cudaError_t column_sums(const ColumnSumParams &p, cudaStream_t stream);

}  // namespace tk_mlp
