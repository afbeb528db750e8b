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

// out[i] = x[i] * s[0] for n elements of a bf16/fp16 tensor (fp32 product, rounded once to x's dtype, or
// stored as is when out_f32), x and out 16-byte aligned (they may be the same buffer when !out_f32); s points
// to one fp32 value in device memory (scale.cu).
struct MulScalarParams {
  const void *x;
  void *out;
  int64_t n;
  const float *s;
  DType dtype;
  bool out_f32;
};
cudaError_t mul_scalar(const MulScalarParams &p, cudaStream_t stream);

}  // namespace tk_cls
