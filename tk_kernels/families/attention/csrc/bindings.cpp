// Torch bindings of the attention family's launchers (attention.h): the extension tk_attention_<hash>.
// The only file that includes torch headers: it validates tensors, allocates outputs and
// workspaces, and calls the launchers on the current CUDA stream.
// Only light headers: ATen, the pybind11 tensor casters, and c10's CUDA stream/guard (which need
// nothing beyond the CUDA runtime headers, unlike ATen/cuda/CUDAContext.h which pulls in cuBLAS and
// cuSPARSE headers a minimal CUDA toolkit may not have).
// philox_glue.h (PyTorch's CUDA generator, for the dropout's seed and offset) needs no CUDA library
// headers either.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/python.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "check.h"
#include "philox_glue.h"
#include "attention.h"

namespace {

// (B, H, T, D) tensor usable by the kernels without a copy. The kernels load rows with 16-byte
// cp.async, so the base pointer must be 16-byte aligned and every stride a multiple of 8 elements;
// the family's Python ops make a contiguous copy of inputs that are not (so users never see these).
void check_bhtd(const at::Tensor& t, const char* name, const at::Tensor& q) {
  TK_CHECK(t.is_cuda(), "tk attention: ", name, " must be a CUDA tensor, got device ", t.device());
  TK_CHECK(t.device() == q.device(), "tk attention: ", name, " is on ", t.device(),
              " but q is on ", q.device(), "; all tensors must be on the same device");
  TK_CHECK(t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf,
              "tk attention: ", name, " must be bfloat16 or float16, got ", t.scalar_type());
  TK_CHECK(t.scalar_type() == q.scalar_type(), "tk attention: ", name, " has dtype ",
              t.scalar_type(), " but q has dtype ", q.scalar_type(), "; dtypes must match");
  TK_CHECK(t.dim() == 4, "tk attention: ", name, " must be 4-D (B, H, T, D), got shape ", t.sizes());
  TK_CHECK(t.sizes() == q.sizes(), "tk attention: ", name, " has shape ", t.sizes(),
              " but q has shape ", q.sizes(), "; q, k, v (and o, dout) must have the same (B, H, T, D)");
  TK_CHECK(t.size(3) == 64 || t.size(3) == 128, "tk attention: head dim D must be 64 or 128, got ", t.size(3));
  TK_CHECK(t.size(2) >= 1, "tk attention: sequence length T must be >= 1, got ", t.size(2));
  TK_CHECK(t.stride(3) == 1, "tk attention: ", name, " must have a contiguous last dim (stride 1), got strides ",
              t.strides());
  TK_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "tk attention: ", name,
              " data pointer must be 16-byte aligned");
  for (int d = 0; d < 3; ++d) {
    TK_CHECK(t.stride(d) % 8 == 0 || t.size(d) == 1, "tk attention: ", name,
                " strides must be multiples of 8 elements (16 bytes), got strides ", t.strides());
  }
}

// The Hopper kernels read t with TMA, whose tensor maps need a nonzero stride in every dim of size > 1 (a
// broadcast k / v, stride 0 along H, is not readable that way: ops.py makes such tensors contiguous first).
void check_tma_readable(const at::Tensor& t, const char* name) {
  for (int d = 0; d < 3; ++d)
    TK_CHECK(t.stride(d) != 0 || t.size(d) == 1, "tk attention (Hopper kernel): ", name,
             " is read with TMA, which needs nonzero strides; got strides ", t.strides(), " for shape ", t.sizes(),
             " (pass a contiguous copy, or call tk_kernels.attention, which makes one)");
}

// Stride of dim d, with 0 for size-1 dims (their stride is never used but may be anything).
tk_attn::Strides strides_of(const at::Tensor& t) {
  auto s = [&](int d) -> int64_t { return t.size(d) == 1 ? 0 : t.stride(d); };
  return {s(0), s(1), s(2)};
}

tk_attn::DType dtype_of(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? tk_attn::DType::bf16 : tk_attn::DType::fp16;
}

// (B, H, T, D) output stored as (B, T, H, D): the model's y.transpose(1, 2).view(B, T, C) is free.
at::Tensor empty_bthd(const at::Tensor& like) {
  return at::empty({like.size(0), like.size(2), like.size(1), like.size(3)}, like.options()).transpose(1, 2);
}

