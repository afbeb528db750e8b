"""The kernels switch in tk_kernels/dispatch.py: torch / tk / auto semantics, the
queries, and torch.compile-friendliness of the tk path (with a stand-in kernel,
so that it runs on a CPU)."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import tk_kernels
from tk_kernels import dispatch, reference
from tk_kernels.dispatch import TKUnsupportedError


# tiny ops run fastest on one thread (and don't stall on a busy 2-core CI machine)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(autouse=True)
def fresh_dispatch():
    dispatch.reset()
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


@pytest.mark.parametrize("causal", [True, False])
def test_torch_mode_equals_reference_and_math(causal):
    _, q, k, v = qkv_views(T=int(torch.randint(1, 40, ()).item()))
    assert not q.is_contiguous() and q.stride(-1) == 1  # views, as in the model
    out = dispatch.attention(q, k, v, causal=causal, dropout_p=0.0, kernels="torch")
    assert torch.equal(out, reference.attention(q, k, v, causal, 0.0))
    torch.testing.assert_close(out.double(), naive_attention(q, k, v, causal), rtol=1e-5, atol=1e-5)
    out = dispatch.attention(q, k, v, causal=causal, scale=0.3, kernels="torch")
    torch.testing.assert_close(out.double(), naive_attention(q, k, v, causal, 0.3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernels", dispatch.KERNEL_MODES)
def test_mlp_and_layer_norm_use_reference_in_every_mode(kernels):
    x = torch.randn(2, 5, 8)
    w1, b1, w2, b2 = torch.randn(32, 8), torch.randn(32), torch.randn(8, 32), torch.randn(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: there is nothing to fall back from
        y = dispatch.mlp(x, w1, b1, w2, b2, kernels=kernels)
        ln = dispatch.layer_norm(x, torch.randn(8), None, kernels=kernels)
    expected = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(y, reference.mlp(x, w1, b1, w2, None) + b2)
    w = ln_w = torch.randn(8)
    ln = dispatch.layer_norm(x, ln_w, None, kernels=kernels)
    mu, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(ln, (x - mu) / torch.sqrt(var + 1e-5) * w)
    assert dispatch.which("mlp", x, kernels=kernels) == "torch"
    assert dispatch.which("layer_norm", x, kernels=kernels) == "torch"


def test_tk_mode_on_cpu_raises_clear_error():
    _, q, k, v = qkv_views()
    with pytest.raises(TKUnsupportedError) as e:
        dispatch.attention(q, k, v, causal=True, kernels="tk")
    msg = str(e.value)
    assert "kernels=tk" in msg and "CUDA" in msg and "kernels=auto" in msg
    assert isinstance(e.value, ValueError)
    with pytest.raises(TKUnsupportedError):
        dispatch.which("attention", q, k, v, kernels="tk")
    assert "CUDA" in dispatch.unsupported_reason("attention", q, k, v)


def test_auto_mode_on_cpu_falls_back_with_one_warning():
    _, q, k, v = qkv_views()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [dispatch.attention(q, k, v, causal=True, kernels="auto") for _ in range(3)]
    fallback = [w for w in caught if "falls back to PyTorch" in str(w.message)]
    assert len(fallback) == 1, [str(w.message) for w in caught]
    assert "CUDA" in str(fallback[0].message)
    for out in outs:
        assert torch.equal(out, reference.attention(q, k, v, True, 0.0))
    assert dispatch.which("attention", q, k, v, kernels="auto") == "torch"


def test_queries_and_describe_on_cpu():
    assert dispatch.which("attention", kernels="torch", device="cpu") == "torch"
    assert dispatch.which("attention", kernels="auto", device="cpu") == "torch"
    with pytest.raises(TKUnsupportedError):
        dispatch.which("attention", kernels="tk", device="cpu")
    text = dispatch.describe("torch")
    assert text.startswith("kernels=torch") and all(op in text for op in dispatch.OPS)
    text = dispatch.describe("auto", device="cpu", dtype=torch.bfloat16, head_dim=64)
    assert "attention=torch" in text and "CUDA" in text
    assert "mlp=torch (no TK kernel yet)" in text and "layer_norm=torch (no TK kernel yet)" in text
    assert "attention=ERROR" in dispatch.describe("tk", device="cpu")
    with pytest.raises(ValueError, match="kernels must be one of"):
        dispatch.attention(*qkv_views()[1:], kernels="cuda")
    with pytest.raises(ValueError, match="kernels must be one of"):
        dispatch.describe("fast")
    with pytest.raises(ValueError, match="unknown op"):
        dispatch.which("softmax", kernels="torch")


def test_importing_the_package_is_lazy_and_exports():
    assert tk_kernels.KERNEL_MODES == ("torch", "tk", "auto")
    assert tk_kernels.dispatch is dispatch and tk_kernels.reference is reference
    assert tk_kernels.TKUnsupportedError is TKUnsupportedError


# -----------------------------------------------------------------------------
# the tk path with a stand-in kernel (our real one needs a GPU; see the gpu tests)

class FakeKernel:
    """Pretends to be tk_kernels.attention: records calls, computes with SDPA."""

    def __init__(self):
        self.calls = 0

    def __call__(self, q, k, v, causal=True, scale=None):
        self.calls += 1
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


@pytest.fixture
def fake_tk(monkeypatch):
    """Make the TK attention 'supported' on CPU float32 inputs and route it to a FakeKernel."""
    kernel = FakeKernel()
    real_reason = dispatch._tk_attention_reason

    def reason(device_type, device_index, dtype, head_dim, causal):
        if device_type == "cpu" and dtype == torch.float32 and head_dim in (16, 64):
            return None
        return real_reason(device_type, device_index, dtype, head_dim, causal)

    monkeypatch.setattr(dispatch, "_tk_attention_reason", reason)
    monkeypatch.setattr(dispatch, "_tk_attention", kernel)  # what _tk_attention_reason binds
    return kernel


def test_tk_and_auto_take_the_kernel_when_supported(fake_tk):
    _, q, k, v = qkv_views(D=16)
    for mode in ("tk", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = dispatch.attention(q, k, v, causal=True, kernels=mode)
        assert dispatch.which("attention", q, k, v, kernels=mode) == "tk"
        torch.testing.assert_close(out, reference.attention(q, k, v, True, 0.0))
    assert fake_tk.calls == 2
    assert dispatch.unsupported_reason("attention", q, k, v) is None
    assert "attention=tk;" in dispatch.describe("tk", device="cpu", head_dim=16)
    # an unsupported head dim still falls back / raises
    _, q8, k8, v8 = qkv_views(D=8)
    with pytest.raises(TKUnsupportedError):
        dispatch.attention(q8, k8, v8, kernels="tk")


def test_dropout_is_not_supported_by_tk(fake_tk):
    _, q, k, v = qkv_views(D=16)
    with pytest.raises(TKUnsupportedError, match="dropout"):
        dispatch.attention(q, k, v, causal=True, dropout_p=0.1, kernels="tk")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dispatch.attention(q, k, v, causal=True, dropout_p=0.1, kernels="auto")
        dispatch.attention(q, k, v, causal=True, dropout_p=0.1, kernels="auto")
    assert len(caught) == 1 and "dropout" in str(caught[0].message)
    assert fake_tk.calls == 0
    text = dispatch.describe("auto", device="cpu", head_dim=16, dropout_p=0.1)
    assert "tk in eval" in text and "torch while training" in text


def test_kv_cache_shapes_are_not_sent_to_tk(fake_tk):
    q = torch.randn(1, 2, 1, 16)
    k = v = torch.randn(1, 2, 5, 16)
    with pytest.raises(TKUnsupportedError, match="shape"):
        dispatch.attention(q, k, v, causal=False, kernels="tk")


def test_tk_path_compiles_without_graph_breaks(fake_tk):
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32,
                          kernels="tk"))
    idx = torch.randint(64, (2, 20))
    logits, loss = model(idx, idx)
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
    """A first decision made while tracing (fresh cache, fallback warning) stays in one graph."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32,
                          dropout=0.1, kernels="auto"))
    dispatch.reset()
    idx = torch.randint(64, (2, 20))
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logits, loss = compiled(idx, idx)  # training mode: dropout > 0, so SDPA
        model.eval()
        compiled(idx, idx)  # eval mode: the (stand-in) TK kernel
    assert torch.isfinite(loss)
    assert fake_tk.calls >= 2
    assert len([w for w in caught if "dropout" in str(w.message)]) == 1
