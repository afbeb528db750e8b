"""CPU tests of the optimizer family: tk_kernels.AdamW's host side (the step count, the folded bias corrections,
the clipping protocol, skipped parameters, the state format) against torch.optim.AdamW + clip_grad_norm_, with a
stand-in for the kernel that follows the launcher's contract in PyTorch ops; the support checks and their
messages; dispatch.adamw / dispatch.clip_grad_norm_ and model.configure_optimizers. The kernel itself is tested
on a GPU in test_optim_gpu.py."""

import warnings

import pytest
import torch

import tk_kernels
from tk_kernels import TKUnsupportedError, dispatch
from tk_kernels.families.optim import ops

pytestmark = pytest.mark.usefixtures("one_torch_thread", "fresh_dispatch")


class StandInExt:
    """The extension's adamw_step_ in PyTorch ops on the tensors' own dtype: the launcher's contract (optim.h)."""

    def __init__(self):
        self.calls = 0

    def adamw_step_(self, params, grads, exp_avgs, exp_avg_sqs, hyper, max_norm, copies=()):
        self.calls += 1
        self.copies = list(copies)
        assert len(hyper) == 6 * len(params) and len(copies) in (0, len(params))
        norm, scale = None, 1.0
        if max_norm > 0:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            scale = min(1.0, max_norm / (norm.item() + 1e-6))
        for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
            decay, step_size, bc2_sqrt, beta1, beta2, eps = hyper[6 * i:6 * i + 6]
            g = g * scale
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            p.mul_(decay).addcdiv_(m, v.sqrt() / bc2_sqrt + eps, value=-step_size)
            if copies and copies[i].numel():
                copies[i].copy_(p)
        return norm


@pytest.fixture
def stand_in(monkeypatch):
    ext = StandInExt()
    monkeypatch.setattr(ops, "_ext", lambda: ext)
    monkeypatch.setattr(ops, "param_reason", lambda p: None)  # CPU float64 parameters, for exact comparisons
    return ext


def make_params(seed, shapes=((7, 5), (5,), (3, 4, 2), (1,), (6,))):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g, dtype=torch.float64)) for s in shapes]


def groups_of(params, lr=None):
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0, **({"lr": lr} if lr else {})}]


def set_grads(params, seed, scale, skip=()):
    g = torch.Generator().manual_seed(seed)
    for i, p in enumerate(params):
        p.grad = None if i in skip else torch.randn(p.shape, generator=g, dtype=p.dtype) * scale


@pytest.mark.parametrize("max_norm", [0.0, 0.5, 1e6])
def test_steps_match_torch_adamw_with_clip_grad_norm(stand_in, max_norm):
    ours, theirs = make_params(1), make_params(1)
    hp = dict(lr=3e-2, betas=(0.8, 0.95), eps=1e-6)
    opt = ops.AdamW(groups_of(ours, lr=5e-2), **hp)
    ref = torch.optim.AdamW(groups_of(theirs, lr=5e-2), **hp, foreach=False)
    for step in range(4):
        skip = (1,) if step == 1 else ()  # a parameter without a gradient: skipped, its step count not advanced
        for ps in (ours, theirs):
            set_grads(ps, 10 + step, scale=3.0, skip=skip)
        if step == 2:  # a schedule changes lr between steps
            for o in (opt, ref):
                o.param_groups[0]["lr"] = 1e-2
        ref_norm = torch.nn.utils.clip_grad_norm_(theirs, max_norm) if max_norm > 0 else None
        grads_before = [None if p.grad is None else p.grad.clone() for p in ours]
        dispatch.clip_grad_norm_(opt, ours, max_norm)
        opt.step()
        ref.step()
        for p, before in zip(ours, grads_before):  # ours leaves the gradients as they were
            assert (p.grad is None and before is None) or torch.equal(p.grad, before)
        if max_norm > 0:
            torch.testing.assert_close(opt.grad_norm, ref_norm, rtol=1e-12, atol=0)
        assert opt.max_grad_norm is None  # used up by the step
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
            sa, sb = opt.state[a], ref.state[b]
            assert sa["step"].device.type == "cpu" and float(sa["step"]) == float(sb["step"])
            for k in ("exp_avg", "exp_avg_sq"):
                torch.testing.assert_close(sa[k], sb[k], rtol=1e-12, atol=1e-14)
    assert float(opt.state[ours[1]]["step"]) == 3.0 and float(opt.state[ours[0]]["step"]) == 4.0
    assert stand_in.calls == 4


