// Torch bindings of the LayerNorm family's launchers (layernorm.h): the extension tk_layernorm_<hash>.
// The only file that includes torch headers: it validates tensors, allocates outputs and the
// backward's workspace, and calls the launchers on the current CUDA stream (forward / backward: the
// kernels of ops.py's custom ops, which pass contiguous, 16-byte aligned tensors, so these checks only
// fire on direct misuse of the extension). add_layer_norm is the eager-mode op with its autograd in C++
// (AddLayerNorm below), dropout_add_layer_norm the same with dropout on delta (DropoutAddLayerNorm); the
// dropout's seed and offset come from PyTorch's CUDA generator (glue/philox_glue.h).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/python.h>

#include <optional>
#include <tuple>

#include "check.h"
#include "layernorm.h"
#include "philox_glue.h"

namespace {

tk_ln::DType dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return tk_ln::DType::f32;
    case at::kBFloat16: return tk_ln::DType::bf16;
    case at::kHalf: return tk_ln::DType::f16;
    default: TK_CHECK(false, "tk layer_norm: dtype must be float32, bfloat16 or float16, got ", t);
  }
}

// A contiguous, 16-byte aligned CUDA tensor of `numel` elements on `like`'s device.
void check_tensor(const at::Tensor &t, const char *name, const at::Tensor &like, int64_t numel) {
  TK_CHECK(t.is_cuda(), "tk layer_norm: ", name, " must be a CUDA tensor, got one on ", t.device());
  TK_CHECK(t.device() == like.device(), "tk layer_norm: ", name, " must be on ", like.device(), ", got ",
              t.device());
  TK_CHECK(t.is_contiguous(), "tk layer_norm: ", name, " must be contiguous");
  TK_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "tk layer_norm: ", name,
              " data pointer must be 16-byte aligned");
  TK_CHECK(t.numel() == numel, "tk layer_norm: ", name, " has ", t.numel(), " elements, expected ", numel,
              " (shape ", t.sizes(), ")");
}

int check_cols(const at::Tensor &x) {
  TK_CHECK(x.dim() >= 1, "tk layer_norm: x must have at least 1 dimension");
  const int64_t C = x.size(-1);
  TK_CHECK(C % tk_ln::VEC == 0 && C >= tk_ln::MIN_COLS && C <= tk_ln::MAX_COLS,
              "tk layer_norm: the width (last dim) must be a multiple of 8 in [", tk_ln::MIN_COLS, ", ",
              tk_ln::MAX_COLS, "], got ", C);
  return int(C);
}

void check_params(const at::Tensor &w, const char *name, const at::Tensor &x, int C) {
  check_tensor(w, name, x, C);
  TK_CHECK(w.scalar_type() == at::kFloat, "tk layer_norm: ", name, " must be float32, got ", w.scalar_type());
}

void check_dropout_p(double p) {
  TK_CHECK(p > 0.0 && p < 1.0, "tk layer_norm: dropout_p must be in (0, 1) for the dropout ops (p = 0: the ops "
           "without dropout), got ", p);
}

