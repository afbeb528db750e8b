"""CPU tests of the LayerNorm family (no GPU needed): support checks and their messages, the fake
(meta) implementations of the custom ops, the autograd glue, and the dispatch: plan-time reasons,
the per-call fallback, and model.py's fused residual + LayerNorm path run with a stand-in kernel."""

import types
import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tk_kernels
from model import GPT, GPTConfig
from tk_kernels import TKUnsupportedError, dispatch, reference
from tk_kernels.families.layernorm import ops as ln

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16

pytestmark = pytest.mark.usefixtures("fresh_dispatch")


def test_package_exports():
    assert tk_kernels.layer_norm is ln.layer_norm and tk_kernels.add_layer_norm is ln.add_layer_norm
    assert dispatch.FAMILIES["layer_norm"].tk is ln.add_layer_norm_op
    assert dispatch.FAMILIES["layer_norm"].reference is reference.add_layer_norm
    assert hasattr(torch.ops.tk, "add_layer_norm_fwd") and hasattr(torch.ops.tk, "add_layer_norm_bwd")


@pytest.mark.parametrize("x,d,y", [(F32, None, F32), (F32, F32, F32), (F32, None, BF16), (F32, F32, BF16),
                                   (F32, BF16, BF16), (BF16, BF16, BF16), (BF16, None, BF16),
                                   (F32, F16, F16), (F16, F16, F16), (F32, F32, F16)])
def test_supported_dtypes(x, d, y):
    assert ln.dtypes_reason(x, d, y) is None


@pytest.mark.parametrize("x,d,y", [(BF16, F32, BF16), (BF16, F16, BF16), (F32, BF16, F32), (BF16, None, F32),
                                   (F16, BF16, BF16), (F16, None, BF16)])
def test_unsupported_dtypes_say_what_is(x, d, y):
    msg = ln.dtypes_reason(x, d, y)
    assert msg is not None and "no kernel for" in msg and "supported: all float32" in msg


def test_float64_is_refused():
    assert "supports float32, bfloat16 and float16" in ln.dtypes_reason(torch.float64, None, torch.float64)


@pytest.mark.parametrize("width", [64, 96, 200, 768, 1024, 1280, 1600, 2048, 8192])
def test_supported_widths(width):
    assert ln.width_reason(width) is None


@pytest.mark.parametrize("width", [8, 32, 56, 60, 100, 770, 8200, 16384])
def test_unsupported_widths(width):
    msg = ln.width_reason(width)
    assert msg is not None and "multiple of 8 in [64, 8192]" in msg and str(width) in msg


def test_tensor_reasons():
    with FakeTensorMode():
        x = torch.empty(3, 5, 768, device="cuda")
        d = torch.empty(3, 5, 768, dtype=BF16, device="cuda")
        w = torch.empty(768, device="cuda")
        assert ln.tensor_reason(x, d, w, w, BF16) is None
        assert ln.tensor_reason(x, None, w, None, BF16) is None
        assert "delta has shape" in ln.tensor_reason(x, d[:, :4], w, None, BF16)
        assert "weight must have shape (768,)" in ln.tensor_reason(x, d, w[:700], None, BF16)
        assert "bias must have shape (768,)" in ln.tensor_reason(x, d, w, w[:8], BF16)
        assert "multiple of 8" in ln.tensor_reason(x[..., :100], None, w[:100], None, BF16)
        assert "no kernel for" in ln.tensor_reason(x.to(BF16), x, w, None, BF16)
    cpu = torch.empty(2, 64)
    assert "one CUDA device" in ln.tensor_reason(cpu, None, torch.empty(64), None, F32)
    assert "must be a torch.Tensor" in ln.tensor_reason(cpu, None, [1.0] * 64, None, F32)


