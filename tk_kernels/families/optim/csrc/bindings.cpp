// Torch bindings of the optimizer family's launcher (optim.h): the extension tk_optim_<hash>.
// The only file that includes torch headers: it validates the tensor lists and calls the launcher on the
// current CUDA stream of their device.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/python.h>

#include <optional>
#include <vector>

#include "check.h"
#include "optim.h"

namespace {

constexpr int HYPER = 6;  // per tensor: decay, step_size, bc2_sqrt, beta1, beta2, eps

void check_fp32(const at::Tensor &t, const char *what, size_t i, const c10::Device &device) {
  TK_CHECK(t.device() == device, "tk adamw: ", what, "[", i, "] is on ", t.device(), ", the parameters' first on ",
           device, " (one device per step)");
  TK_CHECK(t.scalar_type() == at::kFloat, "tk adamw: ", what, "[", i, "] must be float32, got ", t.scalar_type());
  TK_CHECK(t.is_contiguous(), "tk adamw: ", what, "[", i, "] must be contiguous");
}

// The AdamW update of params[i] with grads[i] and the moments exp_avgs[i], exp_avg_sqs[i] (all fp32, contiguous,
// one CUDA device), hyper[6 i .. 6 i + 6) = (1 - lr wd, lr / (1 - beta1^t), sqrt(1 - beta2^t), beta1, beta2, eps);
// max_norm > 0 clips the gradients' global 2-norm first (inside the update; the grads are not written) and
// returns that norm as a 0-dim fp32 tensor, else None. copies: empty, or one tensor per parameter, either
// empty (none) or a contiguous bf16 / fp16 tensor of the parameter's size that receives the updated parameter
// rounded to its dtype.
std::optional<at::Tensor> adamw_step_(std::vector<at::Tensor> params, std::vector<at::Tensor> grads,
                                      std::vector<at::Tensor> exp_avgs, std::vector<at::Tensor> exp_avg_sqs,
                                      std::vector<double> hyper, double max_norm, std::vector<at::Tensor> copies) {
  const size_t n = params.size();
  TK_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && hyper.size() == HYPER * n,
           "tk adamw: params, grads, exp_avgs, exp_avg_sqs must have one entry each per parameter and hyper six, got ",
           n, ", ", grads.size(), ", ", exp_avgs.size(), ", ", exp_avg_sqs.size(), " and ", hyper.size());
  TK_CHECK(copies.empty() || copies.size() == n, "tk adamw: copies must be empty or have one entry per parameter, got ",
           copies.size(), " for ", n, " parameters");
  if (n == 0) return std::nullopt;
  TK_CHECK(params[0].is_cuda(), "tk adamw: the parameters must be CUDA tensors, got one on ", params[0].device());
  const c10::Device device = params[0].device();
  std::vector<tk_optim::AdamWTensor> entries;
  entries.reserve(n);
  for (size_t i = 0; i < n; i++) {
    check_fp32(params[i], "params", i, device);
    check_fp32(grads[i], "grads", i, device);
    check_fp32(exp_avgs[i], "exp_avgs", i, device);
    check_fp32(exp_avg_sqs[i], "exp_avg_sqs", i, device);
    const int64_t numel = params[i].numel();
    TK_CHECK(grads[i].numel() == numel && exp_avgs[i].numel() == numel && exp_avg_sqs[i].numel() == numel,
             "tk adamw: params[", i, "] has ", numel, " elements but its grad / exp_avg / exp_avg_sq ",
             grads[i].numel(), " / ", exp_avgs[i].numel(), " / ", exp_avg_sqs[i].numel());
    if (numel == 0) continue;
    const double *h = hyper.data() + HYPER * i;
    tk_optim::AdamWTensor e{};
    e.param = params[i].data_ptr<float>();
    e.grad = grads[i].data_ptr<float>();
    e.exp_avg = exp_avgs[i].data_ptr<float>();
    e.exp_avg_sq = exp_avg_sqs[i].data_ptr<float>();
    e.numel = numel;
    e.decay = float(h[0]);
    e.step_size = float(h[1]);
    e.bc2_sqrt = float(h[2]);
    e.beta1 = float(h[3]);
    e.beta2 = float(h[4]);
    e.eps = float(h[5]);
    if (!copies.empty() && copies[i].numel() > 0) {
      const at::Tensor &c = copies[i];
      TK_CHECK(c.device() == device && c.is_contiguous() && c.numel() == numel &&
                   (c.scalar_type() == at::kBFloat16 || c.scalar_type() == at::kHalf),
               "tk adamw: copies[", i, "] must be a contiguous bf16 or fp16 tensor of params[", i, "]'s ", numel,
               " elements on ", device, ", got ", c.scalar_type(), " with ", c.numel(), " on ", c.device());
      e.copy16 = c.data_ptr();
      e.copy_dtype = c.scalar_type() == at::kBFloat16 ? tk_optim::COPY_BF16 : tk_optim::COPY_FP16;
    }
    entries.push_back(e);
  }
  const c10::cuda::CUDAGuard guard(device);
  int sms = 0;
  cudaError_t err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index());
  TK_CHECK(err == cudaSuccess, "tk adamw: cannot query the GPU: ", cudaGetErrorString(err));
  const bool clip = max_norm > 0.0;
  std::optional<at::Tensor> norm;
  at::Tensor scratch;
  tk_optim::AdamWStep s{};
  s.tensors = entries.data();
  s.count = static_cast<int>(entries.size());
  s.max_norm = clip ? static_cast<float>(max_norm) : 0.f;
  s.sms = sms;
  if (clip) {
    const auto opts = params[0].options();
    norm = at::zeros({}, opts);  // the norm of no gradients at all (every parameter empty) is 0
    scratch = at::empty({tk_optim::scratch_floats(s.count, sms)}, opts);
    s.norm_out = norm->data_ptr<float>();
    s.scratch = scratch.data_ptr<float>();
  }
  err = tk_optim::adamw_step(s, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  TK_CHECK(err == cudaSuccess, "tk adamw kernel failed: ", cudaGetErrorString(err));
  return norm;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tk_kernels: AdamW over a list of fp32 parameters with gradient-norm clipping folded in";
  m.def("adamw_step_", &adamw_step_,
        "(params, grads, exp_avgs, exp_avg_sqs, hyper, max_norm) -> the gradients' global norm if max_norm > 0 "
        "else None: in place, one AdamW step of every parameter (hyper: six values per parameter, "
        "1 - lr * weight_decay, lr / (1 - beta1^t), sqrt(1 - beta2^t), beta1, beta2, eps), the gradients scaled "
        "by min(1, max_norm / (norm + 1e-6)) first when max_norm > 0; copies (empty, or one per parameter, empty "
        "or 16-bit): each non-empty one receives its updated parameter rounded to its dtype",
        pybind11::arg("params"), pybind11::arg("grads"), pybind11::arg("exp_avgs"), pybind11::arg("exp_avg_sqs"),
        pybind11::arg("hyper"), pybind11::arg("max_norm"), pybind11::arg("copies") = std::vector<at::Tensor>{});
}
