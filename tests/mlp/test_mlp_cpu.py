"""CPU tests of the MLP family: the ops' fakes (shapes and dtypes under FakeTensorMode), the
support checks and their messages, the split-K rule, and the dispatch (reference path, a stand-in TK
op through dispatch.override, autocast casts, fallbacks, model.py's MLP, torch.compile without graph
breaks). The kernels themselves are tested on an H200 in test_mlp_gpu.py."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tk_kernels
from tk_kernels import TKUnsupportedError, dispatch, reference
from tk_kernels.families.mlp import ops

pytestmark = pytest.mark.usefixtures("one_torch_thread", "fresh_dispatch")


class StandIn:
    """Stands in for the TK op on a CPU: records the arguments, computes with the reference."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, w_fc, b_fc, w_proj, b_proj):
        self.calls.append((tuple(x.shape), x.dtype, w_fc.dtype))
        return reference.mlp(x, w_fc.to(x.dtype), None if b_fc is None else b_fc.to(x.dtype),
                             w_proj.to(x.dtype), None if b_proj is None else b_proj.to(x.dtype))


@pytest.fixture
def stand_in():
    op = StandIn()
    ok = lambda device, dtype, dims: None
    with dispatch.override("mlp", tk=op, unsupported=ok, not_used=None), \
            dispatch.override("attention", tk=None), dispatch.override("layer_norm", tk=None), \
            dispatch.override("classifier", tk=None):
        yield op


def test_fake_outputs():
    with FakeTensorMode():
        x = torch.empty(10, 64, dtype=torch.bfloat16)
        w_fc, w_proj = torch.empty(256, 64), torch.empty(64, 256)
        b_fc, b_proj = torch.empty(256), torch.empty(64)
        y, pre, g, wf16, wp16 = ops._mlp_fwd_fake(x, w_fc, b_fc, w_proj, b_proj, "none")
        assert y.shape == (10, 64) and pre.shape == g.shape == (10, 256) and y.dtype == torch.bfloat16
        # the fp32 weights' bf16 casts, saved for the backward; none for weights already in x's dtype
        assert wf16.shape == (256, 64) and wp16.shape == (64, 256) and wf16.dtype == wp16.dtype == torch.bfloat16
        assert ops._mlp_fwd_fake(x, w_fc.bfloat16(), b_fc, w_proj, b_proj, "none")[3].shape == (0,)
        dx, dwf, dbf, dwp, dbp = ops._mlp_bwd_fake(y, x, w_fc, w_proj, pre, g, True, False, "float32",
                                                  "float32")
        assert dx.shape == (10, 64) and dx.dtype == torch.bfloat16
        assert dwf.shape == (256, 64) and dwf.dtype == torch.float32 and dwp.shape == (64, 256)
        assert dbf.shape == (256,) and dbp.shape == (0,)
        y, w16 = ops._linear_fwd_fake(x, w_fc, None)
        assert y.shape == (10, 256) and w16.shape == (256, 64) and w16.dtype == torch.bfloat16
        assert ops._linear_fwd_fake(x, w_fc.bfloat16(), None)[1].shape == (0,)
        dx, dw, db = ops._linear_bwd_fake(y, x, w16, True, "float32", "float32")
        assert dx.shape == (10, 64) and dx.dtype == torch.bfloat16 and dw.dtype == db.dtype == torch.float32
        assert dw.shape == (256, 64) and db.shape == (256,)


def test_tensor_reason_messages():
    x = torch.empty(4, 64, dtype=torch.bfloat16)
    assert ops.tensor_reason(x, torch.empty(256, 64), torch.empty(64, 256)) is None
    assert "multiples of 8" in ops.tensor_reason(x, torch.empty(100, 64), torch.empty(64, 100))
    assert "does not fit" in ops.tensor_reason(x, torch.empty(256, 32), torch.empty(64, 256))
    assert "2-d" in ops.tensor_reason(x[None], torch.empty(256, 64), torch.empty(64, 256))
    assert "bfloat16 and float16" in ops.tensor_reason(x.float(), torch.empty(256, 64), torch.empty(64, 256))
    assert ops.unsupported_reason(torch.device("cpu"), torch.bfloat16, {}).startswith("no CUDA GPU")
    assert "bfloat16 and float16" in ops.unsupported_reason(torch.device("cuda"), torch.float32, {})
    assert "multiple of 8" in ops.unsupported_reason(torch.device("cuda"), torch.bfloat16, {"n_embd": 100})


