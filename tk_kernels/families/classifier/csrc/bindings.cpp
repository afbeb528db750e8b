// Torch bindings of the classifier family's launcher (classifier.h): the extension tk_classifier_<hash>.
// The only file that includes torch headers: it validates tensors and calls the launcher on the
// current CUDA stream. The portable path's GEMMs run in Python (torch.matmul, cuBLAS); the Hopper path's
// logits and dx GEMMs are ours (hopper_chunk_), its dW GEMM is cuBLAS's: see ops.py.
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
at::Tensor mul_scalar(const at::Tensor& x, const at::Tensor& s) {
  TK_CHECK(x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) && x.is_contiguous(),
              "tk classifier mul_scalar: x must be a contiguous bfloat16/float16 CUDA tensor, got ", x.scalar_type(),
              " on ", x.device(), x.is_contiguous() ? "" : " (not contiguous)");
  TK_CHECK(s.device() == x.device() && s.scalar_type() == at::kFloat && s.numel() >= 1 && s.is_contiguous(),
              "tk classifier mul_scalar: s must be a contiguous float32 tensor of at least one element on ", x.device());
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  TK_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0, "tk classifier mul_scalar: x must be 16-byte aligned");
  tk_cls::MulScalarParams p{};
  p.x = x.data_ptr();
  p.out = out.data_ptr();
  p.n = x.numel();
  p.s = s.data_ptr<float>();
  p.dtype = x.scalar_type() == at::kBFloat16 ? tk_cls::DType::bf16 : tk_cls::DType::fp16;
  const cudaError_t err = tk_cls::mul_scalar(p, c10::cuda::getCurrentCUDAStream().stream());
  TK_CHECK(err == cudaSuccess, "tk classifier mul_scalar kernel failed: ", cudaGetErrorString(err));
  return out;
}

