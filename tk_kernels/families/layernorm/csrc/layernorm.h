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
  const float *weight;  // (cols,)
  const float *bias;    // (cols,) or nullptr
  void *s;              // (rows, cols) output x + delta in x's dtype (unused when delta is nullptr)
  void *y;              // (rows, cols) output LayerNorm(x + delta) * weight + bias
  float *mean, *rstd;   // (rows,) outputs
  int64_t rows;
  int cols;
  float eps;
  DType x_t, delta_t, y_t;  // delta_t: the dtype it would have (x_t) when delta is nullptr
};

struct BwdParams {
  const void *dy;       // (rows, cols) gradient of y, y's dtype
  const void *ds;       // (rows, cols) gradient of the sum output s, x's dtype, or nullptr
  const void *s;        // (rows, cols) the normalized input (the saved sum, or x), x's dtype
  const float *mean, *rstd, *weight;
  void *dx;             // (rows, cols) output: gradient of x (= of the sum), x's dtype
  void *ddelta;         // (rows, cols) output: the same values in delta's dtype, or nullptr
  float *dweight;       // (cols,) output
  float *dbias;         // (cols,) output, or nullptr (no bias)
  float *partial;       // workspace of backward_workspace_floats(p) floats
  int64_t rows;
  int cols;
  DType x_t, dy_t, delta_t;
};

cudaError_t layer_norm_forward(const FwdParams &p, cudaStream_t stream);
// fp32 elements of the workspace p.partial that layer_norm_backward(p) needs on the current device
// (per-CTA partial sums of dweight and dbias; the other pointers of p are not read); -1 on error
int64_t backward_workspace_floats(const BwdParams &p);
cudaError_t layer_norm_backward(const BwdParams &p, cudaStream_t stream);

}  // namespace tk_ln
