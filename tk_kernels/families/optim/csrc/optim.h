// C launcher interface of the optimizer kernel family: AdamW over a list of fp32 parameters, with the
// gradients' global 2-norm clipping folded in. adamw.cu implements it; bindings.cpp calls it. No torch
// headers here or in the kernel files.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace tk_optim {

// One parameter's update, its hyper-parameters already folded for its step count t (host side):
//   p <- p * decay - step_size * m / (sqrt(v) / bc2_sqrt + eps),  m <- beta1 m + (1 - beta1) g,
//   v <- beta2 v + (1 - beta2) g^2,  g the (clipped) gradient.
struct AdamWTensor {
  float *param;            // numel contiguous fp32 values; exp_avg and exp_avg_sq the same, grad read only
  const float *grad;
  float *exp_avg;
  float *exp_avg_sq;
  int64_t numel;
  float decay;             // 1 - lr * weight_decay
  float step_size;         // lr / (1 - beta1^t)
  float bc2_sqrt;          // sqrt(1 - beta2^t)
  float beta1, beta2, eps;
  void *copy16;            // nullptr, or numel contiguous 16-bit values that receive the updated p rounded to
  int copy_dtype;          // their dtype (COPY_BF16 / COPY_FP16): the model's weight copies that its GEMMs read
};

constexpr int COPY_BF16 = 1, COPY_FP16 = 2;

struct AdamWStep {
  const AdamWTensor *tensors;  // host array of `count` entries, numel >= 1 each
  int count;
  float max_norm;              // > 0: scale every gradient by min(1, max_norm / (norm + 1e-6)), norm the global
                               // 2-norm of all of them (torch.nn.utils.clip_grad_norm_); <= 0: no clipping
  float *norm_out;             // device fp32 scalar: the global norm (written only when clipping)
  float *scratch;              // device fp32 scratch of scratch_floats(count, sms) values (only when clipping)
  int sms;                     // the device's multiprocessor count
};

// fp32 values of scratch adamw_step needs for `count` tensors on a GPU with `sms` multiprocessors.
int64_t scratch_floats(int count, int sms);

// cudaSuccess or the first CUDA error; cudaErrorInvalidValue for unsupported parameters.
cudaError_t adamw_step(const AdamWStep &s, cudaStream_t stream);

}  // namespace tk_optim
