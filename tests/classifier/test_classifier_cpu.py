"""CPU tests of the classifier family: the op's fake (shapes and dtypes under FakeTensorMode), the
chunking rule, the support checks and their messages, and the dispatch (reference path, a
stand-in TK op through dispatch.override, autocast casts, fallbacks, model.py's loss, torch.compile
without graph breaks). The kernel itself is tested on a GPU in test_classifier_gpu.py."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tk_kernels
from tk_kernels import TKUnsupportedError, dispatch, reference
from tk_kernels.families.classifier import ops

pytestmark = pytest.mark.usefixtures("one_torch_thread", "fresh_dispatch")


class StandIn:
    """Stands in for the TK op on CPU: records the arguments, computes with F.cross_entropy."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, weight, targets, ignore_index=-1):
        self.calls.append((x.shape, x.dtype, weight.dtype, targets.shape, ignore_index))
        return F.cross_entropy(F.linear(x, weight).float(), targets, ignore_index=ignore_index)


@pytest.fixture
def stand_in():
    """The TK classifier 'supports' CPU float32/bfloat16 and runs a StandIn (attention stays unsupported
    but is not asked: plans are kernels=auto or the attention check is replaced too)."""
    op = StandIn()
    ok = lambda device, dtype, dims: None
    with dispatch.override("classifier", tk=op, unsupported=ok), dispatch.override("attention", unsupported=ok), \
            dispatch.override("layer_norm", tk=None), dispatch.override("mlp", tk=None):
        yield op


def test_fake_outputs():
    with FakeTensorMode():
        x = torch.empty(37, 24, dtype=torch.bfloat16, device="cuda")
        w = torch.empty(65, 24, dtype=torch.bfloat16, device="cuda")
        t = torch.empty(37, dtype=torch.long, device="cuda")
        loss, dx, dw, scales = torch.ops.tk.linear_cross_entropy_fwd(x, w, t, -1)
    assert loss.shape == () and loss.dtype == torch.float32
    assert dx.shape == x.shape and dx.dtype == x.dtype and dx.is_contiguous()
    assert dw.shape == w.shape and dw.dtype == w.dtype and dw.is_contiguous()
    assert scales.shape == (2,) and scales.dtype == torch.float32


def test_chunk_rows():
    assert ops.chunk_rows(16384, 50304) == 2048  # 206 MB of bf16 logits per chunk
    assert ops.chunk_rows(16384, 50304) * 50304 * 2 <= ops.CHUNK_BYTES
    assert ops.chunk_rows(16384, 65) == 16384 and ops.chunk_rows(7, 50257) == 7
    assert ops.chunk_rows(0, 50304) == 1 and ops.chunk_rows(5000, 65536) == 2048


def test_unsupported_reason_says_what_is_supported():
    dims = {"head_dim": 64, "n_embd": 768, "vocab_size": 50304}
    assert "no CUDA GPU" in ops.unsupported_reason(torch.device("cpu"), torch.bfloat16, dims)
    cuda = torch.device("cuda", 0)
    assert "bfloat16 and float16" in ops.unsupported_reason(cuda, torch.float32, dims)
    assert "vocabulary sizes 1 to 65536" in ops.unsupported_reason(cuda, torch.bfloat16,
                                                                     {**dims, "vocab_size": 100_000})
    if not torch.cuda.is_available():
        assert "no usable CUDA GPU" in ops.unsupported_reason(cuda, torch.bfloat16, dims)


def test_public_op_rejects_bad_inputs_with_one_message():
    x, w, t = torch.randn(4, 8), torch.randn(10, 8), torch.randint(10, (4,))
    with pytest.raises(ValueError, match="CUDA devices only"):
        tk_kernels.linear_cross_entropy(x, w, t)
    assert "must be a torch.Tensor" in ops.tensor_reason([1.0], w, t)
    with FakeTensorMode():  # tensors that claim to be on a GPU: the argument checks alone
        xc, wc, tc = (torch.empty(4, 8, dtype=torch.bfloat16, device="cuda"),
                      torch.empty(10, 8, dtype=torch.bfloat16, device="cuda"),
                      torch.empty(4, dtype=torch.long, device="cuda"))
        assert ops.tensor_reason(xc, wc, tc) is None
        assert "both bfloat16 or both float16" in ops.tensor_reason(xc, wc.float(), tc)
        assert "x (N, C) and weight (V, C)" in ops.tensor_reason(xc, wc[:, :4], tc)
        assert "int64 targets of shape (4,)" in ops.tensor_reason(xc, wc, tc[:3])
        assert "int64 targets" in ops.tensor_reason(xc, wc, tc.int())
        assert "vocabulary sizes" in ops.tensor_reason(xc, torch.empty(70000, 8, dtype=torch.bfloat16,
                                                                       device="cuda"), tc)