using Fwd5 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// (y, s, mean, rstd, rng_state); s is empty without delta. delta_bias (fp32 (C,), needs delta): delta +
// delta_bias (rounded to delta's dtype) replaces delta, in the sum and under the dropout. dropout_p > 0 (delta
// required): s = x + dropout(delta) with the seed and offset drawn from the CUDA generator now, returned as rng_state ((2,)
// int64, written by the kernel: correct under CUDA-graph replay too); dropout_p == 0: rng_state is an
// undefined tensor and nothing is drawn.
Fwd5 forward_impl(const at::Tensor &x, const std::optional<at::Tensor> &delta, const at::Tensor &weight,
                  const std::optional<at::Tensor> &bias, double eps, at::ScalarType out_dtype, double dropout_p,
                  const std::optional<at::Tensor> &delta_bias) {
  const int C = check_cols(x);
  check_tensor(x, "x", x, x.numel());
  check_params(weight, "weight", x, C);
  if (bias) check_params(*bias, "bias", x, C);
  if (delta_bias) {
    TK_CHECK(delta.has_value(), "tk layer_norm: delta_bias needs delta");
    check_params(*delta_bias, "delta_bias", x, C);
  }
  const tk_ln::DType xt = dtype_of(x.scalar_type()), yt = dtype_of(out_dtype);
  tk_ln::DType dt = xt;
  if (delta) {
    check_tensor(*delta, "delta", x, x.numel());
    TK_CHECK(delta->sizes() == x.sizes(), "tk layer_norm: delta has shape ", delta->sizes(), ", x has ",
                x.sizes());
    dt = dtype_of(delta->scalar_type());
  }
  TK_CHECK(tk_ln::supported_dtypes(xt, dt, yt), "tk layer_norm: unsupported dtypes x=", x.scalar_type(),
              " delta=", delta ? delta->scalar_type() : x.scalar_type(), " out=", out_dtype);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t rows = x.numel() / C;
  at::Tensor y = at::empty(x.sizes(), x.options().dtype(out_dtype));
  at::Tensor s = delta ? at::empty(x.sizes(), x.options()) : at::empty({0}, x.options());
  auto stat_shape = x.sizes().slice(0, x.dim() - 1);
  at::Tensor mean = at::empty(stat_shape, x.options().dtype(at::kFloat));
  at::Tensor rstd = at::empty(stat_shape, x.options().dtype(at::kFloat));

  tk_ln::FwdParams p{};
  p.x = x.data_ptr();
  p.delta = delta ? delta->data_ptr() : nullptr;
  p.delta_bias = delta_bias ? delta_bias->data_ptr<float>() : nullptr;
  p.weight = weight.data_ptr<float>();
  p.bias = bias ? bias->data_ptr<float>() : nullptr;
  p.s = delta ? s.data_ptr() : nullptr;
  p.y = y.data_ptr();
  p.mean = mean.data_ptr<float>();
  p.rstd = rstd.data_ptr<float>();
  p.rows = rows;
  p.cols = C;
  p.eps = float(eps);
  p.x_t = xt; p.delta_t = dt; p.y_t = yt;
  const bool drop = dropout_p > 0.0;
  at::Tensor rng_state;  // undefined without dropout (forward_op drops it): the same allocations as before
  tk_ln::FwdDropout fd{};
  if (drop) {
    TK_CHECK(delta.has_value(), "tk layer_norm: dropout needs delta");
    rng_state = at::empty({2}, x.options().dtype(at::kLong));
    fd.p = float(dropout_p);
    fd.rng = tk_glue::next_philox_state(x.device());
    fd.rng_state = rng_state.data_ptr<int64_t>();
  }
  const cudaError_t err =
      tk_ln::layer_norm_forward(p, c10::cuda::getCurrentCUDAStream().stream(), drop ? &fd : nullptr);
  TK_CHECK(err == cudaSuccess, "tk layer_norm forward failed: ", cudaGetErrorString(err));
  return {y, s, mean, rstd, rng_state};
}

// (y, s, mean, rstd): s is empty without delta; s = x + delta (+ delta_bias)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> forward_op(const at::Tensor &x,
                                                                      const std::optional<at::Tensor> &delta,
                                                                      const at::Tensor &weight,
                                                                      const std::optional<at::Tensor> &bias,
                                                                      double eps, at::ScalarType out_dtype,
                                                                      const std::optional<at::Tensor> &delta_bias) {
  auto [y, s, mean, rstd, rng_state] = forward_impl(x, delta, weight, bias, eps, out_dtype, 0.0, delta_bias);
  return {y, s, mean, rstd};
}

// (y, s, mean, rstd, rng_state) with s = x + dropout(delta (+ delta_bias)), dropout_p in (0, 1)
Fwd5 forward_dropout_op(const at::Tensor &x, const at::Tensor &delta, const at::Tensor &weight,
                        const std::optional<at::Tensor> &bias, double eps, at::ScalarType out_dtype, double dropout_p,
                        const std::optional<at::Tensor> &delta_bias) {
  check_dropout_p(dropout_p);
  return forward_impl(x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias);
}

using Bwd5 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

