// Torch bindings of the MLP family's launcher (mlp.h): the extension tk_mlp_<hash>. The only file that
// includes torch headers: it validates tensors and calls the launcher on the current CUDA stream.
// ops.py composes the MLP's forward and backward from gemm_.
#include <array>
#include <atomic>
#include <string>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/python.h>

#include "check.h"
#include "mlp.h"

namespace {

using tk_glue::msg;  // TORCH_CHECK(cond, msg(...)): messages from strings (families/glue/check.h says why)

tk_mlp::DType dtype_of(const at::Tensor &t) {
  TORCH_CHECK(t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf,
              msg("tk mlp: operands must be bfloat16 or float16, got ", t.scalar_type()));
  return t.scalar_type() == at::kBFloat16 ? tk_mlp::DType::bf16 : tk_mlp::DType::fp16;
}

void check_matrix(const at::Tensor &t, const char *name, const at::Tensor &like) {
  TORCH_CHECK(t.is_cuda() && t.device() == like.device(), msg("tk mlp: ", name, " must be a CUDA tensor on ", like.device(), ", got ", t.device()));
  TORCH_CHECK(t.dim() == 2 && t.stride(1) == 1, msg("tk mlp: ", name, " must be a 2-d tensor with contiguous rows, "
              "got shape ", t.sizes(), " strides ", t.strides()));
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0 && (t.stride(0) * t.element_size()) % 16 == 0,
              msg("tk mlp: ", name, " must start 16-byte aligned with a row stride of a multiple of 16 bytes"));
}

// c (M, N) <- epilogue(sum_k A(m, k) B(n, k)); a is (M, K), or (K, M) when a_mn; b is (N, K), or (K, N)
// when b_mn. epilogue: 0 store (+ bias), 1 gelu (aux <- gelu'(pre)), 2 dgelu (c <- acc * aux, aux = gelu'(pre)),
// 3 store_f32 (c fp32, zeroed first by the caller when splits != 1; splits 0 = choose). colsum (dgelu
// only): fp32 ((M + 63) / 64, N) <- column sums of c per block of 64 rows. a_colsum (store or dgelu, a K-major, b
// MN-major: dx = dy W): fp32 ((M + 63) / 64, K) <- column sums of a per block of 64 rows.
void gemm_(const at::Tensor &a, bool a_mn, const at::Tensor &b, bool b_mn, at::Tensor &c, int64_t epilogue,
           const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &aux, bool tanh_gelu,
           int64_t splits, const c10::optional<at::Tensor> &colsum, const c10::optional<at::Tensor> &a_colsum) {
  check_matrix(a, "a", a);
  check_matrix(b, "b", a);
  check_matrix(c, "c", a);
  TORCH_CHECK(b.scalar_type() == a.scalar_type(), msg("tk mlp: a and b must have one dtype, got ", a.scalar_type(), " and ", b.scalar_type()));
  TORCH_CHECK(epilogue >= 0 && epilogue <= 3, msg("tk mlp: unknown epilogue ", epilogue));
  const auto epi = static_cast<tk_mlp::Epilogue>(epilogue);
  const int64_t M = a_mn ? a.size(1) : a.size(0), K = a_mn ? a.size(0) : a.size(1);
  const int64_t N = b_mn ? b.size(1) : b.size(0), Kb = b_mn ? b.size(0) : b.size(1);
  TORCH_CHECK(K == Kb, msg("tk mlp: a and b disagree on K: ", K, " vs ", Kb));
  TORCH_CHECK(c.size(0) == M && c.size(1) == N, msg("tk mlp: c must be (", M, ", ", N, "), got ", c.sizes()));
  TORCH_CHECK(M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX, msg("tk mlp: dimensions beyond int32"));
  const bool f32_out = epi == tk_mlp::Epilogue::store_f32;
  TORCH_CHECK(c.scalar_type() == (f32_out ? at::kFloat : a.scalar_type()), msg("tk mlp: c must be ", f32_out ? "float32 (store_f32)" : "in the operands' dtype", ", got ", c.scalar_type()));
  tk_mlp::GemmParams p{};
  p.dtype = dtype_of(a);
  p.a_major = a_mn ? tk_mlp::Major::MN : tk_mlp::Major::K;
  p.b_major = b_mn ? tk_mlp::Major::MN : tk_mlp::Major::K;
  p.epilogue = epi;
  p.M = static_cast<int>(M);
  p.N = static_cast<int>(N);
  p.K = static_cast<int>(K);
  p.a = a.data_ptr();
  p.lda = a.stride(0);
  p.b = b.data_ptr();
  p.ldb = b.stride(0);
  p.c = c.data_ptr();
  p.ldc = c.stride(0);
  p.tanh_gelu = tanh_gelu;
  p.splits = static_cast<int>(splits);
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->is_cuda() && bias->device() == a.device() &&
                (bias->scalar_type() == at::kFloat || bias->scalar_type() == a.scalar_type()) &&
                bias->dim() == 1 && bias->size(0) == N && bias->is_contiguous() &&
                reinterpret_cast<uintptr_t>(bias->data_ptr()) % (2 * bias->element_size()) == 0,
                msg("tk mlp: bias must be a contiguous float32 or ", a.scalar_type(), " (", N, ",) tensor on ",
                    a.device(), " aligned to two elements, got ", bias->scalar_type(), " ", bias->sizes(), " on ",
                    bias->device()));
    TORCH_CHECK(epi == tk_mlp::Epilogue::store || epi == tk_mlp::Epilogue::gelu,
                msg("tk mlp: only the store and gelu epilogues add a bias"));
    p.bias = bias->data_ptr();
    p.bias16 = bias->scalar_type() != at::kFloat;
  }
  if (epi == tk_mlp::Epilogue::gelu || epi == tk_mlp::Epilogue::dgelu) {
    TORCH_CHECK(aux.has_value() && aux->defined(), msg("tk mlp: the gelu epilogues need the gelu'(pre) tensor (aux)"));
    check_matrix(*aux, "aux", a);
    TORCH_CHECK(aux->sizes() == c.sizes() && aux->stride(0) == c.stride(0) && aux->scalar_type() == c.scalar_type(),
                msg("tk mlp: aux must have c's shape, row stride and dtype"));
    p.aux = aux->data_ptr();
  }
  if (colsum.has_value() && colsum->defined()) {
    TORCH_CHECK(epi == tk_mlp::Epilogue::dgelu, msg("tk mlp: only the dgelu epilogue writes column sums"));
    TORCH_CHECK(colsum->is_cuda() && colsum->device() == a.device() && colsum->scalar_type() == at::kFloat &&
                colsum->dim() == 2 && colsum->size(0) == (M + 63) / 64 && colsum->size(1) == N &&
                colsum->is_contiguous(),
                msg("tk mlp: colsum must be a contiguous float32 (", (M + 63) / 64, ", ", N, ") tensor on ", a.device()));
    p.colsum = colsum->data_ptr<float>();
  }
  if (a_colsum.has_value() && a_colsum->defined()) {
    TORCH_CHECK((epi == tk_mlp::Epilogue::store || epi == tk_mlp::Epilogue::dgelu) && !a_mn && b_mn,
                msg("tk mlp: only the store and dgelu epilogues with a K-major a and an MN-major b (dx = dy W) sum "
                    "a's columns"));
    TORCH_CHECK(a_colsum->is_cuda() && a_colsum->device() == a.device() && a_colsum->scalar_type() == at::kFloat &&
                a_colsum->dim() == 2 && a_colsum->size(0) == (M + 63) / 64 && a_colsum->size(1) == K &&
                a_colsum->is_contiguous() && reinterpret_cast<uintptr_t>(a_colsum->data_ptr()) % 8 == 0,
                msg("tk mlp: a_colsum must be a contiguous, 8-byte aligned float32 (", (M + 63) / 64, ", ", K,
                    ") tensor on ", a.device()));
    p.a_colsum = a_colsum->data_ptr<float>();
  }
  const c10::cuda::CUDAGuard guard(a.device());
  const char *why = nullptr;
  const cudaError_t err = tk_mlp::gemm(p, c10::cuda::getCurrentCUDAStream().stream(), &why);
  TORCH_CHECK(err == cudaSuccess, msg(why ? why : "tk mlp gemm failed", " (", cudaGetErrorString(err), ")"));
}

