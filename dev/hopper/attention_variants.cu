// dev/: variants of the sm_90a attention forward, for timing beside the shipped one (not shipped).
// Compiles the family's csrc/hopper_forward.cu into this translation unit and instantiates its kernel
// with other template arguments. Built by dev/hopper/check_attention.py (with attention_variants_bind.cpp).
//
//   variant 0: the shipped kernel (ping-pong hand-offs between the two consumer warpgroups)
//   variant 1: no ping-pong (the consumers issue their wgmmas whenever they are ready)
//   variant 2: persistent grid (one CTA per SM walking the work items), with ping-pong
//   variant 3: D = 64 only: three consumer warpgroups (192-query items, 160 registers each), ping-pong
#include "hopper_forward.cu"

namespace tk_attn {

template <typename T, bool PP>
cudaError_t dev_dispatch(const FwdParams &p, cudaStream_t s, bool pers = false) {
  if (p.D == 64)
    return p.causal ? launch_hopper<T, 64, true, PP>(p, s, pers) : launch_hopper<T, 64, false, PP>(p, s, pers);
  if (p.D == 128)
    return p.causal ? launch_hopper<T, 128, true, PP>(p, s, pers) : launch_hopper<T, 128, false, PP>(p, s, pers);
  return cudaErrorInvalidValue;
}

cudaError_t dev_hopper_forward(const FwdParams &p, cudaStream_t s, int variant) {
  if (p.dtype != DType::bf16) return cudaErrorInvalidValue;
  if (variant == 0) return dev_dispatch<bf16, true>(p, s);
  if (variant == 1) return dev_dispatch<bf16, false>(p, s);
  if (variant == 2) return dev_dispatch<bf16, true>(p, s, true);
  if (variant == 3 && p.D == 64)
    return p.causal ? launch_hopper<bf16, 64, true, true, 3>(p, s) : launch_hopper<bf16, 64, false, true, 3>(p, s);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