def test_tensor_reason_fast_check_agrees_with_every_check(monkeypatch):
    """tensor_reason's cheap all-fine test (_fits) gives the same answers as the full list of checks, on
    inputs that pass and on inputs that fail each check (fake CUDA tensors, and CPU ones)."""
    with FakeTensorMode():
        x = torch.empty(3, 5, 768, device="cuda")
        d = torch.empty(3, 5, 768, dtype=BF16, device="cuda")
        w = torch.nn.Parameter(torch.empty(768, device="cuda"))
        cases = [(x, d, w, w, BF16), (x, None, w, None, BF16), (x, None, w, None, F32), (x.to(BF16), d, w, w, BF16),
                 (x, d[:, :4], w, None, BF16), (x, d, w[:700], None, BF16), (x, d, w, w[:8], BF16),
                 (x[..., :100], None, w[:100], None, BF16), (x.to(BF16), x, w, None, BF16),
                 (x, d, w.double(), None, BF16), (x, d, w, w.double(), BF16), (x, d, w.view(1, 768), None, BF16),
                 (x, d, w, w.view(1, 768), BF16), (x, d.cpu(), w, None, BF16), (x, d, w.cpu(), None, BF16),
                 (x, d, w, w.cpu(), BF16), (x.cpu(), None, w.cpu(), None, F32), (x, d, [1.0] * 768, None, BF16),
                 (x, d, w, 0.0, BF16), (x, "d", w, None, BF16), (x[0, 0, 0], None, w, None, BF16),
                 (torch.empty(4, 8192 + 8, device="cuda"), None, torch.empty(8200, device="cuda"), None, F32)]
        fast = [ln.tensor_reason(*c) for c in cases]
        monkeypatch.setattr(ln, "_fits", lambda *a: False)
        full = [ln.tensor_reason(*c) for c in cases]
    assert fast == full
    assert fast[:4] == [None] * 4 and all(r is not None for r in fast[4:])


def test_unsupported_reason_without_gpu():
    assert ln.unsupported_reason(torch.device("cpu"), F32, {"n_embd": 768}).startswith("no CUDA GPU")


def test_checked_api_raises_value_error_on_cpu():
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match="one CUDA device"):
        tk_kernels.layer_norm(x, torch.ones(64))
    with pytest.raises(ValueError, match="one CUDA device"):
        tk_kernels.add_layer_norm(x, x, torch.ones(64))


@pytest.mark.parametrize("shape", [(1, 64), (7, 200), (2, 3, 768)])
@pytest.mark.parametrize("x_dtype,d_dtype,out_dtype", [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, None, F16)])
def test_fake_forward_shapes(shape, x_dtype, d_dtype, out_dtype):
    with FakeTensorMode():
        x = torch.empty(shape, dtype=x_dtype, device="cuda")
        d = None if d_dtype is None else torch.empty(shape, dtype=d_dtype, device="cuda")
        w = torch.empty(shape[-1], device="cuda")
        y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, None, 1e-5, out_dtype)
    assert y.shape == shape and y.dtype == out_dtype and y.is_contiguous()
    assert s.shape == (shape if d is not None else (0,)) and s.dtype == x_dtype
    assert mean.shape == rstd.shape == shape[:-1] and mean.dtype == rstd.dtype == F32


@pytest.mark.parametrize("delta_dtype,has_bias,has_delta_bias", [(BF16, True, False), (F32, False, False),
                                                                 (None, True, False), (BF16, False, True)])
def test_fake_backward_shapes(delta_dtype, has_bias, has_delta_bias):
    with FakeTensorMode():
        s = torch.empty(6, 5, 96, device="cuda")
        dy = torch.empty(6, 5, 96, dtype=BF16, device="cuda")
        mean = torch.empty(6, 5, device="cuda")
        w = torch.empty(96, device="cuda")
        dx, dd, dw, db, ddb = torch.ops.tk.add_layer_norm_bwd(dy, s, s, mean, mean, w, has_bias, delta_dtype,
                                                              has_delta_bias)
    assert dx.shape == s.shape and dx.dtype == F32
    assert dd.shape == ((6, 5, 96) if delta_dtype == BF16 else (0,))
    assert dd.dtype == (BF16 if delta_dtype == BF16 else F32)
    assert dw.shape == (96,) and db.shape == ((96,) if has_bias else (0,))
    assert ddb.shape == ((96,) if has_delta_bias else (0,)) and ddb.dtype == F32