def test_no_gradients_no_call(stand_in):
    params = make_params(2)
    opt = ops.AdamW(params, lr=1e-3)
    opt.clip_grad_norm_(1.0)
    opt.step()
    assert stand_in.calls == 0 and not opt.state and opt.max_grad_norm is None


def test_step_runs_the_closure(stand_in):
    params = make_params(3)
    opt = ops.AdamW(params, lr=1e-3)

    def closure():
        opt.zero_grad()
        loss = sum((p ** 2).sum() for p in params)
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss is not None and stand_in.calls == 1


def test_state_dict_interchangeable_with_torch(stand_in):
    """Ours -> torch.optim.AdamW and torch (steps on any device) -> ours continue identically."""
    a, b = make_params(4), make_params(4)
    ours = ops.AdamW(groups_of(a), lr=1e-2)
    ref = torch.optim.AdamW(groups_of(b), lr=1e-2, foreach=False)
    for ps, o in ((a, ours), (b, ref)):
        set_grads(ps, 5, 1.0)
        o.step()
    # swap the states: each optimizer continues from the other's
    ours2 = ops.AdamW(groups_of(a), lr=1e-2)
    ours2.load_state_dict(ref.state_dict())
    ref2 = torch.optim.AdamW(groups_of(b), lr=1e-2, foreach=False)
    ref2.load_state_dict(ours.state_dict())
    for ps, o in ((a, ours2), (b, ref2)):
        set_grads(ps, 6, 1.0)
        o.step()
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-14)
        assert float(ours2.state[x]["step"]) == 2.0


def test_unsupported_options_raise_one_clear_error(stand_in):
    params = make_params(5)
    set_grads(params, 1, 1.0)
    for option, value, words in (("amsgrad", True, "amsgrad=True"), ("maximize", True, "maximize=True"),
                                 ("lr", torch.tensor(1e-3), "tensor lr")):
        opt = ops.AdamW(params, lr=1e-3)
        opt.param_groups[0][option] = value
        with pytest.raises(TKUnsupportedError, match=words):
            opt.step()
    opt = ops.AdamW(params, lr=1e-3)
    params[0].grad = params[0].grad.to_sparse()
    with pytest.raises(TKUnsupportedError, match="sparse"):
        opt.step()


def test_capture_raises_instead_of_freezing_the_hyperparameters(stand_in, monkeypatch):
    params = make_params(8)
    set_grads(params, 2, 1.0)
    opt = ops.AdamW(params, lr=1e-3)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(TKUnsupportedError, match="cannot be captured in a CUDA graph"):
        opt.step()
    assert stand_in.calls == 0


def test_param_reasons_name_the_problem():
    assert "CUDA" in ops.param_reason(torch.nn.Parameter(torch.zeros(3)))
    assert ops.params_reason([torch.nn.Parameter(torch.zeros(3))]) == ops.param_reason(torch.zeros(3))
    assert ops.options_reason({"lr": 1e-3, "capturable": True}) == "capturable=True is not supported"
    assert ops.options_reason({"lr": 1e-3}) is None


def test_param_reasons_on_cuda_tensors_without_a_gpu(monkeypatch):
    """The dtype / layout checks, on meta tensors that claim to be CUDA tensors' shapes (no GPU needed)."""
    class Fake:
        def __init__(self, dtype=torch.float32, contiguous=True, grad=None):
            self.device, self.dtype, self.shape, self.grad = torch.device("cuda", 0), dtype, (2, 3), grad
            self._c = contiguous

        def is_contiguous(self):
            return self._c

        def stride(self):
            return (1, 2)
    assert "float32" in ops.param_reason(Fake(torch.bfloat16))
    assert "contiguous" in ops.param_reason(Fake(contiguous=False))
    assert ops.param_reason(Fake()) is None
    assert "gradients" in ops.param_reason(Fake(grad=torch.zeros(2, 3, dtype=torch.float16)))
    monkeypatch.setattr(ops, "param_reason", lambda p: None)
    two = [Fake(), Fake()]
    two[1].device = torch.device("cuda", 1)
    assert "one device" in ops.params_reason(two)