// (dx, ddelta, dweight, dbias, ddelta_bias); dbias empty without bias, ddelta_bias (fp32, the column sums of
// ddelta as stored) empty unless has_delta_bias. Without dropout (dropout_p == 0) ddelta is empty unless
// delta_dtype differs from s's dtype; with it (rng_state: the forward's) ddelta = keep * dx / (1 - p) in
// delta_dtype (s's dtype when not given), always.
Bwd5 backward_impl(const at::Tensor &dy, const std::optional<at::Tensor> &ds, const at::Tensor &s,
                   const at::Tensor &mean, const at::Tensor &rstd, const at::Tensor &weight, bool has_bias,
                   std::optional<at::ScalarType> delta_dtype, double dropout_p, const at::Tensor *rng_state,
                   bool has_delta_bias) {
  const int C = check_cols(s);
  check_tensor(s, "s", s, s.numel());
  check_tensor(dy, "dy", s, s.numel());
  if (ds) check_tensor(*ds, "ds", s, s.numel());
  const int64_t rows = s.numel() / C;
  check_tensor(mean, "mean", s, rows);
  check_tensor(rstd, "rstd", s, rows);
  TK_CHECK(mean.scalar_type() == at::kFloat && rstd.scalar_type() == at::kFloat,
              "tk layer_norm: mean and rstd must be float32");
  check_params(weight, "weight", s, C);
  const tk_ln::DType xt = dtype_of(s.scalar_type()), yt = dtype_of(dy.scalar_type());
  const tk_ln::DType dt = delta_dtype ? dtype_of(*delta_dtype) : xt;
  TK_CHECK(!ds || ds->scalar_type() == s.scalar_type(), "tk layer_norm: ds has dtype ", ds->scalar_type(),
              ", expected ", s.scalar_type());
  TK_CHECK(tk_ln::supported_dtypes(xt, dt, yt), "tk layer_norm: unsupported dtypes s=", s.scalar_type(),
              " dy=", dy.scalar_type());
  const bool drop = dropout_p > 0.0;
  if (drop) tk_glue::check_rng_state(*rng_state, s.device(), "tk layer_norm");
  const c10::cuda::CUDAGuard guard(s.device());
  at::Tensor dx = at::empty(s.sizes(), s.options());
  const bool write_ddelta = drop || dt != xt;
  at::Tensor ddelta = write_ddelta ? at::empty(s.sizes(), s.options().dtype(delta_dtype.value_or(s.scalar_type())))
                                   : at::empty({0}, s.options());
  at::Tensor dweight = at::empty({C}, weight.options());
  at::Tensor dbias = has_bias ? at::empty({C}, weight.options()) : at::empty({0}, weight.options());
  at::Tensor ddelta_bias = at::empty({has_delta_bias ? C : 0}, weight.options());

  tk_ln::BwdParams p{};
  p.dy = dy.data_ptr();
  p.ds = ds ? ds->data_ptr() : nullptr;
  p.s = s.data_ptr();
  p.mean = mean.data_ptr<float>();
  p.rstd = rstd.data_ptr<float>();
  p.weight = weight.data_ptr<float>();
  p.dx = dx.data_ptr();
  p.ddelta = write_ddelta ? ddelta.data_ptr() : nullptr;
  p.dweight = dweight.data_ptr<float>();
  p.dbias = has_bias ? dbias.data_ptr<float>() : nullptr;
  p.ddelta_bias = has_delta_bias ? ddelta_bias.data_ptr<float>() : nullptr;
  p.rows = rows;
  p.cols = C;
  p.x_t = xt; p.dy_t = yt; p.delta_t = dt;
  tk_ln::BwdDropout bd{};
  if (drop) bd = {float(dropout_p), rng_state->data_ptr<int64_t>()};
  const tk_ln::BwdDropout *bdp = drop ? &bd : nullptr;
  const int64_t ws = tk_ln::backward_workspace_floats(p, bdp);
  TK_CHECK(ws >= 0, "tk layer_norm backward: cannot size the workspace: ", cudaGetErrorString(cudaGetLastError()));
  at::Tensor partial = at::empty({std::max<int64_t>(ws, 1)}, weight.options());
  p.partial = partial.data_ptr<float>();
  const cudaError_t err = tk_ln::layer_norm_backward(p, c10::cuda::getCurrentCUDAStream().stream(), bdp);
  TK_CHECK(err == cudaSuccess, "tk layer_norm backward failed: ", cudaGetErrorString(err));
  return {dx, ddelta, dweight, dbias, ddelta_bias};
}

