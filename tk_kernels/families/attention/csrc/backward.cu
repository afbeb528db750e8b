// Flash attention backward (sm_80+, mma.sync tensor cores), written with the tk tile DSL: the launcher.
//
// Given Q, K, V, O, dO (B, H, T, D) and lse (B, H, T) from the forward,
//     P    = exp(scale * Q K^T [+ causal mask] - lse)     (recomputed, never stored)
//     dV   = P^T dO                 dP = dO V^T
//     dS   = P * (dP - delta)       delta_i = rowsum(dO_i * O_i)
//     dQ   = scale * dS K           dK = scale * dS^T Q
// With dropout of probability p (the forward computed O = (P o Z) V with Z = keep mask / (1 - p),
// keep mask regenerated here from the forward's (seed, offset): dropout.cuh):
//     dV   = (P o Z)^T dO           dP~ = Z o (dO V^T)          dS = P o (dP~ - delta)
// and delta is unchanged: softmax's backward needs sum_j P_ij dP~_ij (the gradient w.r.t. P of
// the loss is dP~ = Z o dP), and sum_j P_ij Z_ij (dO_i . V_j) = dO_i . sum_j (P o Z)_ij V_j =
// dO_i . O_i. Each kernel draws a tile's mask once and uses it for dP~ and for the dropped P of dV (dV is
// scaled by 1 / (1 - p) at the end). The transposed dK / dV kernel computes dS' = (1 - p) dS (dropout_bwd_k
// in dropout.cuh: one select per element fewer), so its dK and, through the convert kernel, dQ get the
// 1 / (1 - p) at the end too; the split and deterministic dQ kernels compute dS itself (dropout_ds).
// The split kernel (D = 128) has dropout variants only for its bulk dQ path and the deterministic path;
// configs.cu marks the others, and with dropout an A100 runs the transposed kernel at D = 128.
// Causal is top-left aligned (key j is visible to query i iff j <= i). Exponentials are exp2 with
// log2(e) folded into the scale: P = 2^(S * scale*log2e - lse*log2e).
//
// Launches (each checked), FlashAttention-2 style, parallel over key blocks:
//   1. bwd_delta_kernel (backward_dq.cu)     delta = rowsum(dO * O), fp32, into p.delta.
//   2. dK / dV, one CTA per (128-key block, b, h), the configuration that select_dkdv (configs.cu) picks
//      for the device: bwd_dkdv_kernel (backward_dkdv.cu: D = 64, and D = 128 on 99 KB GPUs) or
//      bwd_dkdv_split_kernel (backward_dkdv_split.cu: D = 128). On the default path they also add each
//      query block's dQ partial (dS K over the CTA's keys) into the fp32 workspace p.dq_accum: on sm_90
//      by one 4 KB TMA bulk reduction per warp (cp.reduce.async.bulk .add.f32, dq_partial_atomic in
//      backward.cuh), elsewhere with fp32 red.add.
//   3. bwd_dq_convert_kernel (backward_dq.cu) dq = scale * dq_accum, cast, stored with dq's strides;
//      or, deterministic path, bwd_dq_kernel: parallel over query blocks, recomputes P and dS and
//      accumulates dQ in registers, so dQ is bitwise reproducible (no atomics).
// Convention: dq_accum holds the UNSCALED sum of dS K; the scale is applied by the convert kernel.
//
// Measured on an H200 (bench/RESULTS.md, "attention ... commit 2071b28", bf16): the backward runs 1.02-1.30x
// SDPA flash at all 14 benchmark configurations (D = 64: 1.06-1.30x, D = 128: 1.02-1.13x, the low end at
// (1,16,16384,128) both masks); the per-kernel choices and their numbers are in the header comments of the
// kernel files. On sm_90 the default backward is hopper_backward.cu (ops.backward_path), which measured
// 1.0-1.66x this one except 0.92x / 0.98x at (64,6,256,64) (session 4, call 2); these kernels remain the
// A100 / RTX-class path, the deterministic backward everywhere, and TK_ATTENTION_BWD=portable.
#include <cmath>

#include "backward.cuh"
#include "configs.cuh"

