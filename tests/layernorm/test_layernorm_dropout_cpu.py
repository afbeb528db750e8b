"""The LayerNorm family's dropout on delta without a GPU: the Python keep mask
(tk_kernels/families/layernorm/dropout_reference.py) against the kernels' own C++ chunk function compiled
as host code (csrc/dropout.cuh, with nvcc), its statistics; the fakes, the autograd glue and the custom-op
path of tk::dropout_add_layer_norm_fwd / _bwd with a float64 stand-in extension; the dispatch
(dispatch.add_layer_norm(..., dropout_p)) and model.py's wiring of the residual dropout into the fused add,
with stand-in kernels. The kernels themselves: test_layernorm_dropout_gpu.py."""

import math
import random
import subprocess
import types
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import tk_kernels
from model import GPT, GPTConfig
from tk_kernels import TKUnsupportedError, dispatch, philox_reference, reference
from tk_kernels.families.attention import dropout_reference as attention_ref
from tk_kernels.families.layernorm import dropout_reference as ref
from tk_kernels.families.layernorm import ops as ln
from host_code import compile_host_program

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16

pytestmark = pytest.mark.usefixtures("fresh_dispatch")


# -----------------------------------------------------------------------------
# the mask

def test_keep_mask_is_the_per_element_definition():
    rnd = random.Random(7)
    for seed, offset, rows, cols in ((1337, 0, 3, 64), (2**63 + 5, 2**32 + 8, 2, 200), (rnd.getrandbits(64), 44, 1, 8)):
        m = ref.keep_mask(seed, offset, rows, cols, 0.3)
        assert m.shape == (rows, cols) and m.dtype == torch.bool
        for i in range(rows * cols):
            assert bool(m.view(-1)[i]) == ref.keep_element(seed, offset, i, 0.3), (seed, offset, i)


def test_keep_mask_statistics():
    """1.6e6 elements: the kept fraction within 4 sigma of 1 - p (the threshold's 2^-17 bias is far below
    sigma here); two offsets agree like independent bits; p = 0 keeps all."""
    rows, cols = 2000, 800
    n = rows * cols
    for p in (0.1, 0.2, 0.5):
        m1 = ref.keep_mask(1234, 8, rows, cols, p)
        kept = m1.double().mean().item()
        sigma = math.sqrt(p * (1 - p) / n)
        assert abs(kept - (1 - p)) < 4 * sigma, (p, kept)
        m2 = ref.keep_mask(1234, 12, rows, cols, p)
        agree = (m1 == m2).double().mean().item()
        assert abs(agree - (p * p + (1 - p) ** 2)) < 4 * math.sqrt(0.25 / n)
    assert ref.keep_mask(1, 0, 4, 64, 0.0).all()


def test_counters_stay_apart_from_the_attention_family():
    """Counter word 1 has bit 30 set and bit 31 clear here (any chunk below 2^62), bit 31 set in the
    attention's: the same (seed, offset) never gives the two families the same counter."""
    assert ref.COUNTER_TAG == 1 << 30
    for chunk in (0, 1, 2**32 - 1, 2**32, 2**61 + 12345):
        c1 = ref.COUNTER_TAG | (chunk >> 32)
        assert c1 >> 30 == 1
    assert attention_ref.philox4x32_10 is philox_reference.philox4x32_10  # one Python Philox for both


HOST_PROGRAM = r'''
#include <cstdio>
#include "dropout.cuh"
// reads 'seed offset p index' lines; prints 'keep bits8 w0 w1 w2 w3 threshold scale' per line: dropout_keep of
// the element, dropout_bits8 of its chunk (the kernels' path), the chunk's Philox words
int main() {
  unsigned long long seed, offset, index;
  float p;
  while (scanf("%llu %llu %f %llu", &seed, &offset, &p, &index) == 4) {
    const unsigned thr = tk::dropout_threshold(p);
    const tk::dropout_key d = tk::make_dropout_key(seed, offset, thr);
    const tk::philox4 r = tk_ln::dropout_chunk_words(d, index >> 3);
    printf("%d %u %u %u %u %u %u %a\n", int(tk_ln::dropout_keep(d, index)),
           tk_ln::dropout_bits8(d, thr << 16, index >> 3), r.x, r.y, r.z, r.w, thr, tk_ln::dropout_keep_scale(p));
  }
  return 0;
}
'''