def test_autograd_backward_glue(monkeypatch):
    """The registered backward: the fused op's gradient goes to x and to delta (a separate tensor in
    delta's dtype only when it differs from x's), none to delta when there is none or to bias without
    one; the saved tensors are the sum (or x without delta)."""
    calls = []

    def fake_bwd(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype, has_delta_bias):
        calls.append((ds is not None, has_bias, delta_dtype, has_delta_bias))
        dx = torch.full(s.shape, 2.0)
        dd = dx.to(delta_dtype) if delta_dtype is not None else s.new_empty((0,))
        empty = weight.new_empty((0,))
        return (dx, dd, torch.ones_like(weight), torch.ones_like(weight) if has_bias else empty,
                torch.full_like(weight, 3.0) if has_delta_bias else empty)

    monkeypatch.setattr(torch.ops.tk, "add_layer_norm_bwd", fake_bwd, raising=False)
    s, dy, ds = torch.randn(3, 64), torch.randn(3, 64, dtype=BF16), torch.randn(3, 64)
    mean, w = torch.randn(3), torch.randn(64)

    def ctx(has_delta, has_bias, delta_dtype, has_delta_bias=False):
        return types.SimpleNamespace(saved_tensors=(s, mean, mean, w), has_delta=has_delta, has_bias=has_bias,
                                     delta_dtype=delta_dtype, has_delta_bias=has_delta_bias)

    g = ln._backward(ctx(True, True, BF16), dy, ds, None, None)  # fp32 residual, bf16 delta
    assert len(g) == 7 and g[0].dtype == F32 and g[1].dtype == BF16 and g[3] is not None and g[4:] == (None,) * 3
    g = ln._backward(ctx(True, False, F32), dy, ds, None, None)  # same dtype: one tensor for both
    assert g[1] is g[0] and g[3] is None
    g = ln._backward(ctx(False, True, None), dy, torch.zeros(0), None, None)  # plain LayerNorm
    assert g[1] is None and g[0].shape == s.shape
    g = ln._backward(ctx(True, False, BF16, True), dy, ds, None, None)  # delta_bias: its gradient is the 7th
    assert torch.equal(g[6], torch.full_like(w, 3.0)) and g[3] is None
    assert calls == [(True, True, BF16, False), (True, False, None, False), (False, True, None, False),
                     (True, False, BF16, True)]
    g = ln._backward(ctx(True, True, BF16), None, ds, None, None)  # y unused: the residual gradient only
    assert g[0] is ds and g[1].dtype == BF16 and g[2] is None and g[6] is None
    g = ln._backward(ctx(True, True, BF16, True), None, ds, None, None)  # ... delta_bias's: ddelta's column sums
    torch.testing.assert_close(g[6], ds.to(BF16).float().sum(0))
    assert len(calls) == 4