// (dx, ddelta, dweight, dbias, ddelta_bias); ddelta is empty unless delta_dtype differs from s's dtype, dbias
// empty without bias, ddelta_bias empty unless has_delta_bias
Bwd5 backward_op(const at::Tensor &dy, const std::optional<at::Tensor> &ds, const at::Tensor &s, const at::Tensor &mean,
                 const at::Tensor &rstd, const at::Tensor &weight, bool has_bias,
                 std::optional<at::ScalarType> delta_dtype, bool has_delta_bias) {
  return backward_impl(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype, 0.0, nullptr, has_delta_bias);
}

// The backward of forward_dropout_op: (dx, ddelta, dweight, dbias, ddelta_bias) with ddelta = keep * dx / (1 - p)
// in delta_dtype, the keep mask regenerated from the forward's rng_state
Bwd5 backward_dropout_op(const at::Tensor &dy, const std::optional<at::Tensor> &ds, const at::Tensor &s,
                         const at::Tensor &mean, const at::Tensor &rstd, const at::Tensor &weight, bool has_bias,
                         at::ScalarType delta_dtype, double dropout_p, const at::Tensor &rng_state,
                         bool has_delta_bias) {
  check_dropout_p(dropout_p);
  return backward_impl(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype, dropout_p, &rng_state, has_delta_bias);
}

// delta_bias's gradient where only the residual gradient flows (y unused): ddelta's column sums in fp32
at::Tensor column_sums(const at::Tensor &ddelta) {
  return ddelta.reshape({-1, ddelta.size(-1)}).sum(0, false, at::kFloat);
}

// Debug (and the backward whose y is unused): the (rows, cols) uint8 keep mask (1 = kept) of a dropout of
// probability dropout_p with the (seed, offset) in rng_state, computed by the kernels' own keep function.
at::Tensor dropout_mask_op(const at::Tensor &rng_state, int64_t rows, int64_t cols, double dropout_p) {
  tk_glue::check_rng_state(rng_state, rng_state.device(), "tk layer_norm");
  check_dropout_p(dropout_p);
  TK_CHECK(rows >= 0 && cols >= tk_ln::VEC && cols % tk_ln::VEC == 0 && cols <= tk_ln::MAX_COLS,
           "tk layer_norm dropout mask: needs rows >= 0 and cols a multiple of 8 in [8, ", tk_ln::MAX_COLS, "], got ",
           rows, ", ", cols);
  const c10::cuda::CUDAGuard guard(rng_state.device());
  at::Tensor mask = at::empty({rows, cols}, rng_state.options().dtype(at::kByte));
  const cudaError_t err = tk_ln::dropout_mask(mask.data_ptr<uint8_t>(), rng_state.data_ptr<int64_t>(), rows, int(cols),
                                              float(dropout_p), c10::cuda::getCurrentCUDAStream().stream());
  TK_CHECK(err == cudaSuccess, "tk layer_norm dropout mask failed: ", cudaGetErrorString(err));
  return mask;
}

// -----------------------------------------------------------------------------
// eager mode: autograd in C++

