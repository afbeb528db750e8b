// dev/: torch glue of attention_variants.cu (bf16 only, no checks beyond the basics).
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

#include "attention.h"

namespace tk_attn {
cudaError_t dev_hopper_forward(const FwdParams &p, cudaStream_t s, int variant);
}

static tk_attn::Strides strides_of(const at::Tensor &t) {
  auto s = [&](int d) -> int64_t { return t.size(d) == 1 ? 0 : t.stride(d); };
  return {s(0), s(1), s(2)};
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, bool causal,
                                           double scale, int64_t variant) {
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1,
              "bf16 with a contiguous last dim");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  at::Tensor o = at::empty({B, T, H, D}, q.options()).transpose(1, 2);
  at::Tensor lse = at::empty({B, H, T}, q.options().dtype(at::kFloat));
  tk_attn::FwdParams p{};
  p.q = q.data_ptr(); p.k = k.data_ptr(); p.v = v.data_ptr(); p.o = o.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.q_s = strides_of(q); p.k_s = strides_of(k); p.v_s = strides_of(v); p.o_s = strides_of(o);
  p.B = int(B); p.H = int(H); p.T = int(T); p.D = int(D);
  p.scale = float(scale);
  p.causal = causal;
  p.dtype = tk_attn::DType::bf16;
  cudaError_t err = tk_attn::dev_hopper_forward(p, c10::cuda::getCurrentCUDAStream().stream(), int(variant));
  TORCH_CHECK(err == cudaSuccess, "dev hopper forward failed: ", cudaGetErrorString(err));
  return {o, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "(q, k, v, causal, scale, variant) -> (o, lse)");
}