def test_torch_mode_is_todays_loss():
    plan = dispatch.plan("torch", "cpu", torch.float32, 16, vocab_size=11, n_embd=8)
    x, w = torch.randn(2, 5, 8), torch.randn(11, 8)
    t = torch.randint(11, (2, 5))
    t[0, 1] = -1
    loss = dispatch.linear_cross_entropy(plan, x, w, t)
    logits = F.linear(x, w)
    assert torch.equal(loss, F.cross_entropy(logits.view(-1, 11), t.view(-1), ignore_index=-1))
    assert torch.equal(reference.linear_cross_entropy(x, w, t), loss)
    assert plan.path("classifier") == "torch"


def test_tk_path_gets_flat_inputs_in_the_autocast_dtype(stand_in):
    plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, vocab_size=11, n_embd=8)
    assert plan.path("classifier") == "tk"
    x, w = torch.randn(2, 5, 8), torch.randn(11, 8, requires_grad=True)
    t = torch.randint(11, (2, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = dispatch.linear_cross_entropy(plan, x, w, t, ignore_index=3)
    assert stand_in.calls == [((10, 8), torch.bfloat16, torch.bfloat16, (10,), 3)]
    loss.backward()
    assert w.grad is not None and w.grad.dtype == torch.float32  # through the cast, into the parameter


def test_inputs_that_do_not_fit_the_plan(stand_in):
    x, w, t = torch.randn(2, 5, 8), torch.randn(11, 8), torch.randint(11, (2, 5))
    plan_tk = dispatch.plan("tk", "cpu", torch.bfloat16, 16)
    with pytest.raises(TKUnsupportedError, match="the plan is for torch.bfloat16"):
        dispatch.linear_cross_entropy(plan_tk, x, w, t)  # no autocast: float32 inputs
    with pytest.raises(TKUnsupportedError, match="do not fit"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            dispatch.linear_cross_entropy(plan_tk, x, w, t[:, :3])
    plan_auto = dispatch.plan("auto", "cpu", torch.bfloat16, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            loss = dispatch.linear_cross_entropy(plan_auto, x, w, t)
    assert len([w for w in caught if "classifier falls back" in str(w.message)]) == 1
    assert torch.equal(loss, reference.linear_cross_entropy(x, w, t)) and stand_in.calls == []


def test_auto_on_cpu_falls_back_with_the_shared_reason():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = dispatch.plan("auto", "cpu", torch.bfloat16, 64, vocab_size=50304, n_embd=768)
    assert plan.path("classifier") == "torch"
    assert len([w for w in caught if "falls back" in str(w.message)]) == 1  # attention's, same reason
    assert "classifier=torch (TK unsupported: same as attention)" in plan.describe()
    with pytest.raises(TKUnsupportedError, match="no CUDA GPU"):
        dispatch.plan("tk", "cpu", torch.bfloat16, 64)


def _tiny_gpt(kernels, seed=0):
    from model import GPT, GPTConfig
    torch.manual_seed(seed)
    return GPT(GPTConfig(block_size=16, vocab_size=37, n_layer=1, n_head=2, n_embd=32, kernels=kernels))


def test_model_loss_under_auto_equals_torch_and_returns_no_logits():
    m_torch, m_auto = _tiny_gpt("torch"), _tiny_gpt("auto")
    idx = torch.randint(37, (2, 16))
    targets = idx.clone()
    targets[1, :5] = -1
    logits_t, loss_t = m_torch(idx, targets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logits_a, loss_a = m_auto(idx, targets)
    assert logits_t.shape == (2, 16, 37) and logits_a is None
    torch.testing.assert_close(loss_a, loss_t)
    loss_a.backward()
    # tied embedding: the classifier's gradient reaches wte (= lm_head) together with the embedding's
    assert m_auto.transformer.wte.weight.grad is m_auto.lm_head.weight.grad
    assert m_auto.lm_head.weight.grad.abs().sum() > 0
    logits, loss = m_auto(idx)  # no targets: the last position's logits, as before
    assert logits.shape == (2, 1, 37) and loss is None


def test_tk_model_compiles_without_graph_breaks(stand_in):
    m = _tiny_gpt("tk")
    with dispatch.override("attention", tk=lambda q, k, v, causal=True, scale=None, dropout_p=0.0:
                           F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)):
        m.plan_kernels(dtype=torch.float32)
        idx = torch.randint(37, (2, 16))
        logits, loss = m(idx, idx)
        assert logits is None and len(stand_in.calls) == 1
        compiled = torch.compile(m, backend="eager", fullgraph=True)  # fullgraph: any break fails
        _, loss_c = compiled(idx, idx)
        torch.testing.assert_close(loss_c, loss)
        loss_c.backward()
        assert m.lm_head.weight.grad is not None and len(stand_in.calls) == 2


class SoftmaxXentStandIn:
    """The extension's softmax_xent_grad_ in PyTorch (its documented contract), so the op's own chunk
    loop runs on a CPU."""

    def __init__(self):
        self.rows = []

    def softmax_xent_grad_(self, logits, targets, row_loss, ignore_index):
        self.rows.append(logits.shape[0])
        keep = targets != ignore_index
        lf = logits.float()
        safe = torch.where(keep, targets, 0)
        row_loss.copy_(torch.where(keep, lf.logsumexp(-1) - lf.gather(1, safe[:, None])[:, 0], 0.0))
        grad = lf.softmax(-1) - F.one_hot(safe, logits.shape[1]).float()
        logits.copy_(grad * keep[:, None])

    def mul_scalar(self, x, s):
        return x * s[0]


@pytest.mark.parametrize("n_rows", [21, 16, 3])
def test_chunk_loop_gives_the_loss_and_gradients(monkeypatch, n_rows):
    """The op's forward body (chunks of 8 rows here: full ones, and a partial last one when n_rows is
    not a multiple of 8) leaves F.cross_entropy's loss and, scaled, its gradients."""
    ext = SoftmaxXentStandIn()
    monkeypatch.setattr(ops, "_ext", lambda: ext)
    monkeypatch.setattr(ops, "CHUNK_BYTES", 8 * 2 * 16 * 2)  # 8 rows of V = 16 16-bit logits
    torch.manual_seed(0)
    x = torch.randn(n_rows, 12, dtype=torch.float64).float().requires_grad_()
    w = torch.randn(16, 12).requires_grad_()
    t = torch.randint(0, 16, (n_rows,))
    t[1] = -1  # one ignored target
    loss, dx, dw, scales = ops.linear_cross_entropy_fwd._init_fn(x.detach(), w.detach(), t, -1)
    rows = ops.chunk_rows(n_rows, 16)
    assert ext.rows == [min(rows, n_rows - s) for s in range(0, n_rows, rows)]
    ref = F.cross_entropy(F.linear(x, w), t, ignore_index=-1)
    ref.backward()
    torch.testing.assert_close(loss, ref.detach())
    torch.testing.assert_close(dx * scales[0], x.grad)
    torch.testing.assert_close(dw * scales[1], w.grad)


@pytest.mark.parametrize("n_rows", [21, 3])
def test_loss_only_op_gives_the_training_ops_loss(monkeypatch, n_rows):
    """tk::linear_cross_entropy_loss (evaluation) walks the same chunks through the kernel and returns the
    training op's loss bitwise, with no gradient GEMMs (torch.mm runs once per chunk: the logits)."""
    ext = SoftmaxXentStandIn()
    monkeypatch.setattr(ops, "_ext", lambda: ext)
    monkeypatch.setattr(ops, "CHUNK_BYTES", 8 * 2 * 16 * 2)
    torch.manual_seed(0)
    x, w = torch.randn(n_rows, 12), torch.randn(16, 12)
    t = torch.randint(0, 16, (n_rows,))
    t[-1] = -1
    want = ops.linear_cross_entropy_fwd._init_fn(x, w, t, -1)[0]
    ext.rows.clear()
    mm_calls = []
    real_mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda *a, **k: mm_calls.append(1) or real_mm(*a, **k))
    got = ops.linear_cross_entropy_loss._init_fn(x, w, t, -1)
    n_chunks = len(range(0, n_rows, ops.chunk_rows(n_rows, 16)))
    assert torch.equal(got, want) and len(ext.rows) == n_chunks and len(mm_calls) == n_chunks
    with FakeTensorMode():
        fake = torch.ops.tk.linear_cross_entropy_loss(torch.empty(5, 8, dtype=torch.bfloat16, device="cuda"),
                                                      torch.empty(16, 8, dtype=torch.bfloat16, device="cuda"),
                                                      torch.empty(5, dtype=torch.long, device="cuda"), -1)
    assert fake.shape == () and fake.dtype == torch.float32


def test_op_picks_the_loss_only_op_when_no_gradient_is_wanted(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.ops.tk, "linear_cross_entropy_fwd",
                        lambda *a: calls.append("train") or (torch.zeros(()),) * 4, raising=False)
    monkeypatch.setattr(torch.ops.tk, "linear_cross_entropy_loss",
                        lambda *a: calls.append("loss") or torch.zeros(()), raising=False)
    x, w, t = torch.randn(4, 8), torch.randn(16, 8, requires_grad=True), torch.zeros(4, dtype=torch.long)
    ops.linear_cross_entropy_op(x, w, t)
    with torch.no_grad():
        ops.linear_cross_entropy_op(x, w, t)
    ops.linear_cross_entropy_op(x, w.detach(), t)
    assert calls == ["train", "loss", "loss"]