void check_lse(const at::Tensor& lse, const at::Tensor& q) {
  TK_CHECK(lse.is_cuda() && lse.device() == q.device(), "tk attention: lse must be on ", q.device());
  TK_CHECK(lse.scalar_type() == at::kFloat, "tk attention: lse must be float32, got ", lse.scalar_type());
  TK_CHECK(lse.dim() == 3 && lse.size(0) == q.size(0) && lse.size(1) == q.size(1) && lse.size(2) == q.size(2),
              "tk attention: lse must have shape (B, H, T) = ", q.sizes().slice(0, 3), ", got ", lse.sizes());
  TK_CHECK(lse.is_contiguous(), "tk attention: lse must be contiguous");
}

void check_dropout_p(double p) {
  TK_CHECK(p >= 0.0 && p < 1.0, "tk attention: dropout_p must be in [0, 1), got ", p);
}

// The seed and offset of PyTorch's default CUDA generator of q's device for one dropout call
// (glue/philox_glue.h: philox_cuda_state(4) under the generator's lock; pointers under CUDA-graph capture).
tk_attn::dropout_rng next_dropout_rng(const at::Tensor& q) { return tk_glue::next_philox_state(q.device()); }

void check_rng_state(const at::Tensor& rng_state, const at::Tensor& q) {
  tk_glue::check_rng_state(rng_state, q.device(), "tk attention");
}

// The given outputs of attention_backward_into (e.g. the three (B, H, T, D) views of one (B, T, 3, H, D)
// gradient buffer of a fused qkv projection). Besides check_bhtd's conditions (which also cover the Hopper
// backward's stores: 4-byte dK / dV stores and the dQ convert kernel's 16-byte stores, at any row stride), every
// element must have its own address (the kernels' threads write them in parallel), and no output may share
// memory with another output or with an input.

// (size, stride) of the dims of size > 1, largest stride first.
std::vector<std::pair<int64_t, int64_t>> spread_dims(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (int d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) dims.emplace_back(t.size(d), t.stride(d));
  std::sort(dims.begin(), dims.end(), [](auto a, auto b) { return a.second > b.second; });
  return dims;
}

// Whether delta (elements) is sum_i c_i * stride_i with |c_i| < size_i over dims[i..] (strides sorted
// largest first, each larger than the reach of the smaller ones: then at most three c_i fit per level).
bool reachable(int64_t delta, const std::vector<std::pair<int64_t, int64_t>>& dims, size_t i) {
  if (i == dims.size()) return delta == 0;
  const auto [n, s] = dims[i];
  const int64_t c0 = delta / s;
  for (int64_t c = c0 - 1; c <= c0 + 1; ++c)
    if (c > -n && c < n && reachable(delta - c * s, dims, i + 1)) return true;
  return false;
}

// [first, last] byte addresses of t's elements (non-negative strides).
std::pair<uintptr_t, uintptr_t> byte_range(const at::Tensor& t) {
  int64_t reach = 0;
  for (int d = 0; d < t.dim(); ++d) reach += (t.size(d) - 1) * t.stride(d);
  const uintptr_t first = reinterpret_cast<uintptr_t>(t.data_ptr());
  return {first, first + uintptr_t((reach + 1) * int64_t(t.element_size())) - 1};
}

// Whether a and b may share an element: false if their byte ranges are disjoint, or if they have the same
// layout (as the views of one fused buffer do) and their offset is not a difference of two indices.
bool may_overlap(const at::Tensor& a, const at::Tensor& b) {
  const auto ra = byte_range(a), rb = byte_range(b);
  if (ra.second < rb.first || rb.second < ra.first) return false;
  if (a.sizes() != b.sizes() || a.strides() != b.strides() || a.element_size() != b.element_size()) return true;
  const int64_t delta = int64_t(rb.first) - int64_t(ra.first);
  if (delta % int64_t(a.element_size()) != 0) return true;
  return reachable(delta / int64_t(a.element_size()), spread_dims(a), 0);
}