// The Hopper path's work on one chunk of rows (hopper_gemm.cu, rows.cu): logits = x w^T with their tile
// statistics, then each row's loss (row_loss), and, if dx32 is given, dx (rows, C) of x's dtype = G w with
// G = softmax - onehot written to grad (dx32: the GEMM's fp32 sums). x (rows, C), w (V, C) contiguous 16-bit CUDA tensors of one dtype; logits and grad
// (>= rows, ldl) with ldl >= V a multiple of 8, contiguous; stats fp32 (>= rows, logits_tiles(V), 2);
// lse2 fp32 and tcol int32 (>= rows,); row_loss fp32 (rows,); dx32 fp32 (rows, C) contiguous (zeroed here).
void hopper_chunk_(const at::Tensor& x, const at::Tensor& w, const at::Tensor& targets, at::Tensor& logits,
                   at::Tensor& grad, at::Tensor& stats, at::Tensor& lse2, at::Tensor& tcol, at::Tensor& row_loss,
                   c10::optional<at::Tensor> dx32, c10::optional<at::Tensor> dx, int64_t ignore_index) {
  const auto dt = x.scalar_type();
  TK_CHECK(x.is_cuda() && (dt == at::kBFloat16 || dt == at::kHalf) && x.dim() == 2 && x.is_contiguous(),
           "tk classifier (Hopper): x must be a contiguous (rows, C) bfloat16/float16 CUDA tensor");
  TK_CHECK(w.device() == x.device() && w.scalar_type() == dt && w.dim() == 2 && w.is_contiguous() &&
               w.size(1) == x.size(1), "tk classifier (Hopper): w must be a contiguous (V, C) tensor like x");
  const int64_t rows = x.size(0), C = x.size(1), V = w.size(0);
  TK_CHECK(rows <= INT32_MAX && V <= INT32_MAX && C % 8 == 0, "tk classifier (Hopper): C must be a multiple of 8");
  for (const at::Tensor* t : {&logits, &grad}) {
    TK_CHECK(t->device() == x.device() && t->scalar_type() == dt && t->dim() == 2 && t->is_contiguous() &&
                 t->size(0) >= rows && t->size(1) >= V && t->size(1) % 8 == 0,
             "tk classifier (Hopper): logits / grad must be contiguous (>= rows, ldl) buffers, ldl >= V, ldl % 8 == 0");
  }
  TK_CHECK(grad.size(1) == logits.size(1), "tk classifier (Hopper): logits and grad must have one row stride");
  const int tiles = tk_cls::logits_tiles(static_cast<int>(V));
  TK_CHECK(stats.device() == x.device() && stats.scalar_type() == at::kFloat && stats.is_contiguous() &&
               stats.numel() >= rows * tiles * 2, "tk classifier (Hopper): stats too small or not fp32");
  TK_CHECK(lse2.device() == x.device() && lse2.scalar_type() == at::kFloat && lse2.numel() >= rows &&
               tcol.device() == x.device() && tcol.scalar_type() == at::kInt && tcol.numel() >= rows,
           "tk classifier (Hopper): lse2 (fp32) and tcol (int32) need >= rows elements");
  TK_CHECK(targets.device() == x.device() && targets.scalar_type() == at::kLong && targets.dim() == 1 &&
               targets.size(0) == rows && targets.is_contiguous(),
           "tk classifier (Hopper): targets must be a contiguous int64 (rows,) tensor on ", x.device());
  TK_CHECK(row_loss.device() == x.device() && row_loss.scalar_type() == at::kFloat && row_loss.dim() == 1 &&
               row_loss.size(0) == rows && row_loss.is_contiguous(),
           "tk classifier (Hopper): row_loss must be a contiguous float32 (rows,) tensor");
  if (dx32) {
    TK_CHECK(dx32->device() == x.device() && dx32->scalar_type() == at::kFloat && dx32->is_contiguous() &&
                 dx32->dim() == 2 && dx32->size(0) == rows && dx32->size(1) == C,
             "tk classifier (Hopper): dx32 must be a contiguous float32 (rows, C) tensor");
    TK_CHECK(dx && dx->device() == x.device() && dx->scalar_type() == dt && dx->is_contiguous() && dx->dim() == 2 &&
                 dx->size(0) == rows && dx->size(1) == C,
             "tk classifier (Hopper): dx must be a contiguous (rows, C) tensor of x's dtype when dx32 is given");
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  tk_cls::HopperXentParams p{};
  p.dtype = dt == at::kBFloat16 ? tk_cls::DType::bf16 : tk_cls::DType::fp16;
  p.x = x.data_ptr();
  p.w = w.data_ptr();
  p.logits = logits.data_ptr();
  p.grad = grad.data_ptr();
  p.ldl = logits.size(1);
  p.stats = reinterpret_cast<float2*>(stats.data_ptr<float>());
  p.lse2 = lse2.data_ptr<float>();
  p.tcol = tcol.data_ptr<int>();
  p.dx32 = dx32 ? dx32->data_ptr<float>() : nullptr;
  p.targets = targets.data_ptr<int64_t>();
  p.row_loss = row_loss.data_ptr<float>();
  p.ignore_index = ignore_index;
  p.rows = static_cast<int>(rows);
  p.V = static_cast<int>(V);
  p.C = static_cast<int>(C);
  const char* why = nullptr;
  cudaError_t err = tk_cls::hopper_logits(p, stream, &why);
  TK_CHECK(err == cudaSuccess, "tk classifier logits GEMM failed: ", why ? why : cudaGetErrorString(err));
  err = tk_cls::xent_rows(p, stream);
  TK_CHECK(err == cudaSuccess, "tk classifier row kernel failed: ", cudaGetErrorString(err));
  if (!dx32) return;
  err = cudaMemsetAsync(p.dx32, 0, sizeof(float) * rows * C, stream);
  TK_CHECK(err == cudaSuccess, "tk classifier: memset of dx32 failed: ", cudaGetErrorString(err));
  err = tk_cls::hopper_dlogits(p, stream, &why);
  TK_CHECK(err == cudaSuccess, "tk classifier dx GEMM failed: ", why ? why : cudaGetErrorString(err));
  err = tk_cls::finish_rows(p, dx->data_ptr(), stream);
  TK_CHECK(err == cudaSuccess, "tk classifier finish kernel failed: ", cudaGetErrorString(err));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tk_kernels: fused softmax + cross-entropy + logit gradient of the classifier";
  m.def("softmax_xent_grad_", &softmax_xent_grad_,
        "(logits, targets, row_loss, ignore_index): in place, logits <- softmax(logits) - onehot(targets) "
        "(zero rows where targets == ignore_index); row_loss <- logsumexp - target logit (0 where ignored)",
        pybind11::arg("logits"), pybind11::arg("targets"), pybind11::arg("row_loss"), pybind11::arg("ignore_index"));
  m.def("mul_scalar", &mul_scalar, "(x, s) -> (x.float() * s[0]).to(x.dtype), the fp32 product rounded once",
        pybind11::arg("x"), pybind11::arg("s"));
  m.def("hopper_chunk_", &hopper_chunk_,
        "(x, w, targets, logits, grad, stats, lse2, tcol, row_loss, dx32, dx, ignore_index): the Hopper path's "
        "logits GEMM + row statistics, row losses, and (dx32, dx given) dx = (softmax - onehot) w with the "
        "gradient written to grad",
        pybind11::arg("x"), pybind11::arg("w"), pybind11::arg("targets"), pybind11::arg("logits"),
        pybind11::arg("grad"), pybind11::arg("stats"), pybind11::arg("lse2"), pybind11::arg("tcol"),
        pybind11::arg("row_loss"), pybind11::arg("dx32"), pybind11::arg("dx"), pybind11::arg("ignore_index"));
  m.def("logits_tiles", &tk_cls::logits_tiles, "256-column tiles of a vocabulary of V (the stats' width)");
  m.def("max_vocab", &tk_cls::max_vocab, "largest vocabulary size the kernel supports");
}