def test_cpp_chunk_function_matches_python(tmp_path):
    exe = compile_host_program(tmp_path, "keep", HOST_PROGRAM, "layernorm")
    rnd = random.Random(4321)
    cases = []
    for _ in range(300):
        seed = rnd.choice([0, 1337, 2**63 + 5, rnd.getrandbits(64)])
        offset = rnd.choice([0, 4, 2**32 + 8, rnd.getrandbits(64)])
        p = rnd.choice([0.1, 0.2, 0.5, 0.9])
        index = rnd.choice([rnd.randrange(2**20), rnd.randrange(2**40), rnd.randrange(2**62)])
        cases.append((seed, offset, p, index))
    cases += [(1337, 12, 0.2, i) for i in (0, 7, 8, 2**35 + 3)]
    stdin = "".join(f"{s} {o} {p} {i}\n" for s, o, p, i in cases)
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(cases)
    for (seed, offset, p, index), line in zip(cases, out):
        keep, bits8, w0, w1, w2, w3, thr, scale = line.split()
        k0, k1, c3 = philox_reference.key(seed, offset)
        chunk = index >> 3
        want = philox_reference.philox4x32_10((chunk & 0xFFFFFFFF, (1 << 30) | (chunk >> 32), 0, c3), (k0, k1))
        assert tuple(map(int, (w0, w1, w2, w3))) == want, (seed, offset, index)
        assert int(thr) == philox_reference.threshold(p)
        assert int(keep) == int(ref.keep_element(seed, offset, index, p))
        assert (int(bits8) >> (index & 7)) & 1 == int(keep)  # the kernels' chunk bits: the same bit
        want_bits = sum(int(ref.keep_element(seed, offset, chunk * 8 + j, p)) << j for j in range(8))
        assert int(bits8) == want_bits
        assert float.fromhex(scale) == ln.keep_scale(p)


def test_keep_scale():
    assert ln.keep_scale(0.2) == 1.25 and ln.keep_scale(0.5) == 2.0
    assert ln.keep_scale(0.1) == torch.tensor(1 / (1 - 0.1), dtype=F32).item()


# -----------------------------------------------------------------------------
# fakes, autograd glue, the custom-op path with a float64 stand-in extension

def test_fake_shapes():
    with FakeTensorMode():
        x = torch.empty(3, 5, 96, device="cuda")
        d = torch.empty(3, 5, 96, dtype=BF16, device="cuda")
        w = torch.empty(96, device="cuda")
        y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, None, 1e-5, BF16, 0.2)
        assert y.shape == s.shape == (3, 5, 96) and y.dtype == BF16 and s.dtype == F32
        assert mean.shape == rstd.shape == (3, 5) and rng.shape == (2,) and rng.dtype == torch.int64
        dy = torch.empty(3, 5, 96, dtype=BF16, device="cuda")
        for delta_dtype, has_bias in ((BF16, True), (F32, False)):
            dx, dd, dw, db, ddb = torch.ops.tk.dropout_add_layer_norm_bwd(dy, s, s, mean, rstd, w, has_bias,
                                                                          delta_dtype, 0.2, rng, has_bias)
            assert dx.shape == dd.shape == (3, 5, 96) and dx.dtype == F32 and dd.dtype == delta_dtype
            assert dw.shape == (96,) and db.shape == ddb.shape == ((96,) if has_bias else (0,))