void check_output(const at::Tensor& t, const char* name, const at::Tensor& q) {
  check_bhtd(t, name, q);
  int64_t reach = 0;  // of the dims with smaller strides: each stride must exceed it
  const auto dims = spread_dims(t);
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    TK_CHECK(it->second > reach, "tk attention: ", name, " has overlapping elements (strides ", t.strides(),
             " for shape ", t.sizes(), "); every output element needs its own memory");
    reach += (it->first - 1) * it->second;
  }
}

void check_outputs(const at::Tensor (&out)[3], const at::Tensor (&in)[5]) {
  static const char* out_names[3] = {"dq", "dk", "dv"};
  static const char* in_names[5] = {"q", "k", "v", "o", "dout"};
  for (int i = 0; i < 3; ++i) check_output(out[i], out_names[i], in[0]);
  if (out[0].numel() == 0) return;
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j)
      TK_CHECK(!may_overlap(out[i], out[j]), "tk attention: the outputs ", out_names[i], " and ", out_names[j],
               " share memory; they must be distinct (e.g. the q, k, v views of one gradient buffer)");
    for (int j = 0; j < 5; ++j)
      TK_CHECK(!may_overlap(out[i], in[j]), "tk attention: the output ", out_names[i], " shares memory with the input ",
               in_names[j], "; the backward reads its inputs while it writes its outputs");
  }
}

