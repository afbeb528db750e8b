// dev/: the D = 128 instantiations of attention_bwd_variants.cuh (a translation unit of its own so the
// two head sizes compile in parallel).
#include "attention_bwd_variants.cuh"

namespace tk_attn {
cudaError_t dev_bwd_d128(const BwdParams &p, int variant, cudaStream_t s) { return dev_bwd<128>(p, variant, s); }
}  // namespace tk_attn
