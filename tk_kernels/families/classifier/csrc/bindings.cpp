// Torch bindings of the classifier family's launcher (classifier.h): the extension tk_classifier_<hash>.
// The only file that includes torch headers: it validates tensors and calls the launcher on the
// current CUDA stream. The GEMMs around the kernel run in Python (torch.matmul, cuBLAS): see ops.py.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/python.h>

#include "check.h"
#include "classifier.h"

namespace {

// logits (rows, V) bf16/fp16, contiguous, 16-byte aligned: overwritten in place with
// softmax - onehot(target) (zeros for ignored rows); row_loss (rows,) fp32 gets each row's loss.
void softmax_xent_grad_(at::Tensor& logits, const at::Tensor& targets, at::Tensor& row_loss, int64_t ignore_index) {
  TK_CHECK(logits.is_cuda(), "tk classifier: logits must be a CUDA tensor, got device ", logits.device());
  TK_CHECK(logits.scalar_type() == at::kBFloat16 || logits.scalar_type() == at::kHalf,
              "tk classifier: logits must be bfloat16 or float16, got ", logits.scalar_type());
  TK_CHECK(logits.dim() == 2 && logits.is_contiguous(), "tk classifier: logits must be a contiguous (rows, V) "
              "tensor, got shape ", logits.sizes(), " strides ", logits.strides());
  TK_CHECK(reinterpret_cast<uintptr_t>(logits.data_ptr()) % 16 == 0,
              "tk classifier: logits data pointer must be 16-byte aligned");
  const int64_t rows = logits.size(0), V = logits.size(1);
  TK_CHECK(V >= 1 && V <= tk_cls::max_vocab(), "tk classifier: vocabulary size must be in [1, ",
              tk_cls::max_vocab(), "], got ", V);
  TK_CHECK(rows <= INT32_MAX, "tk classifier: too many rows: ", rows);
  TK_CHECK(targets.device() == logits.device() && targets.scalar_type() == at::kLong && targets.dim() == 1 &&
              targets.size(0) == rows && targets.is_contiguous(),
              "tk classifier: targets must be a contiguous int64 (rows,) tensor on ", logits.device(),
              ", got ", targets.scalar_type(), " of shape ", targets.sizes(), " on ", targets.device());
  TK_CHECK(row_loss.device() == logits.device() && row_loss.scalar_type() == at::kFloat && row_loss.dim() == 1 &&
              row_loss.size(0) == rows && row_loss.is_contiguous(),
              "tk classifier: row_loss must be a contiguous float32 (rows,) tensor on ", logits.device());
  const c10::cuda::CUDAGuard guard(logits.device());
  tk_cls::XentParams p{};
  p.logits = logits.data_ptr();
  p.targets = targets.data_ptr<int64_t>();
  p.row_loss = row_loss.data_ptr<float>();
  p.rows = rows;
  p.V = static_cast<int>(V);
  p.ignore_index = ignore_index;
  p.dtype = logits.scalar_type() == at::kBFloat16 ? tk_cls::DType::bf16 : tk_cls::DType::fp16;
  const cudaError_t err = tk_cls::softmax_xent_grad(p, c10::cuda::getCurrentCUDAStream().stream());
  TK_CHECK(err == cudaSuccess, "tk classifier kernel failed: ", cudaGetErrorString(err));
}

// x * s[0] into a new tensor of x's dtype: x a contiguous bf16/fp16 CUDA tensor, s a contiguous fp32 CUDA tensor
// (its first element is the factor) on x's device; the fp32 product rounded once (scale.cu).
at::Tensor mul_scalar(const at::Tensor& x, const at::Tensor& s, bool out_f32) {
  TK_CHECK(x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) && x.is_contiguous(),
              "tk classifier mul_scalar: x must be a contiguous bfloat16/float16 CUDA tensor, got ", x.scalar_type(),
              " on ", x.device(), x.is_contiguous() ? "" : " (not contiguous)");
  TK_CHECK(s.device() == x.device() && s.scalar_type() == at::kFloat && s.numel() >= 1 && s.is_contiguous(),
              "tk classifier mul_scalar: s must be a contiguous float32 tensor of at least one element on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x, x.options().dtype(out_f32 ? at::kFloat : x.scalar_type()),
                                  at::MemoryFormat::Contiguous);
  TK_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "tk classifier mul_scalar: x must be 16-byte aligned");
  tk_cls::MulScalarParams p{};
  p.x = x.data_ptr();
  p.out = out.data_ptr();
  p.n = x.numel();
  p.s = s.data_ptr<float>();
  p.dtype = x.scalar_type() == at::kBFloat16 ? tk_cls::DType::bf16 : tk_cls::DType::fp16;
  p.out_f32 = out_f32;
  const cudaError_t err = tk_cls::mul_scalar(p, c10::cuda::getCurrentCUDAStream().stream());
  TK_CHECK(err == cudaSuccess, "tk classifier mul_scalar kernel failed: ", cudaGetErrorString(err));
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tk_kernels: fused softmax + cross-entropy + logit gradient of the classifier";
  m.def("softmax_xent_grad_", &softmax_xent_grad_,
        "(logits, targets, row_loss, ignore_index): in place, logits <- softmax(logits) - onehot(targets) "
        "(zero rows where targets == ignore_index); row_loss <- logsumexp - target logit (0 where ignored)",
        pybind11::arg("logits"), pybind11::arg("targets"), pybind11::arg("row_loss"), pybind11::arg("ignore_index"));
  m.def("mul_scalar", &mul_scalar, "(x, s, out_f32=False) -> (x.float() * s[0]).to(x.dtype), the fp32 product "
        "rounded once, or the fp32 product itself when out_f32",
        pybind11::arg("x"), pybind11::arg("s"), pybind11::arg("out_f32") = false);
  m.def("max_vocab", &tk_cls::max_vocab, "largest vocabulary size the kernel supports");
}
