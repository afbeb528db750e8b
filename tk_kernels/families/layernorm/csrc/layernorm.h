// C launcher interface of the LayerNorm kernel family (residual add + LayerNorm, forward and backward).
// forward.cu and backward.cu implement these; bindings.cpp calls them. No torch headers here.
//
// Shapes: every tensor is a contiguous (rows, cols) matrix (mean / rstd: (rows,)), 16-byte aligned;
// cols is a multiple of 8 in [MIN_COLS, MAX_COLS]. weight / bias are fp32 (cols,).
// Supported dtype combinations (x = residual stream and the sum s = x + delta, delta = sublayer
// output, y = normalized output): see supported_dtypes(); in words: everything fp32, or a 16-bit
// y with delta in y's dtype or in x's, and x fp32 or y's dtype (the dtypes autocast training has).
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

#include "common/dropout.cuh"

namespace tk_ln {

enum class DType : int { f32 = 0, bf16 = 1, f16 = 2 };

constexpr int MIN_COLS = 64;
constexpr int MAX_COLS = 8192;
constexpr int VEC = 8;  // elements per 16-byte vector (8 x 16-bit; fp32 rows use two 16-byte accesses)

// true if (x, delta, y) is a combination the kernels are compiled for
inline bool supported_dtypes(DType x, DType delta, DType y) {
  if (y == DType::f32) return x == DType::f32 && delta == DType::f32;
  return (x == DType::f32 || x == y) && (delta == x || delta == y);
}

struct FwdParams {
  const void *x;        // (rows, cols) residual stream
  const void *delta;    // (rows, cols) sublayer output, or nullptr (plain LayerNorm of x)
  const float *delta_bias;  // (cols,) the sublayer's bias, added to delta (rounded to delta's dtype) before the
                            // dropout and the sum, or nullptr
  const float *weight;  // (cols,)
  const float *bias;    // (cols,) or nullptr
  void *s;              // (rows, cols) output x + delta (+ delta_bias) in x's dtype (unused when delta is nullptr)
  void *y;              // (rows, cols) output LayerNorm(x + delta) * weight + bias
  float *mean, *rstd;   // (rows,) outputs
  int64_t rows;
  int cols;
  float eps;
  DType x_t, delta_t, y_t;  // delta_t: the dtype it would have (x_t) when delta is nullptr
};

// Dropout on delta (dropout.cuh): s = x + dropout(delta), a separate argument of the launchers (the
// kernels without dropout keep their parameters, and their code: with these fields in FwdParams ptxas
// laid out the forward kernels without dropout differently, 648 instead of 744 instructions at
// fp32 x / fp16 delta, K = 2, sm_90a, although they never read them).
struct FwdDropout {
  float p;               // in (0, 1); needs delta
  tk::philox_state rng;  // the generator state to draw from
  int64_t *rng_state;    // (2,) int64 device output: the (seed, offset) used
};
struct BwdDropout {
  float p;                   // the forward's
  const int64_t *rng_state;  // (2,) int64 device tensor (seed, offset) the forward wrote
};

struct BwdParams {
  const void *dy;       // (rows, cols) gradient of y, y's dtype
  const void *ds;       // (rows, cols) gradient of the sum output s, x's dtype, or nullptr
  const void *s;        // (rows, cols) the normalized input (the saved sum, or x), x's dtype
  const float *mean, *rstd, *weight;
  void *dx;             // (rows, cols) output: gradient of x (= of the sum), x's dtype
  void *ddelta;         // (rows, cols) output: the same values in delta's dtype, or nullptr (with dropout:
                        // keep * dx / (1 - p), always given; see layer_norm_backward)
  float *dweight;       // (cols,) output
  float *dbias;         // (cols,) output, or nullptr (no bias)
  float *ddelta_bias;   // (cols,) output: the column sums of ddelta (delta_bias's gradient), or nullptr
  float *partial;       // workspace of backward_workspace_floats(p) floats
  int64_t rows;
  int cols;
  DType x_t, dy_t, delta_t;
};

// The scale of the kept elements of a dropout of probability p: float(1 / (1 - p)), the division in double
// (ops.py's keep_scale).
inline float dropout_keep_scale(float p) { return float(1.0 / (1.0 - double(p))); }

// drop (optional): dropout on delta, s = x + dropout(delta)
cudaError_t layer_norm_forward(const FwdParams &p, cudaStream_t stream, const FwdDropout *drop = nullptr);
// fp32 elements of the workspace p.partial that layer_norm_backward(p, drop) needs on the current device
// (per-CTA partial sums of dweight and dbias; the other pointers of p are not read); -1 on error
int64_t backward_workspace_floats(const BwdParams &p, const BwdDropout *drop = nullptr);
// drop (optional): the forward had dropout on delta; then ddelta = keep * dx / (1 - p) in delta's dtype,
// the keep mask regenerated from the forward's rng_state, and p.ddelta must be given (also when
// delta_t == x_t: the gradients of x and delta differ)
cudaError_t layer_norm_backward(const BwdParams &p, cudaStream_t stream, const BwdDropout *drop = nullptr);

// Debug: mask[i] = 1 if the dropout of probability p with the (seed, offset) in rng_state ((2,) int64 on
// the device) keeps element i of a (rows, cols) delta, else 0 (dropout.cuh); mask is rows x cols uint8.
cudaError_t dropout_mask(uint8_t *mask, const int64_t *rng_state, int64_t rows, int cols, float p,
                         cudaStream_t stream);

}  // namespace tk_ln