// t itself if it is contiguous with a 16-byte aligned base (the kernels' 16-byte vectors), else a
// contiguous copy: ops.py's _kernel_ready
at::Tensor ready(const at::Tensor &t) {
  const bool ok = t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
  return ok ? t : t.clone(at::MemoryFormat::Contiguous);
}
std::optional<at::Tensor> ready(const std::optional<at::Tensor> &t) {
  return t ? std::optional<at::Tensor>(ready(*t)) : std::nullopt;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// tk::add_layer_norm_fwd with the autograd ops.py registers for it (_setup_context, _backward), for
// eager mode: the same kernels, saved tensors (s, or x without delta; mean, rstd, weight) and
// gradients, with no Python in the forward or the backward. Its outputs are (y, s), or (y) without
// delta (mean and rstd are only saved: fewer outputs for autograd to wrap). Unused outputs get no
// zero-filled gradients: with y unused only the residual gradient flows (no kernel), with s unused the
// backward kernel runs without ds. torch.compile traces the custom ops instead.
struct AddLayerNorm : torch::autograd::Function<AddLayerNorm> {
  static variable_list forward(AutogradContext *ctx, const at::Tensor &x, const std::optional<at::Tensor> &delta,
                               const at::Tensor &weight, const std::optional<at::Tensor> &bias, double eps,
                               at::ScalarType out_dtype, const std::optional<at::Tensor> &delta_bias) {
    ctx->set_materialize_grads(false);
    auto [y, s, mean, rstd] =
        forward_op(ready(x), ready(delta), ready(weight), ready(bias), eps, out_dtype, ready(delta_bias));
    ctx->save_for_backward({delta ? s : x, mean, rstd, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["has_delta_bias"] = delta_bias.has_value();
    ctx->saved_data["delta_dtype"] = delta ? c10::IValue(delta->scalar_type()) : c10::IValue();
    if (delta) return {y, s};
    return {y};
  }

  // gradients of (x, delta, weight, bias, eps, out_dtype, delta_bias) from those of (y, s) or (y)
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    const c10::IValue &delta_dtype = ctx->saved_data["delta_dtype"];
    const bool has_delta = !delta_dtype.isNone(), has_bias = ctx->saved_data["has_bias"].toBool();
    const bool has_delta_bias = ctx->saved_data["has_delta_bias"].toBool();
    const at::Tensor &dy = grads[0], ds = has_delta ? grads[1] : at::Tensor();
    if (!dy.defined()) {  // y unused: only the residual gradient flows
      const at::Tensor ddelta = ds.defined() ? ds.to(delta_dtype.toScalarType()) : at::Tensor();
      const at::Tensor ddb = has_delta_bias && ds.defined() ? column_sums(ddelta) : at::Tensor();
      return {ds, ddelta, {}, {}, {}, {}, ddb};
    }
    const variable_list saved = ctx->get_saved_variables();  // s (or x), mean, rstd, weight
    const at::Tensor &s = saved[0];
    // delta's dtype where it differs from s's: the backward then writes ddelta as a second tensor
    std::optional<at::ScalarType> split;
    if (has_delta && delta_dtype.toScalarType() != s.scalar_type()) split = delta_dtype.toScalarType();
    const std::optional<at::Tensor> ds_in = ds.defined() ? std::optional<at::Tensor>(ready(ds)) : std::nullopt;
    auto [dx, ddelta, dw, db, ddb] = backward_op(ready(dy), ds_in, ready(s), saved[1].contiguous(),
                                                 saved[2].contiguous(), ready(saved[3]), has_bias, split,
                                                 has_delta_bias);
    if (!has_delta) ddelta = at::Tensor();
    else if (!split) ddelta = dx;  // the same gradient for x and delta (like torch's add)
    return {dx, ddelta, dw, has_bias ? db : at::Tensor(), {}, {}, has_delta_bias ? ddb : at::Tensor()};
  }
};

// tk::dropout_add_layer_norm_fwd with the autograd ops.py registers for it (_dropout_setup_context,
// _dropout_backward), for eager mode, like AddLayerNorm: saved (s, mean, rstd, weight, rng_state), outputs
// (y, s). delta is always given and its gradient always its own tensor: keep * ds_total / (1 - p) in delta's
// dtype. With y unused only the residual gradient flows: dx = ds and ddelta = keep * ds / (1 - p), from the
// mask kernel (no LayerNorm backward); with s unused the backward kernel runs without ds.
struct DropoutAddLayerNorm : torch::autograd::Function<DropoutAddLayerNorm> {
  static variable_list forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &delta,
                               const at::Tensor &weight, const std::optional<at::Tensor> &bias, double eps,
                               at::ScalarType out_dtype, double dropout_p, const std::optional<at::Tensor> &delta_bias) {
    ctx->set_materialize_grads(false);
    auto [y, s, mean, rstd, rng_state] = forward_dropout_op(ready(x), ready(delta), ready(weight), ready(bias), eps,
                                                            out_dtype, dropout_p, ready(delta_bias));
    ctx->save_for_backward({s, mean, rstd, weight, rng_state});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["has_delta_bias"] = delta_bias.has_value();
    ctx->saved_data["delta_dtype"] = delta.scalar_type();
    ctx->saved_data["dropout_p"] = dropout_p;
    return {y, s};
  }

  // gradients of (x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias) from those of (y, s)
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    const at::ScalarType delta_dtype = ctx->saved_data["delta_dtype"].toScalarType();
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool has_delta_bias = ctx->saved_data["has_delta_bias"].toBool();
    const double p = ctx->saved_data["dropout_p"].toDouble();
    const at::Tensor &dy = grads[0], &ds = grads[1];
    const variable_list saved = ctx->get_saved_variables();  // s, mean, rstd, weight, rng_state
    const at::Tensor &s = saved[0], &rng_state = saved[4];
    if (!dy.defined()) {  // y unused: only the residual gradient flows, through the mask to delta
      if (!ds.defined()) return {{}, {}, {}, {}, {}, {}, {}, {}};
      const at::Tensor keep = dropout_mask_op(rng_state, s.numel() / s.size(-1), s.size(-1), p).view(s.sizes());
      const at::Tensor ddelta = (ds.to(at::kFloat) * keep.to(at::kFloat) * tk_ln::dropout_keep_scale(float(p)))
                                    .to(delta_dtype);
      return {ds, ddelta, {}, {}, {}, {}, {}, has_delta_bias ? column_sums(ddelta) : at::Tensor()};
    }
    const std::optional<at::Tensor> ds_in = ds.defined() ? std::optional<at::Tensor>(ready(ds)) : std::nullopt;
    auto [dx, ddelta, dw, db, ddb] = backward_dropout_op(ready(dy), ds_in, ready(s), saved[1].contiguous(),
                                                         saved[2].contiguous(), ready(saved[3]), has_bias, delta_dtype,
                                                         p, rng_state, has_delta_bias);
    return {dx, ddelta, dw, has_bias ? db : at::Tensor(), {}, {}, {}, has_delta_bias ? ddb : at::Tensor()};
  }
};

