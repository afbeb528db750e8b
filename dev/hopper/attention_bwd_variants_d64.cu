// dev/: the D = 64 instantiations of attention_bwd_variants.cuh and the C entry point that
// dev/hopper/check_attention_bwd_variants.py calls through ctypes (no torch headers: fast to build).
#include "attention_bwd_variants.cuh"

namespace tk_attn {
cudaError_t dev_bwd_d128(const BwdParams &p, int variant, cudaStream_t s);  // attention_bwd_variants_d128.cu
}  // namespace tk_attn

// Same buffers as the family's attention_backward_hopper binding: q, k, v, o, dout (B, H, T, D) bf16 with
// stride 1 along D; lse (B, H, T) fp32; dq, dk, dv outputs; delta, lse2 (B H Tp) and dq_accum (B H Tp D,
// zero-filled) fp32 workspaces, Tp = T rounded up to 128. strides: 8 x (b, h, t) in elements for
// q, k, v, o, dout, dq, dk, dv. Returns the cudaError_t.
extern "C" int tkdev_hbwd(int variant, const void *q, const void *k, const void *v, const void *o,
                          const void *dout, const float *lse, void *dq, void *dk, void *dv, float *delta,
                          float *lse2, float *dq_accum, const int64_t *strides, int B, int H, int T, int D,
                          int causal, float scale, void *stream) {
  using namespace tk_attn;
  BwdParams p{};
  p.q = q; p.k = k; p.v = v; p.o = o; p.dout = dout; p.lse = lse;
  p.dq = dq; p.dk = dk; p.dv = dv;
  p.delta = delta; p.lse_log2 = lse2; p.dq_accum = dq_accum;
  Strides *dst[8] = {&p.q_s, &p.k_s, &p.v_s, &p.o_s, &p.do_s, &p.dq_s, &p.dk_s, &p.dv_s};
  for (int i = 0; i < 8; i++) *dst[i] = Strides{strides[3 * i], strides[3 * i + 1], strides[3 * i + 2]};
  p.B = B; p.H = H; p.T = T; p.D = D;
  p.scale = scale;
  p.causal = causal != 0;
  p.dtype = DType::bf16;
  if (B < 1 || H < 1 || T < 1 || !(scale > 0.f)) return int(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (D == 64) return int(dev_bwd<64>(p, variant, s));
  if (D == 128) return int(dev_bwd_d128(p, variant, s));
  return int(cudaErrorInvalidValue);
}
