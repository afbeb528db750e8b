"""The kernels switch in tk_kernels/dispatch.py: the plan (made once per model), torch / tk / auto
semantics, describe(), and torch.compile-friendliness of the per-call part. The tk path runs here
with a stand-in kernel put into the registry with dispatch.override (ours needs a GPU; see
test_attention_gpu.py)."""

import math
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounter

import tk_kernels
from model import GPT, GPTConfig
from tk_kernels import dispatch, reference
from tk_kernels.dispatch import TKUnsupportedError


# tiny ops run fastest on one thread (and don't stall on a busy 2-core CI machine)
pytestmark = pytest.mark.usefixtures("one_torch_thread")

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def fresh_dispatch():
    dispatch.reset()
    torch._dynamo.reset()
    yield
    dispatch.reset()


def qkv_views(B=2, H=3, T=17, D=16, dtype=torch.float32, requires_grad=False):
    """q, k, v as (B, H, T, D) views into one fused (B, T, 3*H*D) tensor, like model.py."""
    x = torch.randn(B, T, 3 * H * D, dtype=dtype, requires_grad=requires_grad)
    q, k, v = x.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
    return x, q, k, v


def naive_attention(q, k, v, causal, scale=None):
    q, k, v = q.double(), k.double(), v.double()
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    att = q @ k.transpose(-2, -1) * scale
    if causal:
        T = q.size(-2)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
    return att.softmax(-1) @ v


def tiny_gpt(kernels, dropout=0.0, n_head=2):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=n_head, n_embd=32,
                         dropout=dropout, kernels=kernels))


def fallback_warnings(caught):
    return [str(w.message) for w in caught if "falls back to PyTorch" in str(w.message)]


@pytest.mark.parametrize("causal", [True, False])
def test_torch_mode_equals_reference_and_math(causal):
    plan = dispatch.plan("torch", "cpu", torch.float32, 16)
    _, q, k, v = qkv_views(T=int(torch.randint(1, 40, ()).item()))
    assert not q.is_contiguous() and q.stride(-1) == 1  # views, as in the model
    out = dispatch.attention(plan, q, k, v, causal=causal)
    assert torch.equal(out, reference.attention(q, k, v, causal, 0.0))
    torch.testing.assert_close(out.double(), naive_attention(q, k, v, causal), rtol=1e-5, atol=1e-5)
    out = dispatch.attention(plan, q, k, v, causal=causal, scale=0.3)
    torch.testing.assert_close(out.double(), naive_attention(q, k, v, causal, 0.3), rtol=1e-5, atol=1e-5)
    assert plan.path("attention") == "torch" and plan.choices["attention"].reason is None


@pytest.mark.parametrize("kernels", dispatch.KERNEL_MODES)
def test_families_without_tk_kernel_are_plain_pytorch(kernels):
    """A family whose TK kernel is absent runs PyTorch in every mode, with no warning and no error,
    and model.py's modules (the MLP, and the LayerNorm modules whose parameters the fused TK path
    reads) compute exactly the reference ops."""
    ok = lambda device, dtype, dims: None
    with dispatch.override("attention", unsupported=ok), dispatch.override("layer_norm", unsupported=ok), \
            dispatch.override("classifier", unsupported=ok), dispatch.override("mlp", tk=None, unsupported=None):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback warning: there is nothing to fall back from
            plan = dispatch.plan(kernels, "cpu", torch.float32, 16)
        assert plan.path("mlp") == "torch"
    text = plan.describe()
    if kernels != "torch":
        assert "mlp=torch (no TK kernel yet)" in text
    m = tiny_gpt(kernels)
    x = torch.randn(2, 5, 32)
    mlp, ln = m.transformer.h[0].mlp, m.transformer.h[0].ln_1
    torch.nn.init.normal_(ln.weight)
    torch.nn.init.normal_(ln.bias)
    torch.testing.assert_close(mlp(x, plan), reference.mlp(x, mlp.c_fc.weight, mlp.c_fc.bias,
                                                     mlp.c_proj.weight, mlp.c_proj.bias))
    torch.testing.assert_close(ln(x), reference.layer_norm(x, ln.weight, ln.bias))
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(ln(x), (x - mu) / torch.sqrt(var + 1e-5) * ln.weight + ln.bias)


