"""CPU tests of the 16-bit weight copies (GPT.keep_weight16, dispatch.weight_copy): which layers get one, that the
ops receive them equal to the weights rounded to the compute dtype (after construction, after every optimizer step,
after an in-place edit the optimizer did not make), that a compiled forward reads them without a graph break, and
that checkpoints do not carry them. The TK ops are stand-ins here (dispatch.override) that record what they get;
tk_kernels.AdamW writing the copies in its kernel is tested in tests/optim/test_optim_gpu.py, the model's training
with them in tests/train/test_cuda_graphs_gpu.py."""

import pytest
import torch
import torch.nn.functional as F

from tk_kernels import dispatch, reference

pytestmark = pytest.mark.usefixtures("one_torch_thread", "fresh_dispatch")


class Recorder:
    """Stand-ins for the MLP, linear and classifier TK ops: compute with the reference from the copy when one
    comes (else from the weight cast), and record, per call, the weight copies received and whether each equals
    its weight rounded to the compute dtype at call time."""

    def __init__(self):
        self.calls = []

    def _take(self, kind, w, copy, dtype):
        if copy is None or torch.compiler.is_compiling():  # (a data-dependent check would break the graph)
            fresh = None
        else:
            fresh = bool(torch.equal(copy, w.detach().to(dtype)))
        self.calls.append((kind, copy is not None, fresh))
        cast = w.to(dtype)
        # the copy's values with the gradient going to w, as the TK ops' autograd does
        return cast if copy is None else cast + (copy - cast).detach()

    def mlp(self, x, w_fc, b_fc, w_proj, b_proj, copy_fc=None, copy_proj=None):
        wf, wp = self._take("mlp", w_fc, copy_fc, x.dtype), self._take("mlp", w_proj, copy_proj, x.dtype)
        return reference.mlp(x, wf, None if b_fc is None else b_fc.to(x.dtype), wp,
                             None if b_proj is None else b_proj.to(x.dtype))

    def linear(self, x, w, b, copy=None):
        return F.linear(x, self._take("linear", w, copy, x.dtype), None if b is None else b.to(x.dtype))

    def classifier(self, x, weight, targets, ignore_index=-1, copy=None):
        w = weight if copy is None else self._take("classifier", weight, copy, x.dtype)
        return F.cross_entropy(F.linear(x, w).float(), targets, ignore_index=ignore_index)


@pytest.fixture
def recorder():
    r = Recorder()
    ok = lambda device, dtype, dims: None
    with dispatch.override("mlp", tk=r.mlp, tk_linear=r.linear, unsupported=ok, not_used=None), \
            dispatch.override("classifier", tk=r.classifier, unsupported=ok), \
            dispatch.override("attention", tk=None), dispatch.override("layer_norm", tk=None):
        yield r


def _tiny(kernels="tk"):
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    m = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True,
                      kernels=kernels))
    idx, targets = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))
    return m, idx, targets


def _step(m, opt, idx, targets):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, loss = m(idx, targets)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def test_copies_follow_the_weights_through_steps_and_edits(recorder):
    m, idx, targets = _tiny()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m.plan_kernels(torch.device("cpu"), torch.bfloat16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)  # not tk_kernels.AdamW: the copies come from its step hook
    assert m.keep_weight16(opt) == 2 * 4 + 1  # four projections a block, lm_head
    copies = {n: b for n, b in m.named_buffers() if n.endswith("weight16")}
    assert len(copies) == 9 and all(b.dtype == torch.bfloat16 for b in copies.values())
    assert not any(k.endswith("weight16") for k in m.state_dict())  # checkpoints do not carry them
    for _ in range(3):
        recorder.calls.clear()
        _step(m, opt, idx, targets)
        # every projection (2 linears + the MLP's 2 weights per block) and the classifier got its copy, fresh
        assert recorder.calls == [("linear", True, True)] * 2 + [("mlp", True, True)] * 2 + \
            [("linear", True, True)] * 2 + [("mlp", True, True)] * 2 + [("classifier", True, True)]
    for name, mod in m.named_modules():
        if hasattr(mod, "weight16"):
            assert torch.equal(mod.weight16, mod.weight.detach().bfloat16()), name
    # an in-place change the optimizer did not make: the eager forward sees the version and recasts
    with torch.no_grad():
        m.transformer.h[0].mlp.c_fc.weight.mul_(0.5)
        m.lm_head.weight.add_(1.0)
    recorder.calls.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        m(idx, targets)
    assert all(fresh for _, given, fresh in recorder.calls) and len(recorder.calls) == 9


def test_the_model_with_copies_computes_what_it_computes_without(recorder):
    """Same seed, same steps: the losses and weights are bitwise those of the model without copies (a copy is the
    cast autocast would make), eager and compiled (fullgraph: reading the copies breaks no graph)."""
    results = []
    for keep in (False, True):
        m, idx, targets = _tiny()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            m.plan_kernels(torch.device("cpu"), torch.bfloat16)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        if keep:
            m.keep_weight16(opt)
        torch._dynamo.reset()
        compiled = torch.compile(m, fullgraph=True, backend="eager")
        losses = [_step(m, opt, idx, targets).item() for _ in range(2)]
        losses += [_step(compiled, opt, idx, targets).item() for _ in range(2)]
        results.append((losses, [p.detach().clone() for p in m.parameters()]))
    assert results[0][0] == results[1][0]
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))


def test_which_layers_get_copies(recorder):
    # kernels=torch: no TK op reads weights, nothing to keep
    m, _, _ = _tiny("torch")
    m.plan_kernels(torch.device("cpu"), torch.bfloat16)
    assert m.keep_weight16(torch.optim.AdamW(m.parameters())) == 0
    assert not any(n.endswith("weight16") for n, _ in m.named_buffers())
    # fp32 compute: the GEMMs read the weights themselves
    m, _, _ = _tiny()
    m.plan_kernels(torch.device("cpu"), torch.float32)
    assert m.keep_weight16(torch.optim.AdamW(m.parameters())) == 0
    # the MLP family kept on PyTorch: only lm_head's copy
    with dispatch.override("mlp", tk=None):
        m, _, _ = _tiny()
        m.plan_kernels(torch.device("cpu"), torch.bfloat16)
        assert m.keep_weight16(torch.optim.AdamW(m.parameters())) == 1
        assert [n for n, _ in m.named_buffers()] == ["lm_head.weight16"]
    m, _, _ = _tiny()
    with pytest.raises(RuntimeError, match="plan_kernels"):
        m.keep_weight16(torch.optim.AdamW(m.parameters()))


def test_a_copy_of_another_dtype_or_shape_is_not_used(recorder):
    """dispatch hands an op the copy only where it stands for the cast the op would make (the plan's dtype, the
    weight's shape); otherwise the op casts, as without copies."""
    plan = dispatch.plan("tk", "cpu", torch.bfloat16, 16, n_embd=32)
    layer = torch.nn.Linear(32, 64)
    layer.register_buffer("weight16", layer.weight.detach().half(), persistent=False)
    layer.weight16_version = layer.weight._version
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dispatch.linear(plan, layer, torch.randn(3, 32))
    assert recorder.calls == [("linear", False, None)]