// fp32 parameters: t, or its cast recorded by autograd (ops.py's _f32), so gradients come back in t's dtype
at::Tensor f32(const at::Tensor &t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }
std::optional<at::Tensor> f32(const std::optional<at::Tensor> &t) {
  return t ? std::optional<at::Tensor>(f32(*t)) : std::nullopt;
}

// ops.py's add_layer_norm_op in eager mode: (s, y) with s = x + delta (+ delta_bias) (x itself without delta)
// and y = LayerNorm(s) in out_dtype; weight, bias and delta_bias are cast to fp32 first (f32).
std::tuple<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor &x, const std::optional<at::Tensor> &delta,
                                                  const at::Tensor &weight, const std::optional<at::Tensor> &bias,
                                                  double eps, at::ScalarType out_dtype,
                                                  const std::optional<at::Tensor> &delta_bias) {
  const variable_list out = AddLayerNorm::apply(x, delta, f32(weight), f32(bias), eps, out_dtype, f32(delta_bias));
  return {delta ? out[1] : x, out[0]};  // (s, y)
}

// ops.py's add_layer_norm_op with dropout_p > 0 in eager mode: (s, y) with s = x + dropout(delta (+ delta_bias))
// and y = LayerNorm(s) in out_dtype (parameters cast to fp32 as in add_layer_norm).
std::tuple<at::Tensor, at::Tensor> dropout_add_layer_norm(const at::Tensor &x, const at::Tensor &delta,
                                                          const at::Tensor &weight,
                                                          const std::optional<at::Tensor> &bias, double eps,
                                                          at::ScalarType out_dtype, double dropout_p,
                                                          const std::optional<at::Tensor> &delta_bias) {
  const variable_list out =
      DropoutAddLayerNorm::apply(x, delta, f32(weight), f32(bias), eps, out_dtype, dropout_p, f32(delta_bias));
  return {out[1], out[0]};  // (s, y)
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tk_kernels: residual add + LayerNorm forward/backward";
  m.def("forward", &forward_op,
        "(x, delta | None, weight, bias | None, eps, out_dtype, delta_bias | None) -> (y, s, mean, rstd): s = x + "
        "delta (+ delta_bias, rounded to delta's dtype first) in x's dtype (empty without delta), y = LayerNorm(s) * "
        "weight + bias in out_dtype, mean/rstd fp32 per row",
        pybind11::arg("x"), pybind11::arg("delta"), pybind11::arg("weight"), pybind11::arg("bias"),
        pybind11::arg("eps"), pybind11::arg("out_dtype"), pybind11::arg("delta_bias") = pybind11::none());
  m.def("backward", &backward_op,
        "(dy, ds | None, s, mean, rstd, weight, has_bias, delta_dtype | None, has_delta_bias) -> (dx, ddelta, "
        "dweight, dbias, ddelta_bias)",
        pybind11::arg("dy"), pybind11::arg("ds"), pybind11::arg("s"), pybind11::arg("mean"), pybind11::arg("rstd"),
        pybind11::arg("weight"), pybind11::arg("has_bias"), pybind11::arg("delta_dtype"),
        pybind11::arg("has_delta_bias") = false);
  m.def("forward_dropout", &forward_dropout_op,
        "(x, delta, weight, bias | None, eps, out_dtype, dropout_p, delta_bias | None) -> (y, s, mean, rstd, "
        "rng_state): s = x + dropout(delta (+ delta_bias)) in x's dtype (dropout_p in (0, 1), the mask from the "
        "CUDA generator), rng_state the (seed, offset) it used ((2,) int64)",
        pybind11::arg("x"), pybind11::arg("delta"), pybind11::arg("weight"), pybind11::arg("bias"),
        pybind11::arg("eps"), pybind11::arg("out_dtype"), pybind11::arg("dropout_p"),
        pybind11::arg("delta_bias") = pybind11::none());
  m.def("backward_dropout", &backward_dropout_op,
        "(dy, ds | None, s, mean, rstd, weight, has_bias, delta_dtype, dropout_p, rng_state, has_delta_bias) -> "
        "(dx, ddelta, dweight, dbias, ddelta_bias): ddelta = keep * dx / (1 - p) in delta_dtype, the mask "
        "regenerated from rng_state",
        pybind11::arg("dy"), pybind11::arg("ds"), pybind11::arg("s"), pybind11::arg("mean"), pybind11::arg("rstd"),
        pybind11::arg("weight"), pybind11::arg("has_bias"), pybind11::arg("delta_dtype"), pybind11::arg("dropout_p"),
        pybind11::arg("rng_state"), pybind11::arg("has_delta_bias") = false);
  m.def("dropout_mask", &dropout_mask_op,
        "(rng_state, rows, cols, dropout_p) -> (rows, cols) uint8 keep mask (1 = kept) of the dropout with that "
        "(seed, offset)",
        pybind11::arg("rng_state"), pybind11::arg("rows"), pybind11::arg("cols"), pybind11::arg("dropout_p"));
  m.def("dropout_add_layer_norm", &dropout_add_layer_norm,
        "(x, delta, weight, bias | None, eps, out_dtype, dropout_p, delta_bias | None) -> (s, y), the eager op "
        "with autograd in C++: s = x + dropout(delta (+ delta_bias)), y = LayerNorm(s) * weight + bias in out_dtype",
        pybind11::arg("x"), pybind11::arg("delta"), pybind11::arg("weight"), pybind11::arg("bias"),
        pybind11::arg("eps"), pybind11::arg("out_dtype"), pybind11::arg("dropout_p"),
        pybind11::arg("delta_bias") = pybind11::none());
  m.def("add_layer_norm", &add_layer_norm,
        "(x, delta | None, weight, bias | None, eps, out_dtype, delta_bias | None) -> (s, y), the eager op with "
        "autograd in C++: s = x + delta (+ delta_bias) (x without delta), y = LayerNorm(s) * weight + bias in "
        "out_dtype",
        pybind11::arg("x"), pybind11::arg("delta"), pybind11::arg("weight"), pybind11::arg("bias"),
        pybind11::arg("eps"), pybind11::arg("out_dtype"), pybind11::arg("delta_bias") = pybind11::none());
}