// The SM count of a device, asked once per device (the column sums' chunking reads it on every call).
int sm_count(int device) {
  static std::array<std::atomic<int>, 64> known{};
  if (device >= 0 && device < int(known.size()) && known[device].load() > 0) return known[device].load();
  int sms = 0;
  const cudaError_t q = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  TORCH_CHECK(q == cudaSuccess && sms > 0, msg("tk mlp column_sums: ", cudaGetErrorString(q)));
  if (device >= 0 && device < int(known.size())) known[device].store(sms);
  return sms;
}

// The column sums of x (rows, cols), summed in fp32 and returned as a (cols,) tensor of out_dtype (default fp32):
// the bias gradient of a layer whose output gradient is x, in the bias's dtype (colsum.cu). x: fp32, bf16 or
// fp16 with contiguous rows; cols a multiple of 8.
tk_mlp::ColumnSumParams::Type column_sum_type(at::ScalarType st) {
  return st == at::kFloat ? tk_mlp::ColumnSumParams::f32
         : st == at::kBFloat16 ? tk_mlp::ColumnSumParams::bf16 : tk_mlp::ColumnSumParams::fp16;
}
// the output type of a column-sum op (`op` names it in the error): fp32, bf16 or fp16
tk_mlp::ColumnSumParams::Type column_sum_out_type(at::ScalarType ot, const char *op) {
  TORCH_CHECK(ot == at::kFloat || ot == at::kBFloat16 || ot == at::kHalf,
              msg("tk mlp ", op, ": out_dtype must be float32, bfloat16 or float16, got ", ot));
  return column_sum_type(ot);
}
at::Tensor column_sums(const at::Tensor &x, c10::optional<at::ScalarType> out_dtype) {
  check_matrix(x, "x", x);
  const auto st = x.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf,
              msg("tk mlp column_sums: x must be float32, bfloat16 or float16, got ", st));
  const int64_t rows = x.size(0), cols = x.size(1);
  TORCH_CHECK(cols % 8 == 0, msg("tk mlp column_sums: the width must be a multiple of 8, got ", cols));
  TORCH_CHECK(cols <= INT32_MAX - 256, msg("tk mlp column_sums: widths up to ", INT32_MAX - 256, ", got ", cols));
  const c10::cuda::CUDAGuard guard(x.device());
  const int sms = sm_count(x.get_device());
  tk_mlp::ColumnSumParams p{};
  const at::ScalarType ot = out_dtype.value_or(at::kFloat);
  p.dtype = column_sum_type(st);
  p.out_dtype = column_sum_out_type(ot, "column_sums");
  p.x = x.data_ptr();
  p.ld = x.stride(0);
  p.rows = rows;
  p.cols = static_cast<int>(cols);
  p.chunks = tk_mlp::column_sum_chunks(rows, p.cols, sms, st == at::kFloat);
  at::Tensor partial = at::empty({p.chunks, cols}, x.options().dtype(at::kFloat));
  at::Tensor out = at::empty({cols}, x.options().dtype(ot));
  p.partial = partial.data_ptr<float>();
  p.out = out.data_ptr();
  const cudaError_t err = tk_mlp::column_sums(p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, msg("tk mlp column_sums failed (", cudaGetErrorString(err), ")"));
  return out;
}