// (o, lse, rng_state): rng_state is the (2,) int64 (seed, offset) the dropout used when dropout_p > 0
// (written by the kernel: correct under CUDA-graph replay too), an empty (0,) tensor when dropout_p == 0
// (no generator state is drawn then).
// hopper: run the sm_90a kernel (hopper_forward.cu; the same dropout mask) instead of the portable one. ops.py picks.
std::tuple<at::Tensor, at::Tensor, at::Tensor> forward_impl(const at::Tensor& q, const at::Tensor& k,
                                                            const at::Tensor& v, bool causal, double scale,
                                                            double dropout_p, bool hopper) {
  check_bhtd(q, "q", q);
  check_bhtd(k, "k", q);
  check_bhtd(v, "v", q);
  if (hopper) {
    check_tma_readable(q, "q");
    check_tma_readable(k, "k");
    check_tma_readable(v, "v");
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  TK_CHECK(B * H <= INT32_MAX && T <= INT32_MAX, "tk attention: too many rows");
  check_dropout_p(dropout_p);
  at::Tensor o = empty_bthd(q);
  at::Tensor lse = at::empty({B, H, T}, q.options().dtype(at::kFloat));
  const bool drop = dropout_p > 0.0;
  at::Tensor rng_state = at::empty({drop ? 2 : 0}, q.options().dtype(at::kLong));
  if (B * H == 0) return {o, lse, rng_state};
  // the Hopper walk's item counter, where it takes one (its CTAs take the next item when they are done)
  at::Tensor tile_counter = hopper && tk_attn::hopper_fwd_dynamic_walk(T, D, causal)
                                ? at::zeros({1}, q.options().dtype(at::kInt)) : at::Tensor();

  tk_attn::FwdParams p{};
  p.q = q.data_ptr(); p.k = k.data_ptr(); p.v = v.data_ptr();
  p.o = o.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.tile_counter = tile_counter.defined() ? tile_counter.data_ptr<int>() : nullptr;
  p.q_s = strides_of(q); p.k_s = strides_of(k); p.v_s = strides_of(v); p.o_s = strides_of(o);
  p.B = int(B); p.H = int(H); p.T = int(T); p.D = int(D);
  p.scale = float(scale);
  p.causal = causal;
  p.dtype = dtype_of(q);
  p.dropout_p = float(dropout_p);
  if (drop) {
    p.rng = next_dropout_rng(q);
    p.rng_state = rng_state.data_ptr<int64_t>();
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const char *why = nullptr;
  cudaError_t err = hopper ? tk_attn::attention_forward_hopper(p, stream, &why) : tk_attn::attention_forward(p, stream);
  TK_CHECK(err == cudaSuccess, "tk attention forward", hopper ? " (Hopper kernel)" : "", " failed: ",
           why ? why : cudaGetErrorString(err));
  return {o, lse, rng_state};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_forward(const at::Tensor& q, const at::Tensor& k,
                                                                 const at::Tensor& v, bool causal, double scale,
                                                                 double dropout_p) {
  return forward_impl(q, k, v, causal, scale, dropout_p, false);
}

// The sm_90a forward: the same outputs as attention_forward (with dropout: the same keep mask for the same
// generator state).
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_forward_hopper(const at::Tensor& q, const at::Tensor& k,
                                                                        const at::Tensor& v, bool causal,
                                                                        double scale, double dropout_p) {
  return forward_impl(q, k, v, causal, scale, dropout_p, true);
}

// (dq, dk, dv): fresh, or out[0..2] (attention_backward_into; checked here after the inputs). hopper: run the sm_90a
// kernel (hopper_backward.cu: dropout included, the forward's mask regenerated from rng_state; never deterministic),
// with its own padded workspaces (attention.h), instead of the portable one (csrc/backward*.cu). ops.py decides when
// it runs (and hands it q, k, v, dout that TMA can read).
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_impl(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o, const at::Tensor& lse,
    const at::Tensor& dout, bool causal, double scale, bool deterministic, double dropout_p,
    const at::Tensor& rng_state, bool hopper, const at::Tensor* out = nullptr, const at::Tensor* dbias = nullptr) {
  check_bhtd(q, "q", q);
  check_bhtd(k, "k", q);
  check_bhtd(v, "v", q);
  check_bhtd(o, "o", q);
  check_bhtd(dout, "dout", q);
  if (hopper) {
    check_tma_readable(q, "q");
    check_tma_readable(k, "k");
    check_tma_readable(v, "v");
    check_tma_readable(dout, "dout");
  }
  check_lse(lse, q);
  check_dropout_p(dropout_p);
  if (dropout_p > 0.0) check_rng_state(rng_state, q);
  if (out) check_outputs({out[0], out[1], out[2]}, {q, k, v, o, dout});
  if (dbias) {
    TK_CHECK(hopper && dropout_p == 0.0,
             "tk attention: the qkv bias gradient comes from the Hopper backward without dropout only");
    TK_CHECK(dbias->is_cuda() && dbias->device() == q.device() && dbias->scalar_type() == at::kFloat &&
                 dbias->dim() == 1 && dbias->is_contiguous() && dbias->size(0) == 3 * q.size(1) * q.size(3),
             "tk attention: dbias must be a contiguous float32 tensor of 3 * H * D = ", 3 * q.size(1) * q.size(3),
             " elements on q's device");
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  TK_CHECK(B * H <= INT32_MAX && T <= INT32_MAX, "tk attention: too many rows");
  at::Tensor dq = out ? out[0] : empty_bthd(q), dk = out ? out[1] : empty_bthd(k), dv = out ? out[2] : empty_bthd(v);
  if (B * H == 0) {
    if (dbias) dbias->zero_();
    return {dq, dk, dv};
  }
  const int64_t Tp = tk_attn::dq_accum_rows(T);
  const auto f32 = q.options().dtype(at::kFloat);
  at::Tensor delta = at::empty({B, H, hopper ? Tp : T}, f32);
  at::Tensor lse_log2 = hopper ? at::empty({B, H, Tp}, f32) : at::Tensor();
  // the Hopper backward's prep kernel zero-fills dq_accum itself (one launch and one pass fewer)
  at::Tensor dq_accum = deterministic ? at::Tensor()
                        : hopper      ? at::empty({B, H, Tp, D}, f32)
                                      : at::zeros({B, H, Tp, D}, f32);
  at::Tensor tile_counter = hopper ? at::empty({1}, q.options().dtype(at::kInt)) : at::Tensor();

  tk_attn::BwdParams p{};
  p.q = q.data_ptr(); p.k = k.data_ptr(); p.v = v.data_ptr(); p.o = o.data_ptr(); p.dout = dout.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.dq = dq.data_ptr(); p.dk = dk.data_ptr(); p.dv = dv.data_ptr();
  p.delta = delta.data_ptr<float>();
  p.lse_log2 = hopper ? lse_log2.data_ptr<float>() : nullptr;
  p.dq_accum = deterministic ? nullptr : dq_accum.data_ptr<float>();
  p.tile_counter = hopper ? tile_counter.data_ptr<int>() : nullptr;
  p.q_s = strides_of(q); p.k_s = strides_of(k); p.v_s = strides_of(v); p.o_s = strides_of(o);
  p.do_s = strides_of(dout); p.dq_s = strides_of(dq); p.dk_s = strides_of(dk); p.dv_s = strides_of(dv);
  p.B = int(B); p.H = int(H); p.T = int(T); p.D = int(D);
  p.scale = float(scale);
  p.causal = causal;
  p.deterministic = deterministic;
  p.dtype = dtype_of(q);
  p.dropout_p = float(dropout_p);
  p.rng_state = dropout_p > 0.0 ? rng_state.data_ptr<int64_t>() : nullptr;
  at::Tensor bias_partial;
  if (dbias) {
    bias_partial = at::empty({2 * tk_attn::qkv_bias_partial_rows(p) * H * D}, f32);
    p.dbias = dbias->data_ptr<float>();
    p.bias_partial = bias_partial.data_ptr<float>();
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  const char *why = nullptr;
  cudaError_t err = hopper ? tk_attn::attention_backward_hopper(p, stream, &why) : tk_attn::attention_backward(p, stream);
  TK_CHECK(err == cudaSuccess, "tk attention backward", hopper ? " (Hopper kernel)" : "", " failed: ",
           why ? why : cudaGetErrorString(err));
  return {dq, dk, dv};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o, const at::Tensor& lse,
    const at::Tensor& dout, bool causal, double scale, bool deterministic, double dropout_p,
    const at::Tensor& rng_state) {
  return backward_impl(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state, false);
}

// The sm_90a backward: attention_backward without the deterministic mode.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_hopper(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o, const at::Tensor& lse,
    const at::Tensor& dout, bool causal, double scale, double dropout_p, const at::Tensor& rng_state) {
  return backward_impl(q, k, v, o, lse, dout, causal, scale, false, dropout_p, rng_state, true);
}

// attention_backward (hopper: attention_backward_hopper, then deterministic must be false) writing dq, dk, dv into
// the given (B, H, T, D) tensors instead of fresh ones: ops.py's tk::attention_qkv_bwd passes the three views of
// one (B, T, 3, H, D) buffer, so the gradient of a fused qkv projection needs no concatenation.
void attention_backward_into(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o,
                             const at::Tensor& lse, const at::Tensor& dout, const at::Tensor& dq, const at::Tensor& dk,
                             const at::Tensor& dv, bool causal, double scale, bool deterministic, double dropout_p,
                             const at::Tensor& rng_state, bool hopper, const std::optional<at::Tensor>& dbias) {
  TK_CHECK(!(hopper && deterministic), "tk attention: the Hopper backward has no deterministic mode");
  const at::Tensor out[3] = {dq, dk, dv};
  backward_impl(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state, hopper, out,
                dbias ? &*dbias : nullptr);
}

// Debug: the (B, H, T, T) uint8 keep mask (1 = kept) of a dropout of probability dropout_p with the
// (seed, offset) in rng_state, computed by the kernels' own keep function.
at::Tensor attention_dropout_mask(const at::Tensor& rng_state, int64_t B, int64_t H, int64_t T, double dropout_p) {
  TK_CHECK(rng_state.is_cuda(), "tk attention: rng_state must be a CUDA tensor");
  check_rng_state(rng_state, rng_state);
  check_dropout_p(dropout_p);
  TK_CHECK(B >= 1 && H >= 1 && T >= 1 && B * H <= INT32_MAX && T <= INT32_MAX,
              "tk attention: dropout mask needs B, H, T >= 1, got ", B, ", ", H, ", ", T);
  const c10::cuda::CUDAGuard guard(rng_state.device());
  at::Tensor mask = at::empty({B, H, T, T}, rng_state.options().dtype(at::kByte));
  cudaError_t err = tk_attn::attention_dropout_mask(mask.data_ptr<uint8_t>(), rng_state.data_ptr<int64_t>(), int(B * H),
                                                    int(T), float(dropout_p), c10::cuda::getCurrentCUDAStream().stream());
  TK_CHECK(err == cudaSuccess, "tk attention dropout mask failed: ", cudaGetErrorString(err));
  return mask;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tk_kernels: ThunderKittens-style CUDA kernels (attention forward/backward)";
  m.def("attention_forward", &attention_forward,
        "(q, k, v, causal, scale, dropout_p) -> (o, lse, rng_state); q/k/v (B, H, T, D) bf16/fp16, o in (B, T, H, D) "
        "memory order, rng_state the (seed, offset) the dropout used ((2,) int64; (0,) when dropout_p == 0)",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("causal"), pybind11::arg("scale"),
        pybind11::arg("dropout_p"));
  m.def("attention_forward_hopper", &attention_forward_hopper,
        "(q, k, v, causal, scale, dropout_p) -> (o, lse, rng_state): attention_forward on the sm_90a wgmma/TMA "
        "kernel (the same dropout mask; only on an sm_90 GPU with a library built for sm_90a; ops.py checks)",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("causal"), pybind11::arg("scale"),
        pybind11::arg("dropout_p"));
  m.def("attention_backward", &attention_backward,
        "(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state) -> (dq, dk, dv)",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("o"), pybind11::arg("lse"),
        pybind11::arg("dout"), pybind11::arg("causal"), pybind11::arg("scale"), pybind11::arg("deterministic"),
        pybind11::arg("dropout_p"), pybind11::arg("rng_state"));
  m.def("attention_backward_hopper", &attention_backward_hopper,
        "(q, k, v, o, lse, dout, causal, scale, dropout_p, rng_state) -> (dq, dk, dv): attention_backward, not "
        "deterministic, on the sm_90a wgmma/TMA kernel (only on an sm_90 GPU with a library built for sm_90a; "
        "ops.py checks)",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("o"), pybind11::arg("lse"),
        pybind11::arg("dout"), pybind11::arg("causal"), pybind11::arg("scale"), pybind11::arg("dropout_p"),
        pybind11::arg("rng_state"));
  m.def("attention_backward_into", &attention_backward_into,
        "(q, k, v, o, lse, dout, dq, dk, dv, causal, scale, deterministic, dropout_p, rng_state, hopper, dbias=None) "
        "-> None: attention_backward (hopper: attention_backward_hopper, not deterministic) writing into the given "
        "(B, H, T, D) dq, dk, dv (checked like the inputs; no shared memory among them or with the inputs), e.g. the "
        "three views of one (B, T, 3, H, D) gradient buffer; with dbias (hopper, dropout_p = 0 only: a contiguous "
        "float32 (3 H D) tensor), also the gradient of the bias of that fused projection, [sum dq | 0 | sum dout] "
        "over batch and tokens, from the backward's row passes",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("o"), pybind11::arg("lse"),
        pybind11::arg("dout"), pybind11::arg("dq"), pybind11::arg("dk"), pybind11::arg("dv"), pybind11::arg("causal"),
        pybind11::arg("scale"), pybind11::arg("deterministic"), pybind11::arg("dropout_p"),
        pybind11::arg("rng_state"), pybind11::arg("hopper"), pybind11::arg("dbias") = pybind11::none());
  m.def("attention_dropout_mask", &attention_dropout_mask,
        "(rng_state, B, H, T, dropout_p) -> (B, H, T, T) uint8 keep mask (1 = kept) of the dropout with that (seed, "
        "offset)",
        pybind11::arg("rng_state"), pybind11::arg("B"), pybind11::arg("H"), pybind11::arg("T"),
        pybind11::arg("dropout_p"));
  m.def("min_smem_bytes",
        [] {
          return std::max(tk_attn::attention_forward_min_smem_bytes(), tk_attn::attention_backward_min_smem_bytes());
        },
        "opt-in shared memory per block (bytes) the kernels need at least (their smallest configurations)");
  m.def("backward_dkdv_smem_bytes", &tk_attn::attention_backward_dkdv_smem_bytes,
        "(D, deterministic) -> shared memory (bytes) of the dK/dV configuration the backward would run now "
        "on the current device (after TK_SMEM_LIMIT); which configuration runs, for tests",
        pybind11::arg("D"), pybind11::arg("deterministic"));
}