def test_tk_mode_on_cpu_raises_one_clear_error():
    with pytest.raises(TKUnsupportedError) as e:
        dispatch.plan("tk", "cpu", torch.bfloat16, 64)
    msg = str(e.value)
    assert msg.startswith("kernels=tk: the TK attention kernel cannot run here: no CUDA GPU")
    assert "kernels=auto" in msg and isinstance(e.value, ValueError)
    m = tiny_gpt("tk")
    idx = torch.randint(64, (2, 20))
    with pytest.raises(TKUnsupportedError, match="no CUDA GPU"):
        m(idx, idx)  # the first forward makes the plan
    with pytest.raises(TKUnsupportedError, match="no CUDA GPU"):
        m.plan_kernels()


def test_auto_mode_on_cpu_warns_once_per_reason():
    _, q, k, v = qkv_views()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plans = [dispatch.plan("auto", "cpu", torch.float32, 16) for _ in range(2)]
        outs = [dispatch.attention(plans[0], q, k, v, causal=True) for _ in range(3)]
        m = tiny_gpt("auto")
        for _ in range(2):
            m(*[torch.randint(64, (2, 20))] * 2)  # same reason: no second warning
    fallback = fallback_warnings(caught)
    assert len(fallback) == 1, fallback
    assert "no CUDA GPU" in fallback[0]
    for out in outs:
        assert torch.equal(out, reference.attention(q, k, v, True, 0.0))
    assert plans[0].path("attention") == "torch" and m.kernel_plan.path("attention") == "torch"


def test_plan_with_warn_false_leaves_the_report_to_the_caller():
    """train.py prints plan.describe() and asks for no warning: the forward does not warn later."""
    m = tiny_gpt("auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = m.plan_kernels(warn=False).describe()
        m(*[torch.randint(64, (2, 20))] * 2)
    assert fallback_warnings(caught) == []
    assert text.count("no CUDA GPU") == 1 and text.count("same as attention") == 3  # mlp, layer_norm, classifier


def test_describe_on_cpu():
    text = dispatch.describe("torch")
    assert text.startswith("kernels=torch") and all(f in text for f in dispatch.FAMILIES)
    assert "attention=torch (SDPA)" in text
    text = dispatch.describe("auto", device="cpu", dtype=torch.bfloat16, head_dim=64)
    assert "attention=torch (TK unsupported: no CUDA GPU" in text
    assert "mlp=torch (TK unsupported: same as attention)" in text
    assert "layer_norm=torch (TK unsupported: same as attention)" in text
    assert "attention=ERROR (TK unsupported" in dispatch.describe("tk", device="cpu")
    with pytest.raises(ValueError, match="kernels must be one of"):
        dispatch.plan("cuda", "cpu", torch.float32, 64)
    with pytest.raises(ValueError, match="kernels must be one of"):
        dispatch.describe("fast")
    with pytest.raises(ValueError, match="unknown op family"):
        with dispatch.override("softmax", tk=None):
            pass


def test_package_is_plain_and_exports():
    assert tk_kernels.KERNEL_MODES == ("torch", "tk", "auto")
    assert tk_kernels.dispatch is dispatch and tk_kernels.reference is reference
    assert tk_kernels.TKUnsupportedError is TKUnsupportedError
    assert callable(tk_kernels.attention)  # the function; the family is tk_kernels.families.attention
    assert tk_kernels.families.attention.ops.attention is tk_kernels.attention


def test_override_restores_the_registry():
    before = dict(dispatch.FAMILIES)
    with pytest.raises(RuntimeError):
        with dispatch.override("attention", tk=print) as entry:
            assert dispatch.FAMILIES["attention"] is entry and entry.tk is print
            raise RuntimeError
    assert dispatch.FAMILIES == before


# -----------------------------------------------------------------------------
# the tk path with a stand-in kernel (our real one needs a GPU; see the gpu tests)

class FakeKernel:
    """Stands in for the TK attention op: records calls, computes with SDPA."""

    def __init__(self):
        self.calls = 0
        self.dropout_ps = []

    def __call__(self, q, k, v, causal=True, scale=None, dropout_p=0.0):
        self.calls += 1
        self.dropout_ps.append(dropout_p)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, dropout_p=dropout_p)


