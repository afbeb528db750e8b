// The classifier backward's gradient scaling: out = x * s[0] (x, out bf16/fp16, s one fp32 value in device
// memory): the fp32 product, rounded once to x's dtype. (PyTorch's `x * s` for a 16-bit x and a 0-dim fp32 CUDA
// tensor s, which this replaces, first rounds s to x's dtype: a relative error of up to 2^-9 (bf16) on the whole
// gradient, which this kernel does not have.)
//
// Kernel mul_scalar_kernel<T, Out>: a grid-stride loop over 16-byte vectors of 8 elements (tk::load8 / store8),
//   the up to 7 elements after the last whole vector one by one; x and out 16-byte aligned.
//   Why: the backward scales dx (N, C) and dw (V, C) by grad_output / count, a device value (no host
//   sync). PyTorch ran `x * s` for these mixed dtypes in its non-vectorised casting loop: 196.6 us for the
//   two at N = 16384, C = 768, V = 50304 (H200, torch 2.11, session 11, torch.profiler; 1.0 TB/s over the
//   204 MB they read and write); this kernel: 54.4 us (3.8 TB/s).
//   Out = float: dw straight into the fp32 weight's gradient when the op computed with the model's 16-bit copy of
//   the weight (GPT.keep_weight16), in place of the 16-bit product and autograd's cast of it to fp32 after.
#include "tk.cuh"

#include <algorithm>

#include "classifier.h"

namespace tk_cls {
namespace {

template <typename T, typename Out>
__global__ void __launch_bounds__(256) mul_scalar_kernel(const T *x, Out *out, int64_t n, const float *s) {
  const float a = *s;
  const int64_t nvec = n / 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < nvec; j += stride) {
    float v[8];
    tk::load8(v, x + 8 * j);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] *= a;
    tk::store8(out + 8 * j, v);
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 8 * nvec) {
    const int64_t i = 8 * nvec + threadIdx.x;
    out[i] = tk::from_float<Out>(tk::to_float(x[i]) * a);
  }
}

// The kernel for input dtype T and p's output (T, or fp32).
template <typename T>
void launch(const MulScalarParams &p, unsigned blocks, cudaStream_t stream) {
  const T *x = static_cast<const T *>(p.x);
  if (p.out_f32)
    mul_scalar_kernel<T, float><<<blocks, 256, 0, stream>>>(x, static_cast<float *>(p.out), p.n, p.s);
  else
    mul_scalar_kernel<T, T><<<blocks, 256, 0, stream>>>(x, static_cast<T *>(p.out), p.n, p.s);
}

}  // namespace

cudaError_t mul_scalar(const MulScalarParams &p, cudaStream_t stream) {
  if (p.n < 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0)
    return cudaErrorInvalidValue;
  if (p.n == 0) return cudaSuccess;
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  // 8 blocks of 256 threads per SM, fewer for small tensors
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(int64_t(sms) * 8, (p.n / 8 + 255) / 256));
  if (p.dtype == DType::bf16)
    launch<tk::bf16>(p, unsigned(blocks), stream);
  else
    launch<tk::half>(p, unsigned(blocks), stream);
  return cudaGetLastError();
}

}  // namespace tk_cls