namespace tk_attn {
namespace {

template <typename T, bool DROPOUT>
cudaError_t launch_kernels(const BwdParams &p, const bwd_args_t<T, DROPOUT> &a, cudaStream_t stream) {
  const int D = p.D;
  cudaError_t err;

  // 1. delta = rowsum(dO * O)
  if ((err = launch_delta<T>(a, make_gl<T>(p, p.o, p.o_s), D, stream)) != cudaSuccess) return err;

  // 2. dK, dV (+ dQ partials): the configuration of the table that fits this device
  int budget = 0;
  bool sm90 = false;
  if ((err = device_budget(budget, sm90)) != cudaSuccess) return err;
  const dkdv_launch *c = select_dkdv(D, p.deterministic, budget, sm90, DROPOUT);
  if (c == nullptr) return cudaErrorInvalidValue;
  bwd_args_t<T, DROPOUT> ac = a;
  ac.dq_xor32 = c->dq == dq_mode::bulk;  // the bulk path's dq_accum layout
  const unsigned kv_grid = unsigned(cdiv(p.T, KV_BLOCK_N)) * unsigned(p.B * p.H);
  err = c->kernel == dkdv_kernel::transposed ? launch_dkdv_transposed<T, DROPOUT>(*c, ac, kv_grid, stream)
                                             : launch_dkdv_split<T, DROPOUT>(*c, ac, kv_grid, stream);
  if (err != cudaSuccess) return err;

  // 3. dQ (with dropout the transposed kernel's dq_accum holds (1 - p) dS K: dropout_bwd_k)
  if (p.deterministic) return launch_dq_deterministic<T, DROPOUT>(ac, D, stream);
  bwd_args<T> aq = ac;
  if constexpr (DROPOUT) {
    if (c->kernel == dkdv_kernel::transposed) aq.scale = p.scale * a.drop.keep_scale;
  }
  return launch_dq_convert<T>(aq, D, stream);
}

template <typename T>
cudaError_t launch(const BwdParams &p, cudaStream_t stream) {
  const int D = p.D;
  bwd_args<T> a{};  // value-initialised: optional fields (colsum_partial) stay null
  a.q = make_gl<T>(p, p.q, p.q_s);
  a.k = make_gl<T>(p, p.k, p.k_s);
  a.v = make_gl<T>(p, p.v, p.v_s);
  a.dout = make_gl<T>(p, p.dout, p.do_s);
  a.dq = make_gl<T>(p, p.dq, p.dq_s);
  a.dk = make_gl<T>(p, p.dk, p.dk_s);
  a.dv = make_gl<T>(p, p.dv, p.dv_s);
  a.dq_rows = int(dq_accum_rows(p.T));
  const int64_t TD = int64_t(p.T) * D;
  a.dq_accum = gl<float>{p.dq_accum, {p.B, p.H, p.T, D}, {TD * p.H, TD, D}};
  a.dq_xor32 = false;
  a.dq_frag64 = false;
  a.lse = p.lse;
  a.delta = p.delta;
  a.seq = p.T;
  a.heads = p.H;
  a.scale = p.scale;
  a.scale_log2 = p.scale * LOG2E;
  a.causal = p.causal;
  if (p.dropout_p == 0.f) return launch_kernels<T, false>(p, a, stream);
  bwd_dropout_args<T> ad;
  static_cast<bwd_args<T> &>(ad) = a;
  ad.drop.rng = dropout_rng{0, 0, p.rng_state, p.rng_state + 1, 0, true};  // the forward's (seed, offset)
  ad.drop.threshold = dropout_threshold(p.dropout_p);
  ad.drop.keep_scale = 1.f / (1.f - p.dropout_p);
  ad.drop.rng_out = nullptr;
  return launch_kernels<T, true>(p, ad, stream);
}

}  // namespace

cudaError_t attention_backward(const BwdParams &p, cudaStream_t stream) {
  if (p.B < 1 || p.H < 1 || p.T < 1) return cudaErrorInvalidValue;
  if (p.D != 64 && p.D != 128) return cudaErrorInvalidValue;
  if (!std::isfinite(p.scale)) return cudaErrorInvalidValue;
  if (!p.q || !p.k || !p.v || !p.o || !p.dout || !p.lse || !p.dq || !p.dk || !p.dv || !p.delta)
    return cudaErrorInvalidValue;
  if (!p.deterministic && !p.dq_accum) return cudaErrorInvalidValue;
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f) || (p.dropout_p > 0.f && !p.rng_state)) return cudaErrorInvalidValue;
  // Grids are 1-D over (blocks x B x H); keep them within 2^31 - 1 CTAs.
  if (int64_t(p.B) * p.H * ((int64_t(p.T) + 63) / 64) > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return launch<bf16>(p, stream);
  if (p.dtype == DType::fp16) return launch<half>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