class Float64DropoutExt:
    """A stand-in for the compiled extension's dropout functions, computing in float64 on CPU with the mask of
    dropout_reference.keep_mask; (seed, offset) come from a counter, as the generator's offset advances."""

    def __init__(self):
        self.calls = []
        self.offset = 0

    def forward_dropout(self, x, delta, w, b, eps, out_dtype, p, delta_bias=None):
        self.calls.append("forward_dropout")
        if delta_bias is not None:
            delta = (delta + delta_bias).to(delta.dtype)
        rng = torch.tensor([1337, self.offset], dtype=torch.int64)
        self.offset += 4
        keep = self.dropout_mask(rng, x.numel() // x.shape[-1], x.shape[-1], p).view(x.shape).bool()
        dropped = (delta.float() * keep * ln.keep_scale(p)).to(delta.dtype)
        s = x + dropped
        s64 = s.double()
        mean, rstd = s64.mean(-1), torch.rsqrt(s64.var(-1, unbiased=False) + eps)
        y = (s64 - mean[..., None]) * rstd[..., None] * w.double() + (0.0 if b is None else b.double())
        return y.to(out_dtype), s, mean.float(), rstd.float(), rng

    def backward_dropout(self, dy, ds, s, mean, rstd, w, has_bias, delta_dtype, p, rng, has_delta_bias=False):
        self.calls.append(("backward_dropout", ds is not None, has_bias, delta_dtype))
        C = s.shape[-1]
        xh = (s.double() - mean.double()[..., None]) * rstd.double()[..., None]
        g = dy.double() * w.double()
        dx = rstd.double()[..., None] * (g - g.mean(-1, keepdim=True) - xh * (g * xh).mean(-1, keepdim=True))
        dx = dx + (0.0 if ds is None else ds.double())
        keep = self.dropout_mask(rng, s.numel() // C, C, p).view(s.shape).double()
        dw = (dy.double() * xh).reshape(-1, C).sum(0).float()
        db = dy.double().reshape(-1, C).sum(0).float() if has_bias else w.new_empty((0,))
        dd = (dx * keep * ln.keep_scale(p)).to(delta_dtype)
        ddb = dd.double().reshape(-1, C).sum(0).float() if has_delta_bias else w.new_empty((0,))
        return dx.to(s.dtype), dd, dw, db, ddb

    def dropout_mask(self, rng, rows, cols, p):
        return ref.keep_mask(int(rng[0]), int(rng[1]), rows, cols, p).to(torch.uint8)


@pytest.fixture
def float64_ext(monkeypatch):
    """The dropout custom ops run on CPU tensors with Float64DropoutExt as the extension (their bodies
    registered for "cpu" for the rest of the process; no other test calls them on CPU tensors)."""
    for op in (ln.dropout_add_layer_norm_fwd, ln.dropout_add_layer_norm_bwd):
        torch.library.register_kernel(op, "cpu", op._init_fn)
    ext = Float64DropoutExt()
    monkeypatch.setattr(ln, "_ext", lambda: ext)
    return ext


@pytest.mark.parametrize("x_dt,d_dt,bias", [(F32, BF16, True), (F32, F32, False), (BF16, BF16, True),
                                            (F32, F16, False)])
@pytest.mark.parametrize("delta_bias", [False, True], ids=["", "delta_bias"])
def test_custom_op_path_with_dropout(float64_ext, x_dt, d_dt, bias, delta_bias):
    """s = x + dropout(delta) with the call's mask (from its rng_state), y and the gradients of x, delta,
    weight, bias equal those of x + mask * delta * scale followed by the reference op, through autograd; the
    gradient of delta is its own tensor in delta's dtype; each call draws a new offset."""
    torch.manual_seed(0)
    x, w = torch.randn(3, 5, 64).to(x_dt), 1 + 0.1 * torch.randn(64)
    d = torch.randn(3, 5, 64).to(d_dt)
    b = 0.1 * torch.randn(64) if bias else None
    p = 0.3
    db = 0.3 * torch.randn(64) if delta_bias else None
    leaves = [t.clone().requires_grad_() for t in (x, d, w, b, db) if t is not None]
    s, y = ln._custom_op_path(*leaves[:3], leaves[3] if bias else None, 1e-5, BF16, p,
                              leaves[-1] if delta_bias else None)
    keep = ref.keep_mask(1337, 0, 15, 64, p).view(3, 5, 64)
    assert float64_ext.offset == 4
    refs = [t.clone().requires_grad_() for t in (x, d, w, b, db) if t is not None]
    biased = (refs[1] + refs[-1]).to(d_dt) if delta_bias else refs[1]
    dropped = (biased.float() * keep * ln.keep_scale(p)).to(d_dt)
    s_ref, y_ref = reference.add_layer_norm(refs[0], dropped, refs[2], refs[3] if bias else None, 1e-5)
    assert s.dtype == x_dt and torch.equal(s, s_ref)
    assert y.dtype == BF16
    torch.testing.assert_close(y.float(), y_ref.float(), rtol=1e-2, atol=1e-2)
    gy, gs = torch.randn(y.shape).to(BF16), torch.randn(s.shape).to(x_dt)
    torch.autograd.backward([y, s], [gy, gs])
    torch.autograd.backward([y_ref, s_ref], [gy.to(y_ref.dtype), gs])
    for i, (ours, r) in enumerate(zip(leaves, refs)):
        assert ours.grad is not None and ours.grad.dtype == ours.dtype
        tol = 2e-2 if BF16 in (ours.dtype, x_dt, d_dt) else 2e-3 if F16 in (ours.dtype, d_dt) else 1e-4
        if delta_bias and i == len(leaves) - 1 and d_dt != F32:
            tol = 2e-2  # column sums of 16-bit gradients rounded in different places: cancellation amplifies
        torch.testing.assert_close(ours.grad.float(), r.grad.float(), rtol=tol, atol=tol)
    assert not torch.equal(leaves[1].grad, leaves[0].grad.to(d_dt))  # the mask reached delta's gradient
    assert float64_ext.calls == ["forward_dropout", ("backward_dropout", True, bias, d_dt)]


def test_custom_op_path_y_unused(float64_ext):
    """y unused: the custom op's backward gets a zero dy (autograd materializes it) and runs the kernel; the
    eager C++ path gets none and masks ds itself (test_layernorm_dropout_gpu.py compares them)."""
    x, d = torch.randn(4, 64, requires_grad=True), torch.randn(4, 64).to(BF16).requires_grad_()
    w = torch.randn(64, requires_grad=True)
    s, y = ln._custom_op_path(x, d, w, None, 1e-5, BF16, 0.5)
    (2 * s).sum().backward()
    keep = ref.keep_mask(1337, 0, 4, 64, 0.5)
    assert torch.equal(x.grad, torch.full_like(x, 2.0))
    assert torch.equal(d.grad, (2.0 * keep * 2.0).to(BF16))


def test_dropout_backward_glue_without_dy(monkeypatch):
    """_dropout_backward with dy None (the eager-like case): dx = ds, ddelta = ds * mask * scale in delta's
    dtype from dropout_mask, no kernel; with neither gradient: nothing."""
    monkeypatch.setattr(ln, "dropout_mask", lambda rng, rows, cols, p: ref.keep_mask(5, 8, rows, cols, p).to(torch.uint8))
    s, mean, w = torch.randn(3, 64), torch.randn(3), torch.randn(64)
    ctx = types.SimpleNamespace(saved_tensors=(s, mean, mean, w, torch.tensor([5, 8])), has_bias=True,
                                delta_dtype=BF16, dropout_p=0.2, has_delta_bias=False)
    ds = torch.randn(3, 64)
    g = ln._dropout_backward(ctx, None, ds, None, None, None)
    assert g[0] is ds and g[2:] == (None,) * 6
    assert torch.equal(g[1], (ds * ref.keep_mask(5, 8, 3, 64, 0.2) * 1.25).to(BF16))
    assert ln._dropout_backward(ctx, None, None, None, None, None) == (None,) * 8
    ctx.has_delta_bias = True  # delta_bias's gradient: the column sums of the masked ddelta
    g = ln._dropout_backward(ctx, None, ds, None, None, None)
    torch.testing.assert_close(g[7], g[1].float().sum(0))


def test_eager_path_routes_by_dropout_p(monkeypatch):
    """Outside torch.compile: p = 0 (or no delta) calls the extension's add_layer_norm exactly as before, p > 0
    its dropout_add_layer_norm (autograd in C++)."""
    calls = []
    ext = types.SimpleNamespace(add_layer_norm=lambda *a: calls.append(("plain", a)) or ("s", "y"),
                                dropout_add_layer_norm=lambda *a: calls.append(("dropout", a)) or ("s", "y"))
    monkeypatch.setattr(ln, "_ext", lambda: ext)
    x, w = torch.randn(2, 64), torch.randn(64)
    ln.add_layer_norm_op(x, x, w, None, 1e-5, BF16)
    ln.add_layer_norm_op(x, x, w, None, 1e-5, BF16, 0.0)
    ln.add_layer_norm_op(x, None, w, None, 1e-5, BF16, 0.2)
    ln.add_layer_norm_op(x, x, w, None, 1e-5, BF16, 0.2)
    assert [c[0] for c in calls] == ["plain", "plain", "plain", "dropout"]
    assert len(calls[0][1]) == len(calls[1][1]) == 7 and calls[0][1][-1] is None  # (..., out_dtype, delta_bias)
    assert calls[3][1][-2] == 0.2 and type(calls[3][1][-2]) is float and calls[3][1][-1] is None


def test_public_api_checks_dropout_p():
    assert ln.dropout_reason(0.0) is None and ln.dropout_reason(0.5) is None
    assert "[0, 1)" in ln.dropout_reason(1.0) and "[0, 1)" in ln.dropout_reason(-0.1)
    assert "Python float" in ln.dropout_reason(True) and "Python float" in ln.dropout_reason(torch.tensor(0.1))
    x = torch.randn(4, 64)
    with pytest.raises(ValueError, match="one CUDA device"):  # the tensor check comes first
        tk_kernels.add_layer_norm(x, x, torch.ones(64), dropout_p=0.2)


def test_reference_applies_dropout_to_delta():
    x, d, w = torch.randn(6, 64), torch.randn(6, 64), torch.randn(64)
    torch.manual_seed(3)
    s, y = reference.add_layer_norm(x, d, w, None, 1e-5, 0.25)
    torch.manual_seed(3)
    s_want = x + F.dropout(d, 0.25)
    assert torch.equal(s, s_want) and torch.equal(y, F.layer_norm(s_want, (64,), w, None, 1e-5))
    state = torch.get_rng_state()
    s0, _ = reference.add_layer_norm(x, d, w, None, 1e-5, 0.0)
    sn, _ = reference.add_layer_norm(x, None, w, None, 1e-5, 0.3)  # nothing to drop
    assert torch.equal(s0, x + d) and sn is x and torch.equal(torch.get_rng_state(), state)


# -----------------------------------------------------------------------------
# dispatch and model.py with a stand-in kernel

class StandIn:
    """A 'TK' add_layer_norm with dropout: the reference (F.dropout on delta, then the add and F.layer_norm),
    recording (delta given, dropout_p) per call; dropout_p absent from the call is recorded as None."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, delta, weight, bias, eps, out_dtype, *dropout, delta_bias=None):
        self.calls.append((delta is not None, dropout[0] if dropout else None))
        return reference.add_layer_norm(x, delta, weight, bias, eps, *dropout, delta_bias=delta_bias)


@pytest.fixture
def stand_in(monkeypatch):
    kernel = StandIn()
    monkeypatch.setattr(ln, "tensor_reason", lambda x, delta, weight, bias, out_dtype, delta_bias=None:
                        ln.width_reason(x.shape[-1]))
    with dispatch.override("attention", tk=None), dispatch.override("classifier", tk=None), \
            dispatch.override("mlp", tk=None), \
            dispatch.override("layer_norm", tk=kernel, unsupported=lambda device, dtype, dims: None, not_used=None):
        yield kernel


def test_plan_with_dropout_takes_the_layer_norm_kernel(stand_in):
    assert dispatch.FAMILIES["layer_norm"].has_dropout is False
    plan = dispatch.plan("tk", "cpu", F32, 16, dropout_p=0.2, n_embd=64)  # no TKUnsupportedError
    assert plan.path("layer_norm", training=True) == "tk" and plan.choices["layer_norm"].train_reason is None
    assert "layer_norm=tk" in plan.describe()


def test_dispatch_passes_dropout_p(stand_in):
    plan = dispatch.plan("tk", "cpu", F32, 16, dropout_p=0.2, n_embd=64)
    x, d, w = torch.randn(5, 64), torch.randn(5, 64), torch.randn(64)
    dispatch.add_layer_norm(plan, x, d, w, None)                  # as before: six arguments
    dispatch.add_layer_norm(plan, x, d, w, None, dropout_p=0.0)   # p = 0: the same call
    dispatch.add_layer_norm(plan, x, None, w, None, dropout_p=0.2)  # nothing to drop
    torch.manual_seed(1)
    s, _ = dispatch.add_layer_norm(plan, x, d, w, None, dropout_p=0.2)
    assert stand_in.calls == [(True, None), (True, None), (False, None), (True, 0.2)]
    torch.manual_seed(1)
    assert torch.equal(s, x + F.dropout(d, 0.2))
    with pytest.raises(TKUnsupportedError, match=r"dropout_p in \[0, 1\)"):
        dispatch.add_layer_norm(plan, x, d, w, None, dropout_p=1.0)
    auto = dispatch.plan("auto", "cpu", F32, 16, dropout_p=0.2, n_embd=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s, _ = dispatch.add_layer_norm(auto, x, d, w, None, dropout_p=1.0)  # the reference: F.dropout(p=1) = 0
    assert any("falls back" in str(c.message) for c in caught) and torch.equal(s, x)
    assert len(stand_in.calls) == 4


def test_dispatch_fallback_applies_dropout():
    with dispatch.override("attention", tk=None), dispatch.override("layer_norm", not_used=None), \
            dispatch.override("mlp", tk=None), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = dispatch.plan("auto", "cpu", F32, 16, dropout_p=0.2, n_embd=64)
    assert plan.path("layer_norm", training=True) == "torch"
    x, d, w = torch.randn(5, 64), torch.randn(5, 64), torch.randn(64)
    torch.manual_seed(9)
    s, _ = dispatch.add_layer_norm(plan, x, d, w, None, dropout_p=0.2)
    torch.manual_seed(9)
    assert torch.equal(s, x + F.dropout(d, 0.2))


def _gpt(kernels, dropout, bias=True, n_layer=3):
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=n_layer, n_head=2, n_embd=64, bias=bias,
                         dropout=dropout, kernels=kernels))


@pytest.mark.parametrize("bias", [True, False])
def test_model_fused_dropout_equals_flat_model(stand_in, bias):
    """Training with dropout 0.1 under a plan that runs the layer_norm kernel: the blocks pass the sublayer
    outputs before dropout and dropout_p to the fused add (the first block's delta is None: no dropout
    there; the embedding dropout stays nn.Dropout). The stand-in applies F.dropout itself, in the same order
    nanoGPT's blocks draw their masks, so with the same seed the loss and every gradient equal the flat
    model's: each residual dropout runs once, on the right tensor, with the right p."""
    flat, fused = _gpt("torch", 0.1, bias), _gpt("tk", 0.1, bias)
    idx = torch.randint(64, (2, 12))
    torch.manual_seed(5)
    _, loss_flat = flat(idx, idx)
    torch.manual_seed(5)
    _, loss_fused = fused(idx, idx)
    assert fused.kernel_plan.path("layer_norm", training=True) == "tk"
    assert stand_in.calls == [(False, None)] + [(True, 0.1)] * (2 * 3)
    torch.testing.assert_close(loss_fused, loss_flat, rtol=1e-6, atol=1e-6)
    loss_flat.backward()
    loss_fused.backward()
    for (name, p), q in zip(flat.named_parameters(), fused.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6, msg=name)
    # the masks did something: another seed gives another loss
    torch.manual_seed(6)
    _, other = fused(idx, idx)
    assert not torch.equal(other, loss_fused)


def test_model_fused_eval_and_no_dropout_calls_are_unchanged(stand_in):
    """Eval mode, and training with dropout 0: the fused add gets no dropout_p at all (the calls of before),
    and nothing draws random numbers in eval."""
    m = _gpt("tk", 0.1)
    idx = torch.randint(64, (2, 12))
    m.eval()
    state = torch.get_rng_state()
    with torch.no_grad():
        m(idx, idx)
    assert torch.equal(torch.get_rng_state(), state)
    m0 = _gpt("tk", 0.0)
    m0(idx, idx)
    assert stand_in.calls == [(False, None)] + [(True, None)] * 6 + [(False, None)] + [(True, None)] * 6


def test_model_without_layers_ignores_dropout_at_ln_f(stand_in):
    m = _gpt("tk", 0.2, n_layer=0)
    m(torch.randint(64, (1, 5)))
    assert stand_in.calls == [(False, None)]