// The column sums of two fp32 matrices of the same rows (at most 512: a GEMM's 64-row block sums, N <= 32768
// tokens) in one launch, each returned as a (cols,) tensor of out_dtype: the MLP backward's db_fc and db_proj.
std::tuple<at::Tensor, at::Tensor> column_sums_pair(const at::Tensor &a, const at::Tensor &b,
                                                    at::ScalarType out_dtype) {
  check_matrix(a, "a", a);
  check_matrix(b, "b", a);
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              msg("tk mlp column_sums_pair: a and b must be float32, got ", a.scalar_type(), " and ", b.scalar_type()));
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(0) <= 512,
              msg("tk mlp column_sums_pair: a and b need the same rows, at most 512, got ", a.size(0), " and ",
                  b.size(0)));
  TORCH_CHECK(a.size(1) % 8 == 0 && b.size(1) % 8 == 0 && a.size(1) > 0 && b.size(1) > 0 &&
                  a.size(1) <= INT32_MAX - 256 && b.size(1) <= INT32_MAX - 256,
              msg("tk mlp column_sums_pair: the widths must be positive multiples of 8, got ", a.size(1), " and ",
                  b.size(1)));
  tk_mlp::ColumnSumParams p{};
  p.dtype = tk_mlp::ColumnSumParams::f32;
  p.out_dtype = column_sum_out_type(out_dtype, "column_sums_pair");
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor out_a = at::empty({a.size(1)}, a.options().dtype(out_dtype));
  at::Tensor out_b = at::empty({b.size(1)}, a.options().dtype(out_dtype));
  p.x = a.data_ptr();
  p.ld = a.stride(0);
  p.rows = a.size(0);
  p.cols = static_cast<int>(a.size(1));
  p.chunks = 0;
  p.out = out_a.data_ptr();
  p.x2 = b.data_ptr<float>();
  p.ld2 = b.stride(0);
  p.cols2 = static_cast<int>(b.size(1));
  p.out2 = out_b.data_ptr();
  const cudaError_t err = tk_mlp::column_sums(p, c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, msg("tk mlp column_sums_pair failed (", cudaGetErrorString(err), ")"));
  return {out_a, out_b};
}

int64_t splits(int64_t M, int64_t N, int64_t K, int64_t sms) {
  return tk_mlp::gemm_splits(static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<int>(sms));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gemm_", &gemm_, "c <- epilogue(A B^T) on the Hopper GEMM (see csrc/mlp.h)", pybind11::arg("a"),
        pybind11::arg("a_mn"), pybind11::arg("b"), pybind11::arg("b_mn"), pybind11::arg("c"),
        pybind11::arg("epilogue"), pybind11::arg("bias") = pybind11::none(), pybind11::arg("aux") = pybind11::none(),
        pybind11::arg("tanh_gelu") = false, pybind11::arg("splits") = 0, pybind11::arg("colsum") = pybind11::none(),
        pybind11::arg("a_colsum") = pybind11::none());
  m.def("column_sums", &column_sums,
        "column sums of a (rows, cols) matrix, summed in fp32, returned in out_dtype (the bias gradients; csrc/colsum.cu)",
        pybind11::arg("x"), pybind11::arg("out_dtype") = pybind11::none());
  m.def("column_sums_pair", &column_sums_pair,
        "the column sums of two fp32 matrices of the same rows (<= 512) in one launch, in out_dtype (db_fc, db_proj)",
        pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("out_dtype"));
  m.def("splits", &splits, "K splits the weight-gradient GEMM takes for (M, N, K) on a GPU of `sms` SMs");
}