def test_public_op_on_cpu_is_one_clear_error():
    x = torch.randn(4, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA"):
        tk_kernels.mlp(x, torch.randn(256, 64), None, torch.randn(64, 256), None)
    with pytest.raises(ValueError, match="approximate"):
        tk_kernels.mlp(x, torch.randn(256, 64), None, torch.randn(64, 256), None, approximate="sigmoid")
    with pytest.raises(ValueError, match="CUDA"):
        tk_kernels.linear(x, torch.randn(256, 64))


def test_plan_on_cpu_falls_back_or_raises():
    plan = dispatch.plan("auto", "cpu", torch.bfloat16, 64, warn=False, n_embd=768)
    assert plan.path("mlp") == "torch"
    with pytest.raises(TKUnsupportedError):
        dispatch.plan("tk", "cpu", torch.bfloat16, 64, n_embd=768)


def test_dispatch_casts_under_autocast_and_keeps_shape(stand_in):
    plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, n_embd=32)
    assert plan.path("mlp", training=True) == "tk" and plan.path("mlp") == "torch"  # train-only
    x = torch.randn(2, 5, 32)
    w_fc, b_fc, w_proj, b_proj = torch.randn(128, 32), torch.randn(128), torch.randn(32, 128), torch.randn(32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = dispatch.mlp(plan, x, w_fc, b_fc, w_proj, b_proj)
    assert y.shape == (2, 5, 32) and y.dtype == torch.bfloat16
    assert stand_in.calls == [((10, 32), torch.bfloat16, torch.float32)]  # x cast, weights left to the op


def test_dispatch_falls_back_with_one_warning_in_auto(stand_in):
    plan = dispatch.plan("auto", "cpu", torch.bfloat16, 16, n_embd=32)
    x = torch.randn(3, 36)  # width 36: not a multiple of 8
    w_fc, w_proj = torch.randn(144, 36), torch.randn(36, 144)
    with torch.autocast("cpu", dtype=torch.bfloat16), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y1 = dispatch.mlp(plan, x, w_fc, None, w_proj, None)
        dispatch.mlp(plan, x, w_fc, None, w_proj, None)
    assert len([w for w in caught if "multiples of 8" in str(w.message)]) == 1
    assert stand_in.calls == []
    with torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(y1, reference.mlp(x, w_fc, None, w_proj, None))
    tk_plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, n_embd=32)
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(TKUnsupportedError, match="multiples of 8"):
        dispatch.mlp(tk_plan, x, w_fc, None, w_proj, None)


def _tiny_tk_gpt():
    """A 2-layer kernels=tk GPT of width 32 (seeded) and a (2, 16) batch of token ids for it."""
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True,
                      kernels="tk"))
    return m, torch.randint(0, 64, (2, 16))


def test_model_mlp_runs_the_planned_op_and_compiles_without_breaks(stand_in):
    m, idx = _tiny_tk_gpt()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plan = m.plan_kernels(torch.device("cpu"), torch.bfloat16)
        assert plan.path("mlp", training=True) == "tk"
        logits, _ = m(idx)
        assert len(stand_in.calls) == 2  # one per block
        torch._dynamo.reset()
        compiled = torch.compile(m, fullgraph=True, backend="eager")
        logits_c, _ = compiled(idx)
    torch.testing.assert_close(logits_c, logits)


def test_the_tk_mlp_is_train_only(stand_in):
    """In eval (evaluation, sampling) the model's MLP is the reference op: the TK forward's extra
    pre-activation output and per-call weight casts only pay in the train step."""
    m, idx = _tiny_tk_gpt()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plan = m.plan_kernels(torch.device("cpu"), torch.bfloat16)
        assert "mlp=tk while training, torch in eval" in plan.describe()
        m.eval()
        logits_eval, _ = m(idx)
        assert stand_in.calls == []
        m.train()
        logits_train, _ = m(idx)
        assert len(stand_in.calls) == 2  # one per block
    torch.testing.assert_close(logits_train, logits_eval)  # the stand-in computes with the reference


def test_gpus_without_the_hopper_gemm_keep_the_mlp_on_pytorch(stand_in, monkeypatch):
    """kernels=tk on a GPU the MLP's GEMM does not support: the other families run theirs and the MLP is
    PyTorch's, without an error or a warning; the plan says why."""
    note = "its GEMM runs on Hopper GPUs (compute capability 9.0) only; this GPU has 8.0, where the MLP is PyTorch's"
    with dispatch.override("mlp", not_used_on=lambda device: note):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, n_embd=32)
        assert plan.path("mlp") == plan.path("mlp", training=True) == "torch"
        assert f"mlp=torch (TK kernel not used: {note})" in plan.describe()
        x, w_fc, w_proj = torch.randn(3, 32), torch.randn(128, 32), torch.randn(32, 128)
        torch.testing.assert_close(dispatch.mlp(plan, x, w_fc, None, w_proj, None),
                                   reference.mlp(x, w_fc, None, w_proj, None))
        assert stand_in.calls == []
    # the registry's check itself, on a stand-in CUDA device
    cuda0 = torch.device("cuda", 0)
    assert ops.not_used_on(torch.device("cpu")) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for cap, expect in [((8, 0), note), ((8, 9), note.replace("8.0", "8.9")), ((10, 0), note.replace("8.0", "10.0")),
                        ((9, 0), None)]:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None, cap=cap: cap)
        assert ops.not_used_on(cuda0) == expect


