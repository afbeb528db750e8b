// GELU and its derivative in fp32, the two forms of PyTorch's nn.GELU:
//   exact ("none"):  gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
//                    gelu'(x) = Phi(x) + x phi(x),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//   tanh:            gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2 / pi) (x + 0.044715 x^3)
//                    gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2),  t = tanh(u)
// Phi through the classical rational approximation of erf (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7):
// erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2), t = 1 / (1 + p z), z >= 0, odd in z. It needs
// exp(-x^2 / 2), the factor gelu' needs too: 2 MUFU ops and ~14 others per value, against ~29 for erff (the
// epilogues run in the shadow of the tensor cores, so their instruction count is their cost). Measured
// against float64 over [-12, 12] in fp32 (CPU emulation): max |error| 6.8e-7 for gelu (erff's formula:
// the same), 3.0e-7 for gelu' (erff: 1.4e-7), far below the 16-bit rounding of the outputs.
// tanh with CUDA's tanhf (MUFU.TANH under --use_fast_math).
// Instruction count (the epilogue warpgroup that runs this is instruction-bound: bench/RESULTS.md session 43, 0.29
// instructions a cycle, ~88% busy): the polynomial's coefficients are stored halved (exact: a power of two), so
// 0.5 - 0.5 poly e is one FFMA, and exp(-x^2 / 2) is ex2(x (x c)) with c = -log2(e) / 2 folded, two FMUL instead of
// three: 5 FMUL + 7 FFMA + 1 FADD + 2 MUFU a value (7 FMUL before; SASS of the bf16 GELU GEMM's box loop).
// __expf's own x log2(e) product is replaced by exp2f of the pre-scaled exponent (ex2.approx.ftz, the same MUFU.EX2).
// Against float64 over [-12, 12] (fp32 emulation): max |error| 4.6e-7 for gelu, 3.0e-7 for gelu'. Measured with
// gemm.cu's AuxChunks (H100, session 43, alternated, dev/mlp_epilogue_ncu.py): the GELU GEMM 175 -> 164 us at
// (16384, 3072, 768) and 278 -> 269 us at (16384, 4096, 1024).
#pragma once

namespace tk_mlp {

constexpr float SQRT1_2 = 0.70710678118654752f;       // 1 / sqrt(2)
constexpr float INV_SQRT_2PI = 0.39894228040143268f;  // 1 / sqrt(2 pi)
constexpr float SQRT_2_OVER_PI = 0.79788456080286536f;
constexpr float GELU_TANH_C = 0.044715f;
constexpr float ERF_P = 0.3275911f;
// A&S 7.1.26's a1..a5, halved
constexpr float ERF_H1 = 0.5f * 0.254829592f, ERF_H2 = 0.5f * -0.284496736f, ERF_H3 = 0.5f * 1.421413741f,
                ERF_H4 = 0.5f * -1.453152027f, ERF_H5 = 0.5f * 1.061405429f;
constexpr float NEG_HALF_LOG2E = -0.72134752044448170f;  // -log2(e) / 2: exp(-x^2 / 2) = 2^(x^2 NEG_HALF_LOG2E)

// Phi(x), and e = exp(-x^2 / 2)
__device__ __forceinline__ float normal_cdf(float x, float &e) {
  const float t = __fdividef(1.f, fmaf(ERF_P * SQRT1_2, fabsf(x), 1.f));
  e = exp2f(x * (x * NEG_HALF_LOG2E));
  const float half_poly = t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, ERF_H5, ERF_H4), ERF_H3), ERF_H2), ERF_H1);
  return 0.5f + copysignf(fmaf(-half_poly, e, 0.5f), x);  // 0.5 (1 + sign(x) erf(|x| / sqrt 2))
}

// gelu(x), and its derivative in d: the forward writes both (the backward multiplies by d, computing nothing)
__device__ __forceinline__ float gelu_and_grad(float x, bool tanh_form, float &d) {
  if (tanh_form) {
    const float t = tanhf(SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x));
    d = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * SQRT_2_OVER_PI * (1.f + 3.f * GELU_TANH_C * x * x);
    return 0.5f * x * (1.f + t);
  }
  float e;
  const float cdf = normal_cdf(x, e);
  d = fmaf(x * INV_SQRT_2PI, e, cdf);
  return x * cdf;
}

}  // namespace tk_mlp