class Float64Ext:
    """A stand-in for the compiled extension (same signatures and outputs), computing in float64 on CPU."""

    def __init__(self):
        self.calls = []

    def forward(self, x, delta, w, b, eps, out_dtype, delta_bias=None):
        self.calls.append("forward")
        if delta_bias is not None:
            delta = (delta + delta_bias).to(delta.dtype)
        s = x if delta is None else x + delta
        s64 = s.double()
        mean, rstd = s64.mean(-1), torch.rsqrt(s64.var(-1, unbiased=False) + eps)
        y = (s64 - mean[..., None]) * rstd[..., None] * w.double() + (0.0 if b is None else b.double())
        return y.to(out_dtype), (x.new_empty((0,)) if delta is None else s), mean.float(), rstd.float()

    def backward(self, dy, ds, s, mean, rstd, w, has_bias, delta_dtype, has_delta_bias=False):
        self.calls.append(("backward", ds is not None, has_bias, delta_dtype))
        C = s.shape[-1]
        xh = (s.double() - mean.double()[..., None]) * rstd.double()[..., None]
        g = dy.double() * w.double()
        dx = rstd.double()[..., None] * (g - g.mean(-1, keepdim=True) - xh * (g * xh).mean(-1, keepdim=True))
        dx = dx + (0.0 if ds is None else ds.double())
        dw = (dy.double() * xh).reshape(-1, C).sum(0).float()
        db = dy.double().reshape(-1, C).sum(0).float() if has_bias else w.new_empty((0,))
        dd = dx.to(delta_dtype) if delta_dtype is not None else s.new_empty((0,))
        stored = dd if delta_dtype is not None else dx.to(s.dtype)
        ddb = stored.double().reshape(-1, C).sum(0).float() if has_delta_bias else w.new_empty((0,))
        return dx.to(s.dtype), dd, dw, db, ddb


@pytest.fixture
def float64_ext(monkeypatch):
    """The custom ops run on CPU tensors, with Float64Ext as the extension: their own bodies are registered
    for "cpu" (for the rest of the process; no other test calls them on CPU tensors)."""
    for op in (ln.add_layer_norm_fwd, ln.add_layer_norm_bwd):
        torch.library.register_kernel(op, "cpu", op._init_fn)
    ext = Float64Ext()
    monkeypatch.setattr(ln, "_ext", lambda: ext)
    return ext


@pytest.mark.parametrize("x_dt,d_dt,bias,delta_bias", [(F32, BF16, True, False), (F32, F32, False, False),
                                                       (BF16, BF16, True, False), (F32, None, True, False),
                                                       (F32, BF16, True, True), (F32, F32, False, True)])
def test_custom_op_path_gradients(float64_ext, x_dt, d_dt, bias, delta_bias):
    """The custom ops with their registered autograd (what torch.compile traces) and a float64 stand-in
    extension: s, y and the gradients of x, delta, weight, bias (and delta_bias) equal those of the reference
    op through autograd; gradients keep their inputs' dtypes. (The eager C++ path is compared with this one
    bitwise in test_layernorm_gpu.py.)"""
    torch.manual_seed(0)
    x, w = torch.randn(3, 5, 64).to(x_dt), 1 + 0.1 * torch.randn(64)
    d = None if d_dt is None else torch.randn(3, 5, 64).to(d_dt)
    b = 0.1 * torch.randn(64) if bias else None
    db = 0.3 * torch.randn(64) if delta_bias else None
    leaves = [t.clone().requires_grad_() for t in (x, d, w, b, db) if t is not None]
    refs = [t.clone().requires_grad_() for t in (x, d, w, b, db) if t is not None]

    def args(ts):
        it = iter(ts)
        return [next(it) if t is not None else None for t in (x, d, w, b, db)]

    xs, ds_, ws, bs, dbs = args(leaves)
    s, y = ln._custom_op_path(xs, ds_, ws, bs, 1e-5, BF16, 0.0, dbs)
    xr, dr, wr, br, dbr = args(refs)
    s_ref, y_ref = reference.add_layer_norm(xr, dr, wr, br, 1e-5, delta_bias=dbr)
    assert y.dtype == BF16 and s.dtype == x_dt and torch.equal(s, s_ref)
    torch.testing.assert_close(y.float(), y_ref.float(), rtol=1e-2, atol=1e-2)
    gy, gs = torch.randn(y.shape).to(BF16), torch.randn(s.shape).to(x_dt)
    if d is not None:
        torch.autograd.backward([y, s], [gy, gs])
        torch.autograd.backward([y_ref, s_ref], [gy.to(y_ref.dtype), gs])
    else:
        y.backward(gy)
        y_ref.backward(gy.to(y_ref.dtype))
    for ours, ref in zip(leaves, refs):
        assert ours.grad is not None and ours.grad.dtype == ours.dtype
        tol = 2e-2 if BF16 in (ours.dtype, x_dt) else 1e-4  # the reference computes in bf16 for bf16 x
        torch.testing.assert_close(ours.grad.float(), ref.grad.float(), rtol=tol, atol=tol)
    assert float64_ext.calls == ["forward",
                                 ("backward", d is not None, bias, d_dt if d_dt not in (None, x_dt) else None)]
    if delta_bias:
        assert leaves[-1].grad.dtype == F32 and leaves[-1].grad.shape == (64,)