@pytest.fixture
def fake_tk():
    """The TK attention 'supports' CPU float32/float64 inputs of head dim 16 and runs a FakeKernel
    (LayerNorm and the MLP count as families without TK kernel here: tests/layernorm/ and tests/mlp/ test
    their dispatch)."""
    kernel = FakeKernel()

    def unsupported(device, dtype, dims):
        head_dim = dims["head_dim"]
        if device.type == "cpu" and dtype in (torch.float32, torch.float64) and head_dim == 16:
            return None
        return f"the stand-in supports cpu float32/float64 with head dim 16, got {dtype} {head_dim}"

    # the classifier family (tests/classifier/) 'supports' CPU too here, running its reference op;
    # LayerNorm and the MLP run PyTorch
    with dispatch.override("attention", tk=kernel, unsupported=unsupported), \
            dispatch.override("layer_norm", tk=None), dispatch.override("mlp", tk=None), \
            dispatch.override("classifier", unsupported=lambda device, dtype, dims: None,
                              tk=reference.linear_cross_entropy):
        yield kernel


def test_tk_and_auto_take_the_kernel_when_supported(fake_tk):
    _, q, k, v = qkv_views(D=16)
    for mode in ("tk", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plan = dispatch.plan(mode, "cpu", torch.float32, 16)
            out = dispatch.attention(plan, q, k, v, causal=True)
        assert plan.path("attention") == "tk" and plan.path("attention", training=True) == "tk"
        torch.testing.assert_close(out, reference.attention(q, k, v, True, 0.0))
        assert plan.describe().startswith(f"kernels={mode}: attention=tk;")
    assert fake_tk.calls == 2
    # an unsupported head dim: tk raises when planning, auto plans the reference op
    with pytest.raises(TKUnsupportedError, match="head dim 16"):
        dispatch.plan("tk", "cpu", torch.float32, 8)
    with pytest.warns(UserWarning, match="falls back to PyTorch: the stand-in"):
        assert dispatch.plan("auto", "cpu", torch.float32, 8).path("attention") == "torch"


def test_inputs_that_do_not_fit_the_plan(fake_tk):
    """A plan is for one device and dtype: other inputs are refused (tk) or run PyTorch (auto)."""
    _, q, k, v = qkv_views(D=16, dtype=torch.float64)
    with pytest.raises(TKUnsupportedError, match="the plan is for torch.float32 on cpu"):
        dispatch.attention(dispatch.plan("tk", "cpu", torch.float32, 16), q, k, v)
    with pytest.warns(UserWarning, match="the plan is for torch.float32"):
        out = dispatch.attention(dispatch.plan("auto", "cpu", torch.float32, 16), q, k, v)
    assert torch.equal(out, reference.attention(q, k, v, True, 0.0)) and fake_tk.calls == 0
    # GPT makes a new plan when its inputs change dtype
    m = tiny_gpt("tk")
    idx = torch.randint(64, (2, 20))
    m(idx, idx)
    assert m.kernel_plan.dtype == torch.float32 and fake_tk.calls == 2
    m.double()
    m(idx, idx)
    assert m.kernel_plan.dtype == torch.float64 and fake_tk.calls == 4


def test_dropout_while_training_runs_tk(fake_tk):
    """The registry's attention entry applies dropout in its TK op (has_dropout=False), so a plan with
    dropout_p > 0 takes the TK attention in training too, and the per-call dropout_p reaches the kernel
    (the model passes 0 in eval)."""
    assert dispatch.FAMILIES["attention"].has_dropout is False
    _, q, k, v = qkv_views(D=16)
    _dropout_runs_tk(fake_tk, q, k, v)


def _dropout_runs_tk(fake_tk, q, k, v):
    for mode in ("tk", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plan = dispatch.plan(mode, "cpu", torch.float32, 16, dropout_p=0.1)
            out = dispatch.attention(plan, q, k, v, dropout_p=0.1)
        assert plan.path("attention", training=True) == "tk" and out.shape == q.shape
        assert plan.describe().startswith(f"kernels={mode}: attention=tk;")
    assert fake_tk.dropout_ps == [0.1, 0.1]
    m = tiny_gpt("tk", dropout=0.1)
    m(*[torch.randint(64, (2, 20))] * 2)             # training: dropout 0.1 per layer
    m.eval()
    m(torch.randint(64, (2, 20)))                    # eval: no dropout
    assert fake_tk.dropout_ps[2:] == [0.1, 0.1, 0.0, 0.0]


def test_family_without_dropout_falls_back_while_training(fake_tk):
    """The registry's has_dropout (a TK op without dropout): training with dropout_p > 0 is refused
    by kernels=tk and runs the reference op under kernels=auto."""
    _, q, k, v = qkv_views(D=16)
    with dispatch.override("attention", has_dropout=True):
        with pytest.raises(TKUnsupportedError, match="dropout"):
            dispatch.plan("tk", "cpu", torch.float32, 16, dropout_p=0.1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = dispatch.plan("auto", "cpu", torch.float32, 16, dropout_p=0.1)
            for _ in range(2):
                out = dispatch.attention(plan, q, k, v, dropout_p=0.1)
        assert len(fallback_warnings(caught)) == 1 and "dropout" in fallback_warnings(caught)[0]
        assert fake_tk.calls == 0 and out.shape == q.shape
        assert plan.path("attention") == "tk" and plan.path("attention", training=True) == "torch"
        assert "attention=tk in eval, torch while training (TK unsupported: attention dropout" in plan.describe()
        assert "tk in eval, ERROR while training" in dispatch.describe("tk", device="cpu", head_dim=16,
                                                                       dropout_p=0.1)
        with pytest.raises(TKUnsupportedError, match="dropout"):
            dispatch.attention(dispatch.plan("tk", "cpu", torch.float32, 16), q, k, v, dropout_p=0.1)


def test_unequal_shapes_are_not_sent_to_tk(fake_tk):
    q = torch.randn(1, 2, 1, 16)
    k = v = torch.randn(1, 2, 5, 16)
    with pytest.raises(TKUnsupportedError, match="differ in shape"):
        dispatch.attention(dispatch.plan("tk", "cpu", torch.float32, 16), q, k, v, causal=False)
    with pytest.warns(UserWarning, match="differ in shape"):
        out = dispatch.attention(dispatch.plan("auto", "cpu", torch.float32, 16), q, k, v, causal=False)
    torch.testing.assert_close(out, reference.attention(q, k, v, False))
    # KV-cache decoding in a kernels=tk model: the prefill runs TK, decode steps SDPA, no error
    m = tiny_gpt("tk").eval()
    out = m.generate(torch.randint(64, (2, 5)), 4, temperature=0.0)
    assert out.shape == (2, 9) and fake_tk.calls == 2  # one prefill call per layer


def test_tk_path_compiles_without_graph_breaks(fake_tk):
    model = tiny_gpt("tk")
    idx = torch.randint(64, (2, 20))
    logits, loss = model(idx, idx)  # eager: makes the plan
    assert fake_tk.calls == 2  # one per layer
    compiled = torch.compile(model, backend="eager", fullgraph=True)  # fullgraph: any break fails
    logits_c, loss_c = compiled(idx, idx)
    torch.testing.assert_close(loss_c, loss)
    loss_c.backward()
    assert model.lm_head.weight.grad is not None
    # dynamic shapes (symbolic T and B) stay in one graph as well
    dynamic = torch.compile(model, backend="eager", fullgraph=True, dynamic=True)
    for B, T in ((2, 20), (3, 13)):
        idx = torch.randint(64, (B, T))
        torch.testing.assert_close(dynamic(idx, idx)[1], model(idx, idx)[1])


def test_auto_fallback_compiles_without_graph_breaks(fake_tk):
    """kernels=auto with dropout and a TK op without it: SDPA while training, the (stand-in) TK kernel
    in eval, each one graph; the plan's warning was given when planning, none while tracing."""
    model = tiny_gpt("auto", dropout=0.1)
    with dispatch.override("attention", has_dropout=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.plan_kernels()
        compiled = torch.compile(model, backend="eager", fullgraph=True)
        idx = torch.randint(64, (2, 20))
        logits, loss = compiled(idx, idx)  # training mode: dropout > 0, so SDPA
        loss.backward()
        assert fake_tk.calls == 0
        model.eval()
        compiled(idx, idx)  # eval mode: the stand-in TK kernel
    assert torch.isfinite(loss) and fake_tk.calls == 2
    assert len([w for w in fallback_warnings(caught) if "dropout" in w]) == 1


def test_cpu_auto_gpt_compiles_to_one_graph():
    """The case CI can run for real: kernels=auto on a CPU, forward + backward under
    torch.compile, no graph break once the model is planned (as train.py does before compiling)."""
    model = tiny_gpt("auto")
    model.plan_kernels(warn=False)
    idx = torch.randint(64, (2, 20))
    explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, str(explained)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    _, loss = compiled(idx, idx)
    loss.backward()
    assert torch.isfinite(loss) and model.lm_head.weight.grad is not None


def test_unplanned_compile_plans_on_its_first_call():
    """A model compiled before it was planned: the first call makes the plan outside the graph
    (one graph break), later calls run one graph and compile nothing new."""
    model = tiny_gpt("auto")
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter)
    idx = torch.randint(64, (2, 20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            _, loss = compiled(idx, idx)
    assert model.kernel_plan is not None and model.kernel_plan.path("attention") == "torch"
    frames = counter.frame_count
    compiled(idx, idx)
    assert counter.frame_count == frames  # nothing recompiled once planned
    assert len(fallback_warnings(caught)) == 1
    torch.testing.assert_close(loss, model(idx, idx)[1])


# -----------------------------------------------------------------------------
# attention_qkv: the attention on the fused (B, T, 3C) projection

def old_attention_forward(self, x, plan, cache=None):
    """CausalSelfAttention.forward as it was before attention_qkv (the q, k, v views to dispatch.attention),
    without the KV cache: what the kernels=torch model must still compute bit for bit."""
    B, T, C = x.size()
    H, D = self.n_head, C // self.n_head
    qkv = self.c_attn(x).view(B, T, 3, H, D)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    dropout_p = self.dropout if self.training else 0.0
    y = dispatch.attention(plan, q, k, v, causal=True, dropout_p=dropout_p)
    y = y.transpose(1, 2).reshape(B, T, C)
    return self.resid_dropout(self.c_proj(y))


@pytest.mark.parametrize("kernels", ["torch", "auto"])
@pytest.mark.parametrize("causal,dropout_p,scale", [(True, 0.0, None), (False, 0.0, 0.3), (True, 0.2, None)])
def test_attention_qkv_fallback_equals_the_views_path(kernels, causal, dropout_p, scale):
    """On the torch path (kernels=torch, and kernels=auto on a CPU) attention_qkv is dispatch.attention on the
    views, bit for bit in fp32: the output and the gradient of qkv (dropout: the same seed, the same mask)."""
    plan = dispatch.plan(kernels, "cpu", torch.float32, 16, warn=False)
    x, q, k, v = qkv_views(requires_grad=True)
    results = []
    for call in (lambda: dispatch.attention_qkv(plan, x, 3, causal=causal, dropout_p=dropout_p, scale=scale),
                 lambda: dispatch.attention(plan, q, k, v, causal=causal, dropout_p=dropout_p, scale=scale)):
        torch.manual_seed(1)
        out = call()
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out) + out.detach())
        results.append((out.detach(), grad))
    (out_a, grad_a), (out_b, grad_b) = results
    assert out_a.shape == q.shape and torch.equal(out_a, out_b) and torch.equal(grad_a, grad_b)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_torch_model_is_bitwise_the_views_model(monkeypatch, dropout):
    """The kernels=torch GPT (attention through attention_qkv) computes exactly what it computed when its
    attention split q, k, v itself: loss and every gradient, in training (dropout: the same seed) and in eval."""
    results = []
    for forward in (None, old_attention_forward):
        if forward is not None:
            monkeypatch.setattr("model.CausalSelfAttention.forward", forward)
        m = tiny_gpt("torch", dropout=dropout)
        idx = torch.randint(64, (2, 20), generator=torch.Generator().manual_seed(3))
        torch.manual_seed(7)
        _, loss = m(idx, idx)
        loss.backward()
        m.eval()
        logits, _ = m(idx)
        results.append((loss.detach(), logits.detach(), [p.grad for p in m.parameters()]))
    (la, oa, ga), (lb, ob, gb) = results
    assert torch.equal(la, lb) and torch.equal(oa, ob)
    assert all(torch.equal(a, b) for a, b in zip(ga, gb))


class FakeFusedKernel:
    """Stands in for the TK op on the fused projection: records its arguments, computes with SDPA on the views."""

    def __init__(self):
        self.calls = []
        self.biases = []  # the qkv_bias of each call (the real op returns its gradient; here autograd does)

    def __call__(self, qkv, n_head, causal=True, scale=None, dropout_p=0.0, bias=None):
        self.calls.append((tuple(qkv.shape), n_head, causal, scale, dropout_p))
        self.biases.append(bias)
        if bias is not None:
            qkv = qkv + (bias - bias.detach())
        q, k, v = dispatch.qkv_views(qkv, n_head)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, dropout_p=dropout_p)


@pytest.fixture
def fake_fused(fake_tk):
    """fake_tk, with the fused-projection op of the registry replaced too (the model then calls it)."""
    fused = FakeFusedKernel()
    with dispatch.override("attention", tk_qkv=fused):
        yield fused


def test_attention_qkv_takes_the_fused_op(fake_fused, fake_tk):
    """Under a TK plan the model's attention goes to the registry's tk_qkv with the fused projection itself
    (dropout_p per call: 0 in eval); q, k, v calls (the KV-cache prefill) still go to tk."""
    x, q, k, v = qkv_views(D=16)
    plan = dispatch.plan("tk", "cpu", torch.float32, 16, dropout_p=0.1)
    out = dispatch.attention_qkv(plan, x, 3, causal=False, scale=0.3)
    torch.testing.assert_close(out, reference.attention(q, k, v, False, 0.0, 0.3))
    assert fake_fused.calls == [((2, 17, 144), 3, False, 0.3, 0.0)] and fake_tk.calls == 0
    m = tiny_gpt("tk", dropout=0.1)
    m(*[torch.randint(64, (2, 20))] * 2)
    assert fake_fused.calls[1:] == [((2, 20, 96), 2, True, None, 0.1)] * 2 and fake_tk.calls == 0
    m.eval()
    m.generate(torch.randint(64, (2, 5)), 3, temperature=0.0)  # the prefill: q, k, v from the cache
    assert len(fake_fused.calls) == 3 and fake_tk.calls == 2
    assert fake_fused.biases == [None] * 3  # with dropout the model keeps c_attn's bias gradient in c_attn


def test_gpt_hands_c_attn_bias_to_the_fused_op(fake_fused, fake_tk):
    """Training without dropout under a TK plan, the model passes c_attn's bias to the fused op (qkv_bias) and
    c_attn leaves its gradient out (dispatch.linear(bias_grad=False)): the gradients are the kernels=torch
    model's; in eval it passes none."""
    torch.manual_seed(0)
    ref = tiny_gpt("torch")
    m = tiny_gpt("tk")
    m.load_state_dict(ref.state_dict())
    idx = torch.randint(64, (2, 20))
    for model in (ref, m):
        model(idx, idx)[1].backward()
    assert [b is blk.attn.c_attn.bias for b, blk in zip(fake_fused.biases, m.transformer.h)] == [True, True]
    for (name, p), p_ref in zip(m.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, p_ref.grad, msg=name)
    m.eval()
    m(idx)
    assert fake_fused.biases[2:] == [None, None]


def test_linear_without_bias_grad():
    """dispatch.linear(bias_grad=False) adds the bias but gives it no gradient, on any plan."""
    layer = torch.nn.Linear(16, 8)
    x = torch.randn(3, 16)
    plan = dispatch.plan("torch", "cpu", torch.float32, 16)
    y = dispatch.linear(plan, layer, x, bias_grad=False)
    torch.testing.assert_close(y, layer(x))
    y.sum().backward()
    assert layer.bias.grad is None and layer.weight.grad is not None


def test_attention_qkv_routes_qkv_bias_on_the_torch_path():
    """The torch path (and every fallback) adds qkv_bias - qkv_bias.detach(): the output is exactly the one
    without it and the bias gets the sums of qkv's gradient; a bias of the wrong shape is a ValueError."""
    x, q, k, v = qkv_views(D=16)
    plan = dispatch.plan("torch", "cpu", torch.float32, 16)
    x = x.detach().requires_grad_()
    b = torch.zeros(x.shape[-1], requires_grad=True)
    out = dispatch.attention_qkv(plan, x, 3, qkv_bias=b)
    assert torch.equal(out, dispatch.attention_qkv(plan, x, 3))
    out.sum().backward()
    torch.testing.assert_close(b.grad, x.grad.sum((0, 1)))
    with pytest.raises(ValueError, match=re.escape("qkv_bias must be a (144,) tensor")):
        dispatch.attention_qkv(plan, x, 3, qkv_bias=torch.zeros(5))


def test_attention_qkv_inputs_that_do_not_fit(fake_fused, fake_tk):
    """A qkv the plan does not cover (another dtype, another head dim, not 3-D) raises under tk and runs the
    reference on the views under auto, with one warning; has_dropout while training likewise."""
    x, q, k, v = qkv_views(D=16)
    cases = [(x.double(), 3, "the plan is for torch.float32 on cpu"),
             (x, 6, "is not a (B, T, 3 * n_head * head_dim) projection of n_head=6 heads of the plan's head dim 16")]
    for qkv, n_head, why in cases:
        with pytest.raises(TKUnsupportedError, match=re.escape(why)):
            dispatch.attention_qkv(dispatch.plan("tk", "cpu", torch.float32, 16), qkv, n_head)
        with pytest.warns(UserWarning, match=re.escape(why)):
            out = dispatch.attention_qkv(dispatch.plan("auto", "cpu", torch.float32, 16), qkv, n_head)
        assert torch.equal(out, reference.attention(*dispatch.qkv_views(qkv, n_head), True, 0.0))
    with pytest.raises(ValueError, match=re.escape("(B, T, 3 * n_head * D) fused projection")):
        dispatch.attention_qkv(dispatch.plan("auto", "cpu", torch.float32, 16), x, 5)
    with pytest.raises(ValueError, match=re.escape("(B, T, 3 * n_head * D) fused projection")):
        dispatch.qkv_views(x[0], 3)
    with dispatch.override("attention", has_dropout=True):
        with pytest.raises(TKUnsupportedError, match="dropout"):
            dispatch.attention_qkv(dispatch.plan("tk", "cpu", torch.float32, 16), x, 3, dropout_p=0.1)
    assert fake_fused.calls == [] and fake_tk.calls == 0


def test_override_of_tk_drops_the_fused_op():
    """A stand-in for tk also replaces the fused-projection op (the model then hands it the views), unless
    tk_qkv is given too; the registry comes back as it was."""
    real = dispatch.FAMILIES["attention"].tk_qkv
    assert real is tk_kernels.families.attention.ops.attention_qkv_op
    with dispatch.override("attention", tk=print) as entry:
        assert entry.tk_qkv is None
    with dispatch.override("attention", tk=print, tk_qkv=len) as entry:
        assert entry.tk_qkv is len
    with dispatch.override("attention", has_dropout=True) as entry:
        assert entry.tk_qkv is real
    assert dispatch.FAMILIES["attention"].tk_qkv is real


def test_fused_path_compiles_without_graph_breaks(fake_fused):
    model = tiny_gpt("tk")
    idx = torch.randint(64, (2, 20))
    _, loss = model(idx, idx)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(idx, idx)[1], loss)
    assert len(fake_fused.calls) == 4


def test_tk_torch_families_keeps_the_named_families_on_pytorch(monkeypatch):
    """TK_TORCH_FAMILIES (for bisecting a difference between kernels=tk and torch) keeps the named families on
    the reference ops, says so in describe(), and names the valid families for a typo."""
    from tk_kernels import dispatch
    monkeypatch.setenv("TK_TORCH_FAMILIES", "classifier, layer_norm")
    ok = lambda device, dtype, dims: None  # noqa: E731
    with dispatch.override("attention", unsupported=ok), dispatch.override("layer_norm", unsupported=ok), \
            dispatch.override("classifier", unsupported=ok), dispatch.override("mlp", tk=None):
        p = dispatch.plan("tk", "cpu", torch.bfloat16, head_dim=64)
    assert p.path("attention") == "tk" and p.path("classifier") == "torch" and p.path("layer_norm") == "torch"
    assert "classifier=torch (TK_TORCH_FAMILIES)" in p.describe()
    monkeypatch.setenv("TK_TORCH_FAMILIES", "clasifier")
    with pytest.raises(dispatch.TKUnsupportedError, match="unknown family clasifier; the families are attention"):
        dispatch.plan("tk", "cpu", torch.bfloat16, head_dim=64)