def test_dispatch_adamw_per_mode_on_cpu(monkeypatch):
    model = torch.nn.Linear(4, 3)
    groups = [{"params": [model.weight], "weight_decay": 0.1}, {"params": [model.bias], "weight_decay": 0.0}]
    opt = dispatch.adamw("torch", groups, 1e-3, (0.9, 0.95))
    assert type(opt) is torch.optim.AdamW and not opt.defaults.get("fused")
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
    with pytest.warns(UserWarning, match="optimizer falls back to PyTorch: no CUDA GPU"):
        assert type(dispatch.adamw("auto", list(model.parameters()), 1e-3, (0.9, 0.95))) is torch.optim.AdamW
    # an iterator of parameters (model.parameters(), as torch.optim takes it) is read once and handed on whole
    opt = dispatch.adamw("torch", model.parameters(), 1e-3, (0.9, 0.95))
    assert [p for g in opt.param_groups for p in g["params"]] == list(model.parameters())
    with pytest.raises(TKUnsupportedError, match="kernels=tk: the TK optimizer kernel cannot run here: no CUDA"):
        dispatch.adamw("tk", groups, 1e-3, (0.9, 0.95))
    with pytest.raises(ValueError, match="kernels must be one of"):
        dispatch.adamw("tkk", groups, 1e-3, (0.9, 0.95))
    monkeypatch.setenv("TK_TORCH_FAMILIES", "optimizer")  # kept on PyTorch: no error, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert type(dispatch.adamw("tk", groups, 1e-3, (0.9, 0.95))) is torch.optim.AdamW
    monkeypatch.setenv("TK_TORCH_FAMILIES", "optimiser")
    with pytest.raises(TKUnsupportedError, match="unknown family optimiser; the families are .*optimizer"):
        dispatch.adamw("tk", groups, 1e-3, (0.9, 0.95))


def test_as_param_groups_keeps_the_groups():
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))
    assert tk_kernels.reference.as_param_groups(iter([a, b])) == [{"params": [a, b]}]
    groups = tk_kernels.reference.as_param_groups(({"params": iter([a]), "lr": 0.5}, {"params": (b,)}))
    assert groups == [{"params": [a], "lr": 0.5}, {"params": [b]}]


def test_dispatch_adamw_picks_ours_where_supported(monkeypatch):
    monkeypatch.setattr(dispatch, "OPTIMIZER", dispatch.Family(
        "optimizer", dispatch.OPTIMIZER.reference, ops.AdamW, lambda device, dtype, dims: None))
    monkeypatch.setattr(ops, "param_reason", lambda p: None)
    params = make_params(6)
    opt = dispatch.adamw("tk", groups_of(params), 2e-3, (0.9, 0.95), eps=1e-7)
    assert isinstance(opt, tk_kernels.AdamW) and opt.defaults["lr"] == 2e-3 and opt.defaults["eps"] == 1e-7
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


def test_dispatch_clip_grad_norm_per_optimizer(stand_in):
    params = make_params(7)
    set_grads(params, 3, 10.0)
    before = [p.grad.clone() for p in params]
    dispatch.clip_grad_norm_(torch.optim.AdamW(params), params, 1.0)  # torch's: scales the grads in place
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))
    assert abs(total.item() - 1.0) < 1e-6
    set_grads(params, 3, 10.0)
    ours = ops.AdamW(params)
    dispatch.clip_grad_norm_(ours, params, 1.0)  # ours: at the next step
    assert ours.max_grad_norm == 1.0 and all(torch.equal(p.grad, b) for p, b in zip(params, before))
    ours.clip_grad_norm_(0.0)
    assert ours.max_grad_norm is None


def test_configure_optimizers_on_cpu():
    from model import GPT, GPTConfig
    cfg = dict(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32, dropout=0.0)
    for kernels in ("torch", "auto"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = GPT(GPTConfig(**cfg, kernels=kernels)).configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
        assert type(opt) is torch.optim.AdamW
        assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


def test_keep_copies_hands_the_kernel_one_entry_per_updated_parameter(stand_in):
    """keep_copies: the step passes the kernel one copy per parameter it updates (an empty tensor for those
    without one), none at all when no parameter has one; the stand-in writes them as the kernel does."""
    ps = make_params(3)
    opt = tk_kernels.AdamW(groups_of(ps), lr=1e-2)
    set_grads(ps, 4, 1.0, skip=(1,))
    opt.step()
    assert stand_in.copies == []
    copies = {ps[0]: torch.zeros(ps[0].shape, dtype=torch.bfloat16), ps[4]: torch.zeros(6, dtype=torch.float16)}
    opt.keep_copies(copies)
    set_grads(ps, 5, 1.0, skip=(1,))
    opt.step()
    order = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    assert [c.numel() for c in stand_in.copies] == [copies[p].numel() if p in copies else 0 for p in order]
    for p, c in copies.items():
        assert torch.equal(c, p.detach().to(c.dtype))
    with pytest.raises(tk_kernels.TKUnsupportedError, match="not this optimizer's"):
        opt.keep_copies({torch.nn.Parameter(torch.zeros(2)): torch.zeros(2, dtype=torch.bfloat16)})