def test_custom_op_path_unused_outputs(float64_ext):
    """With y unused the residual gradient alone reaches x and delta (the weight's is zero: autograd
    hands the custom op's backward zeros for unused outputs, where the eager C++ path gets none and
    leaves weight.grad None); with s unused its zero gradient is added."""
    x, d = torch.randn(4, 64, requires_grad=True), torch.randn(4, 64).to(BF16).requires_grad_()
    w = torch.randn(64, requires_grad=True)
    s, y = ln._custom_op_path(x, d, w, None, 1e-5, BF16)
    (2 * s).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0)) and torch.equal(d.grad, torch.full_like(d, 2.0))
    assert w.grad is None or not w.grad.any()
    x.grad = d.grad = w.grad = None
    s, y = ln._custom_op_path(x, d, w, None, 1e-5, BF16)
    y.float().sum().backward()
    assert float64_ext.calls[-1] == ("backward", True, False, BF16) and w.grad is not None
    assert torch.equal(d.grad.float(), x.grad.to(BF16).float())


def test_eager_path_is_one_extension_call(monkeypatch):
    """Outside torch.compile, add_layer_norm_op hands its arguments unchanged to the extension's
    add_layer_norm (the op with autograd in C++, csrc/bindings.cpp); it returns (s, y) as is."""
    calls = []
    ext = types.SimpleNamespace(add_layer_norm=lambda *a: calls.append(a) or ("s", "y"))
    monkeypatch.setattr(ln, "_ext", lambda: ext)
    x, w = torch.randn(2, 64), torch.randn(64, dtype=BF16)
    assert ln.add_layer_norm_op(x, None, w, None, 1, BF16) == ("s", "y")
    assert len(calls) == 1 and calls[0][0] is x and calls[0][1] is None and calls[0][2] is w
    assert calls[0][3:] == (None, 1.0, BF16, None) and type(calls[0][4]) is float


# -----------------------------------------------------------------------------
# dispatch