class LinearStandIn:
    """Stands in for the TK linear op (the attention's projections) on a CPU: records, computes with F.linear."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, w, b):
        self.calls.append((tuple(x.shape), x.dtype, w.dtype, tuple(w.shape)))
        return F.linear(x, w.to(x.dtype), None if b is None else b.to(x.dtype))


def test_model_projections_run_the_planned_linear_op_while_training(stand_in):
    """Under the MLP's TK choice the attention's c_attn and c_proj go through the family's linear op (x cast to the
    autocast dtype, the fp32 weights left to the op), only while training; the same logits as F.linear, and
    torch.compile traces it without a break. Replacing the family's tk (stand_in) without a tk_linear leaves the
    projections on F.linear."""
    m, idx = _tiny_tk_gpt()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m.plan_kernels(torch.device("cpu"), torch.bfloat16)
        logits_before, _ = m(idx)  # no tk_linear under stand_in: F.linear
    lin = LinearStandIn()
    with dispatch.override("mlp", tk=stand_in, tk_linear=lin, unsupported=lambda device, dtype, dims: None,
                           not_used=None):
        m.kernel_plan = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            m.plan_kernels(torch.device("cpu"), torch.bfloat16)
            logits, _ = m(idx)
            assert lin.calls == [((32, 32), torch.bfloat16, torch.float32, (96, 32)),
                                 ((32, 32), torch.bfloat16, torch.float32, (32, 32))] * 2
            m.eval()
            m(idx)
            assert len(lin.calls) == 4  # eval: F.linear
            m.train()
            torch._dynamo.reset()
            compiled = torch.compile(m, fullgraph=True, backend="eager")
            logits_c, _ = compiled(idx)
            assert len(lin.calls) == 8
    torch.testing.assert_close(logits, logits_before)
    torch.testing.assert_close(logits_c, logits)


def test_dispatch_linear_falls_back_and_keeps_shape(stand_in):
    """dispatch.linear takes the nn.Linear layer: the TK op gets its weight and bias (x cast, shape kept); the
    fallback (kernels=auto, one warning) and the non-TK path call the layer itself, forward hooks included."""
    lin = LinearStandIn()
    with dispatch.override("mlp", tk=stand_in, tk_linear=lin, unsupported=lambda device, dtype, dims: None,
                           not_used=None):
        plan = dispatch.plan("auto", "cpu", torch.bfloat16, 16, n_embd=32)
        layer = torch.nn.Linear(32, 96)
        x = torch.randn(2, 5, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = dispatch.linear(plan, layer, x)
            torch.testing.assert_close(y, layer(x))
        assert y.shape == (2, 5, 96) and y.dtype == torch.bfloat16 and len(lin.calls) == 1
        layer36 = torch.nn.Linear(36, 72, bias=False)  # width 36: not a multiple of 8
        hooked = []
        layer36.register_forward_hook(lambda module, args, out: hooked.append(out.shape))
        x36 = torch.randn(3, 36)
        with torch.autocast("cpu", dtype=torch.bfloat16), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y1 = dispatch.linear(plan, layer36, x36)
            dispatch.linear(plan, layer36, x36, training=False)  # eval: the layer, no warning
            dispatch.linear(plan, layer36, x36)
        assert len([w_ for w_ in caught if "multiples of 8" in str(w_.message)]) == 1 and len(lin.calls) == 1
        assert hooked == [(3, 72)] * 3  # every fallback call ran the module, hooks and all
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.testing.assert_close(y1, layer36(x36))
        tk_plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, n_embd=32)
        with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(TKUnsupportedError, match="multiples of 8"):
            dispatch.linear(tk_plan, layer36, x36)


def test_the_registry_routes_the_projections_to_the_linear_op():
    """The model's projections reach tk::linear_fwd / _bwd (the registry's entry, which the stand-in tests above
    replace), and an override of the family's tk without a tk_linear leaves them on their layers."""
    assert dispatch.FAMILIES["mlp"].tk_linear is ops.linear_op
    with dispatch.override("mlp", tk=lambda *args: None):
        assert dispatch.FAMILIES["mlp"].tk_linear is None


def test_kernels_torch_mlp_is_nanogpt_exactly():
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=1, n_head=2, n_embd=32, dropout=0.0, bias=True,
                      kernels="torch"))
    mlp = m.transformer.h[0].mlp
    x = torch.randn(2, 5, 32)
    plan = m.plan_kernels(torch.device("cpu"), torch.float32)
    expect = mlp.c_proj(F.gelu(mlp.c_fc(x)))
    torch.testing.assert_close(mlp(x, plan), expect, rtol=0, atol=0)
