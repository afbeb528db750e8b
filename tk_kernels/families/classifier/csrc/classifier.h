// C launcher interface of the classifier kernel family (lm_head + cross-entropy).
// softmax_xent.cu implements it; bindings.cpp calls it. No torch headers here or in the kernel files.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace tk_cls {

enum class DType : int { bf16 = 0, fp16 = 1 };

struct XentParams {
  void *logits;            // (rows, V) row-major, contiguous, base 16-byte aligned; bf16/fp16.
                           // Read, then overwritten in place with softmax(row) - onehot(target)
                           // (all zeros for rows whose target is ignore_index)
  const int64_t *targets;  // (rows,) class indices
  float *row_loss;         // (rows,) output: logsumexp(row) - row[target] in fp32; 0 for ignored rows,
                           // NaN for targets outside [0, V)
  int64_t rows;
  int V;                   // 1 <= V <= max_vocab()
  int64_t ignore_index;
  DType dtype;
};

// Largest vocabulary the kernel holds in registers (one row per thread block).
int max_vocab();

// cudaSuccess or the first CUDA error; cudaErrorInvalidValue for unsupported parameters.
cudaError_t softmax_xent_grad(const XentParams &p, cudaStream_t stream);

// out[i] = x[i] * s[0] for n elements of a bf16/fp16 tensor (fp32 product, rounded once), x and out
// 16-byte aligned (they may be the same buffer); s points to one fp32 value in device memory (scale.cu).
struct MulScalarParams {
  const void *x;
  void *out;
  int64_t n;
  const float *s;
  DType dtype;
};
cudaError_t mul_scalar(const MulScalarParams &p, cudaStream_t stream);


// ---- The Hopper path (sm_90a; hopper_gemm.cu, rows.cu): the softmax inside our own GEMMs ----
// Per chunk of rows: hopper_logits (logits + per-tile row statistics), xent_rows (log-sum-exp, loss, the
// target columns), hopper_dlogits (dx32 += softmax W, the softmax written to `grad`), finish_rows (the onehot:
// dx = dx32 - W[target], grad[target] -= 1). Buffers:
struct HopperXentParams {
  DType dtype;
  const void *x;           // (rows, C) row-major, contiguous
  const void *w;           // (V, C) row-major, contiguous
  void *logits;            // (rows, ldl): hopper_logits writes columns 0 .. V - 1
  void *grad;              // (rows, ldl): hopper_dlogits writes G there (columns 0 .. V - 1)
  int64_t ldl;             // row stride of logits and grad: >= V, a multiple of 8 (16-byte TMA rows)
  float2 *stats;           // (rows, logits_tiles(V)): (max, sum of exp(l - max)) per 256-column tile
  float *lse2;             // (rows,): log-sum-exp * log2(e), +inf for ignored rows
  int *tcol;               // (rows,): the target column, -1 for ignored rows and targets outside [0, V)
  float *dx32;             // (rows, C) fp32: zeroed by the caller, hopper_dlogits adds softmax W into it
  const int64_t *targets;  // (rows,)
  float *row_loss;         // (rows,): lse - logit[target]; 0 ignored, NaN out of range (as softmax_xent_grad)
  int64_t ignore_index;
  int rows, V, C;          // C a multiple of 8
};
int logits_tiles(int V);
cudaError_t hopper_logits(const HopperXentParams &p, cudaStream_t stream, const char **why);
cudaError_t xent_rows(const HopperXentParams &p, cudaStream_t stream);
cudaError_t hopper_dlogits(const HopperXentParams &p, cudaStream_t stream, const char **why);
// after hopper_dlogits: dx (rows, C) of the inputs' dtype = dx32 - W[tcol], grad[tcol] = softmax - 1 (rows.cu)
cudaError_t finish_rows(const HopperXentParams &p, void *dx, cudaStream_t stream);

}  // namespace tk_cls