class StandIn:
    """A 'TK' add_layer_norm that computes the reference and counts its calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, delta, weight, bias, eps, out_dtype, dropout_p=0.0, delta_bias=None):
        self.calls.append((x.dtype, None if delta is None else delta.dtype, out_dtype))
        return reference.add_layer_norm(x, delta, weight, bias, eps, dropout_p, delta_bias=delta_bias)


@pytest.fixture
def stand_in(monkeypatch):
    """layer_norm 'supports' CPU here (plan and per-call checks), attention has no TK kernel."""
    kernel = StandIn()
    monkeypatch.setattr(ln, "tensor_reason", lambda x, delta, weight, bias, out_dtype, delta_bias=None:
                        ln.width_reason(x.shape[-1]))
    with dispatch.override("attention", tk=None), dispatch.override("classifier", tk=None), \
            dispatch.override("mlp", tk=None), \
            dispatch.override("layer_norm", tk=kernel, unsupported=lambda device, dtype, dims: None,
                              not_used=None):
        yield kernel


def test_plan_time_reasons():
    with dispatch.override("attention", tk=None), dispatch.override("mlp", tk=None), \
            dispatch.override("layer_norm", not_used=None):
        with pytest.raises(TKUnsupportedError, match="the TK layer_norm kernel cannot run here: no CUDA GPU"):
            dispatch.plan("tk", "cpu", F32, 16, n_embd=64)
        with pytest.warns(UserWarning, match="layer_norm falls back to PyTorch: no CUDA GPU"):
            plan = dispatch.plan("auto", "cpu", F32, 16, n_embd=64)
    assert plan.path("layer_norm") == "torch"
    x, d, w, b = torch.randn(2, 3, 64), torch.randn(2, 3, 64), torch.randn(64), torch.randn(64)
    s, y = dispatch.add_layer_norm(plan, x, d, w, b)
    assert torch.equal(s, x + d) and torch.equal(y, torch.nn.functional.layer_norm(x + d, (64,), w, b, 1e-5))
    assert torch.equal(dispatch.layer_norm(plan, x, w, None), torch.nn.functional.layer_norm(x, (64,), w))


def test_per_call_path_and_fallback(stand_in):
    plan = dispatch.plan("tk", "cpu", F32, 16, n_embd=64)
    assert plan.path("layer_norm") == "tk" and "layer_norm=tk" in plan.describe()
    x, d, w = torch.randn(5, 64), torch.randn(5, 64), torch.randn(64)
    s, y = dispatch.add_layer_norm(plan, x, d, w, None)
    assert stand_in.calls == [(F32, F32, F32)]
    torch.testing.assert_close(s, x + d)
    # a width the kernel lacks: tk raises, auto warns once and runs the reference
    x100 = torch.randn(5, 100)
    with pytest.raises(TKUnsupportedError, match="multiple of 8"):
        dispatch.layer_norm(plan, x100, torch.ones(100), None)
    auto = dispatch.plan("auto", "cpu", F32, 16, n_embd=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            y = dispatch.layer_norm(auto, x100, torch.ones(100), None)
    assert len([w for w in caught if "falls back" in str(w.message)]) == 1
    assert torch.equal(y, torch.nn.functional.layer_norm(x100, (100,)))
    assert len(stand_in.calls) == 1
    # inputs on another device than the plan's
    meta = dispatch.plan("tk", "meta", F32, 16)
    with pytest.raises(TKUnsupportedError, match="the plan is for meta"):
        dispatch.layer_norm(meta, x, w, None)


@pytest.mark.parametrize("bias", [True, False])
def test_model_fused_path_equals_flat_path(stand_in, bias):
    """GPT under a plan that runs the layer_norm kernel takes Block.forward_fused (each residual add
    fused into the next LayerNorm, 2 n_layer + 1 calls); with the reference inside it computes
    exactly what the nanoGPT blocks compute, loss and every gradient."""
    def make(kernels):
        torch.manual_seed(0)
        return GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=3, n_head=2, n_embd=64, bias=bias,
                             kernels=kernels))
    flat, fused = make("torch"), make("tk")
    assert list(flat.state_dict()) == list(fused.state_dict())  # parameter names unchanged
    idx = torch.randint(64, (2, 12))
    _, loss_flat = flat(idx, idx)
    _, loss_fused = fused(idx, idx)
    assert fused.kernel_plan.path("layer_norm") == "tk" and flat.kernel_plan.path("layer_norm") == "torch"
    assert len(stand_in.calls) == 2 * 3 + 1
    assert stand_in.calls[0] == (F32, None, F32) and stand_in.calls[1] == (F32, F32, F32)
    torch.testing.assert_close(loss_fused, loss_flat, rtol=1e-6, atol=1e-6)
    loss_flat.backward()
    loss_fused.backward()
    for (name, p), q in zip(flat.named_parameters(), fused.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6, msg=name)
    # generate (KV cache: prefill, then one token at a time) goes through the fused path too; greedy
    n = len(stand_in.calls)
    flat.eval(), fused.eval()
    assert torch.equal(fused.generate(idx[:1, :3], 4, top_k=1), flat.generate(idx[:1, :3], 4, top_k=1))
    assert len(stand_in.calls) == n + 4 * (2 * 3 + 1)


def test_auto_without_gpu_keeps_nanogpt_blocks():
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=32, kernels="auto"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m(torch.randint(64, (1, 8)))
    assert m.kernel_plan.path("layer_norm") == "torch"
