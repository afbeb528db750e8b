// dev copy of the MLP family's gelu.cuh before the rational erf (erff / expf / tanhf), for dev/hopper/mlp_gemm_v1.cu.
// GELU and its derivative in fp32, the two forms of PyTorch's nn.GELU:
//   exact ("none"):  gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
//                    gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh:            gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2 / pi) (x + 0.044715 x^3)
//                    gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2),  t = tanh(u)
// With CUDA's erff / expf / tanhf (a few ulp), like PyTorch's own GELU kernels.
#pragma once

namespace tk_mlp {

constexpr float SQRT1_2 = 0.70710678118654752f;       // 1 / sqrt(2)
constexpr float INV_SQRT_2PI = 0.39894228040143268f;  // 1 / sqrt(2 pi)
constexpr float SQRT_2_OVER_PI = 0.79788456080286536f;
constexpr float GELU_TANH_C = 0.044715f;

__device__ __forceinline__ float gelu(float x, bool tanh_form) {
  if (tanh_form) return 0.5f * x * (1.f + tanhf(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)));
  return 0.5f * x * (1.f + erff(x * SQRT1_2));
}

__device__ __forceinline__ float gelu_grad(float x, bool tanh_form) {
  if (tanh_form) {
    const float t = tanhf(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x));
    return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * SQRT_2_OVER_PI * (1.f + 3.f * GELU_TANH_C * x * x);
  }
  return 0.5f * (1.f + erff(x * SQRT1_2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}

}  // namespace tk_mlp
