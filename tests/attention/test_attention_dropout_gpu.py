"""GPU tests of the attention dropout inside the tk kernels (python -m pytest -m gpu; skipped
without a CUDA GPU).

The mask a call used: the forward op returns its (seed, offset) as rng_state ((2,) int64, also
readable beforehand as torch.cuda.get_rng_state(): seed and offset of the default generator, the
offset advancing by 4 per dropout call); ops.dropout_mask(rng_state, B, H, T, p) returns the keep
mask computed by the kernels' own keep function, and dropout_reference.keep_mask the same in
Python. The exactness tests build a float64 reference with that mask:
O = (softmax(S) * mask / (1 - p)) V, and its gradients. Tolerances: ours with dropout <= 2 x the larger
of our own error without dropout on the same inputs and, for the gradients, the error inherent to the
flash backward with this mask (inherent_grads: delta from the stored 16-bit O, 16-bit dS), with the
attention dtype floors (gpu_test_utils.ATTENTION_FLOOR). Outputs are poisoned (NaN) before each launch.

Both kernel paths: the tests taking the `path` fixture run once on the Hopper kernels (hopper_forward.cu,
hopper_backward.cu; skipped, with the reason, where the GPU or the build cannot run them) and once on the
portable ones (forward.cu, backward*.cu), forced with TK_ATTENTION_PATH / TK_ATTENTION_BWD; each checks
that ops.forward_path / backward_path report the path it asked for. Both paths must apply the same mask
(the one dropout_mask returns), which the float64 comparisons check for each and
test_paths_apply_the_same_mask checks across them.
"""

import math

import pytest
import torch

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk attention needs compute capability >= 8.0", allow_module_level=True)

from tk_kernels.families.attention import dropout_reference as dref  # noqa: E402
from tk_kernels.families.attention import ops as tka  # noqa: E402
from gpu_test_utils import ATTENTION_FLOOR as FLOOR, capture, gen, generator_state, new_seed, poison, qkv_split  # noqa: E402
from gpu_test_utils import randn, rel_err, rng_pair, row_err  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = tka.unavailable_reason()
    assert reason is None, reason


# -----------------------------------------------------------------------------
# helpers

def poison_fwd(q):
    B, H, T, D = q.shape  # o, lse, rng_state (csrc/bindings.cpp)
    poison(((B, H, T, D), q.dtype), ((B, H, T), torch.float32), ((2,), torch.int64))


def poison_bwd(q):
    B, H, T, D = q.shape  # dq, dk, dv, delta
    poison(((B, H, T, D), q.dtype), ((B, H, T, D), q.dtype), ((B, H, T, D), q.dtype), ((B, H, T), torch.float32))



def reference(q, k, v, causal, scale, p, keep, dout):
    """float64 O = (softmax(S) * keep / (1 - p)) V and dq, dk, dv for dout."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = (q64 @ k64.transpose(-2, -1)) * scale
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    P = s.softmax(-1)
    o = (P * keep.double() / (1.0 - p)) @ v64
    grads = torch.autograd.grad(o, (q64, k64, v64), dout.double())
    return o.detach(), grads


def inherent_grads(q, k, v, causal, scale, p, keep, dout, o_stored):
    """float64 dq, dk, dv of a flash backward in exact arithmetic apart from the two roundings every
    flash backward has (ours, FlashAttention-2, SDPA's): delta = rowsum(dO * O) from the STORED 16-bit O
    (o_stored), and dS and the dropped P~ rounded to the input dtype before their matmuls. Their error
    against the exact gradients is the part of our error that no kernel of this algorithm avoids; it
    dominates where the exact gradient is ~0 (T = 1: dS = P (dP~ - delta) is exactly 0, but with dropout
    O = V / (1 - p) is not a 16-bit number, so the stored O's delta differs by dO . (O^ - O))."""
    dt = q.dtype
    q64, k64, v64, do64 = (t.detach().double() for t in (q, k, v, dout))
    s = (q64 @ k64.transpose(-2, -1)) * scale
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    P = s.softmax(-1)
    Z = keep.double() / (1.0 - p)
    delta = (do64 * o_stored.double()).sum(-1, keepdim=True)
    dS = (P * (Z * (do64 @ v64.transpose(-2, -1)) - delta)).to(dt).double()
    Pt = (P * keep.double()).to(dt).double() / (1.0 - p)  # the kernels round the dropped P, then scale dV
    return scale * dS @ k64, scale * dS.transpose(-2, -1) @ q64, Pt.transpose(-2, -1) @ do64


PATHS = ("hopper", "portable")


@pytest.fixture(params=PATHS)
def path(request, monkeypatch):
    """Runs the test with the forward and the (non-deterministic) backward forced onto one kernel path."""
    if request.param == "hopper":
        reason = tka.hopper_reason(torch.device("cuda", torch.cuda.current_device()))
        if reason is not None:
            pytest.skip(reason)
    monkeypatch.setenv("TK_ATTENTION_PATH", request.param)
    monkeypatch.setenv("TK_ATTENTION_BWD", request.param)
    return request.param


def assert_path(path, q, k, v, p):
    """The ops take `path` for these operands (forward, and the non-deterministic backward)."""
    assert tka.forward_path(q, p, k, v) == path
    assert tka.backward_path(q, p, False, k, v) == path


def run_ops(q, k, v, causal, scale, p, dout, deterministic=False):
    """Our forward + backward ops, outputs poisoned first: (o, lse, rng_state, (dq, dk, dv))."""
    poison_fwd(q)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, causal, scale, p)
    poison_bwd(q)
    grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, deterministic, p, rng)
    return o, lse, rng, grads


# -----------------------------------------------------------------------------
# the mask: the debug op, its statistics, reproducibility

def test_mask_op_matches_python_reference():
    for seed, offset in ((1337, 0), (2**62 + 12345, 2**32 + 8), (7, 2**40 + 4)):
        rng = torch.tensor([seed, offset], dtype=torch.int64, device="cuda")
        for p in (0.1, 0.5):
            ours = tka.dropout_mask(rng, 2, 3, 300, p)
            assert ours.shape == (2, 3, 300, 300) and ours.dtype == torch.uint8
            assert torch.equal(ours.bool(), dref.keep_mask(seed, offset, 2, 3, 300, p, device="cuda")), (seed, offset, p)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_kept_fraction_and_independence(p):
    """>= 1e7 probabilities: kept fraction within 4 sigma of 1 - p; masks differ per head, batch
    entry and call; the forward's rng_state is the generator's (seed, offset), which advances."""
    B, H, T, D = 4, 8, 1024, 64  # 33.5M elements
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed()))
    before = generator_state()
    _, _, rng1 = torch.ops.tk.attention_fwd(q, k, v, False, 0.125, p)
    after = generator_state()
    _, _, rng2 = torch.ops.tk.attention_fwd(q, k, v, False, 0.125, p)
    assert rng_pair(rng1) == before and after == (before[0], before[1] + 4)
    assert rng_pair(rng2) == (before[0], before[1] + 4)
    m1 = tka.dropout_mask(rng1, B, H, T, p).bool()
    n = m1.numel()
    kept = m1.double().mean().item()
    sigma = math.sqrt(p * (1 - p) / n)
    print(f"[p={p}] kept {kept:.6f} vs {1 - p} ({(kept - (1 - p)) / sigma:+.2f} sigma, n={n})")
    assert abs(kept - (1 - p)) < 4 * sigma
    assert not torch.equal(m1[0, 0], m1[0, 1]) and not torch.equal(m1[0, 0], m1[1, 0])
    m2 = tka.dropout_mask(rng2, B, H, T, p).bool()
    assert not torch.equal(m1, m2)
    # two calls' masks agree like independent bits would: p^2 + (1 - p)^2
    agree = (m1 == m2).double().mean().item()
    assert abs(agree - (p * p + (1 - p) ** 2)) < 1e-3


def test_same_seed_same_output_and_manual_seed_reproduces(path):
    B, H, T, D = 2, 4, 777, 64
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed()))
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)
    assert_path(path, q, k, v, 0.2)
    runs = []
    for _ in range(2):
        torch.manual_seed(4321)
        runs.append(run_ops(q, k, v, True, 0.125, 0.2, dout, deterministic=True))
    (o1, l1, r1, g1), (o2, l2, r2, g2) = runs
    assert rng_pair(r1) == rng_pair(r2) and rng_pair(r1)[0] == 4321
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    for a, b in zip(g1, g2):
        assert not torch.isnan(a).any() and torch.equal(a, b)
    # the default (atomic dQ) backward of this path: dK, dV bitwise reproducible, dQ to the last bits
    fast = [torch.ops.tk.attention_bwd(q, k, v, o1, l1, dout, True, 0.125, False, 0.2, r1) for _ in range(2)]
    assert torch.equal(fast[0][1], fast[1][1]) and torch.equal(fast[0][2], fast[1][2])
    # dQ: fp32 partials added in whatever order the CTAs reach L2, so a few elements round to the neighbouring
    # bf16 value (one flip of an average element costs ~6e-6 here; 1e-5 failed once on an H200 at 2.4e-5, ~15 of
    # 398K elements); a wrong mask or a lost partial would be O(1e-2)
    assert rel_err(fast[0][0], fast[1][0].double()) < 1e-4
    for a, b in zip(fast[0], g1):  # and close to the deterministic backward's
        assert rel_err(a, b.double()) < 1e-2
    # the next call (no reseeding) draws another mask
    o3, _, r3, _ = run_ops(q, k, v, True, 0.125, 0.2, dout)
    assert rng_pair(r3) != rng_pair(r1) and not torch.equal(o3, o1)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
def test_paths_apply_the_same_mask(D, causal, monkeypatch):
    """The same generator state gives the same rng_state and the same mask on both paths: the Hopper and the
    portable forwards' outputs agree to rounding (a different mask would differ by O(p) everywhere), each
    backward fits either forward, and the Hopper outputs are exact for the debug op's mask."""
    reason = tka.hopper_reason(torch.device("cuda", torch.cuda.current_device()))
    if reason is not None:
        pytest.skip(reason)
    B, H, T, D, p = 2, 3, 700, D, 0.3
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed()))
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)
    outs = {}
    for name in PATHS:
        monkeypatch.setenv("TK_ATTENTION_PATH", name)
        monkeypatch.setenv("TK_ATTENTION_BWD", name)
        assert_path(name, q, k, v, p)
        torch.manual_seed(2024)
        outs[name] = run_ops(q, k, v, causal, 0.125, p, dout)
    (oh, lh, rh, gh), (op, lp, rp, gp) = outs["hopper"], outs["portable"]
    assert rng_pair(rh) == rng_pair(rp)
    keep = tka.dropout_mask(rh, B, H, T, p).bool()
    o_ref, g_ref = reference(q, k, v, causal, 0.125, p, keep, dout)
    e_h, e_p, e_hp = rel_err(oh, o_ref), rel_err(op, o_ref), rel_err(oh, op.double())
    print(f"[same mask D={D} causal={causal}] o: hopper {e_h:.2e} portable {e_p:.2e} hopper-vs-portable {e_hp:.2e}")
    assert e_h < 1.5 * FLOOR[torch.bfloat16] and e_p < 1.5 * FLOOR[torch.bfloat16] and e_hp < 2 * FLOOR[torch.bfloat16]
    torch.testing.assert_close(lh, lp, rtol=1e-5, atol=1e-5)
    # the other path's backward on each forward's outputs
    for (o, lse, rng), name in (((oh, lh, rh), "portable"), ((op, lp, rp), "hopper")):
        monkeypatch.setenv("TK_ATTENTION_PATH", name)
        monkeypatch.setenv("TK_ATTENTION_BWD", name)
        assert tka.backward_path(q, p, False, k, v) == name
        poison_bwd(q)
        grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, 0.125, False, p, rng)
        for gname, g, ref in zip(("dq", "dk", "dv"), grads, g_ref):
            assert not torch.isnan(g).any(), (name, gname)
            assert rel_err(g, ref) < 4 * FLOOR[torch.bfloat16], (name, gname, rel_err(g, ref))
    for gname, a, b in zip(("dq", "dk", "dv"), gh, gp):
        assert rel_err(a, b.double()) < 4 * FLOOR[torch.bfloat16], (gname, rel_err(a, b.double()))


# -----------------------------------------------------------------------------
# exactness against float64 with the kernels' own mask

def batch_heads(T):
    return (2, 3) if T <= 255 else ((1, 3) if T <= 1000 else (1, 2))


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 17, 255, 1000, 2048])
def test_forward_backward_vs_float64_with_kernel_mask(T, D, causal, dtype_name, path):
    dtype = DTYPES[dtype_name]
    B, H = batch_heads(T)
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, dtype, gen(seed))  # strided views of a fused qkv
    dout = randn((B, H, T, D), gen(seed + 1), dtype)
    scale = 1.0 / math.sqrt(D)
    p = 0.2 if T != 255 else 0.5
    label = f"[{path} T={T} D={D} causal={causal} {dtype_name} p={p} seed={seed}]"
    assert_path(path, q, k, v, p)
    assert_path(path, q, k, v, 0.0)

    # calibration: our error without dropout against the same float64 machinery
    ones = torch.ones(B, H, T, T, dtype=torch.bool, device="cuda")
    o0, _, _, g0 = run_ops(q, k, v, causal, scale, 0.0, dout)
    o0_ref, g0_ref = reference(q, k, v, causal, scale, 0.0, ones, dout)
    del ones

    o, lse, rng, grads = run_ops(q, k, v, causal, scale, p, dout)
    keep = tka.dropout_mask(rng, B, H, T, p).bool()
    o_ref, grads_ref = reference(q, k, v, causal, scale, p, keep, dout)
    # the error every flash backward has with this mask and our stored O (see inherent_grads)
    grads_inh = inherent_grads(q, k, v, causal, scale, p, keep, dout, o)
    report = [label]
    for name, ours, ref, base, base_ref, inh in [("o", o, o_ref, o0, o0_ref, None)] + list(
            zip(("dq", "dk", "dv"), grads, grads_ref, g0, g0_ref, grads_inh)):
        assert ours.shape == q.shape and ours.dtype == dtype
        assert not torch.isnan(ours).any(), f"{label} {name}: NaN (unwritten elements?)"
        e, e0 = rel_err(ours, ref), rel_err(base, base_ref)
        r, r0 = row_err(ours, ref), row_err(base, base_ref)
        ei, ri = (rel_err(inh, ref), row_err(inh, ref)) if inh is not None else (0.0, 0.0)
        # 2 x the larger of: our own error without dropout, the inherent error with this mask
        tol, rtol = max(2 * e0, 2 * ei, 1.5 * FLOOR[dtype]), max(2 * r0, 2 * ri, 6 * FLOOR[dtype])
        report.append(f"{name}: {e:.2e} (p=0: {e0:.2e}, inherent {ei:.2e}, tol {tol:.1e}) "
                      f"row {r:.2e} (p=0: {r0:.2e}, inherent {ri:.2e})")
        assert e <= tol, f"{label} {name}: relative error {e:.3e} > {tol:.3e} (without dropout {e0:.3e}, inherent {ei:.3e})"
        assert r <= rtol, f"{label} {name}: worst-row error {r:.3e} > {rtol:.3e} (without dropout {r0:.3e}, inherent {ri:.3e})"
        if inh is not None:  # (diagnostic) how far ours is from the inherent gradients themselves
            report.append(f"{name} vs inherent: {rel_err(ours, inh):.2e}")
    print(" ".join(report))
    # lse is that of the softmax before dropout: the same as without dropout (the dropout kernels walk
    # the keys in the same tiles; bitwise expected, 1e-6 asked)
    _, lse0, _ = torch.ops.tk.attention_fwd(q, k, v, causal, scale, 0.0)
    torch.testing.assert_close(lse, lse0, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("D", [64, 128])
def test_deterministic_backward_with_dropout(D, monkeypatch):
    """The deterministic path (its own dQ kernel) regenerates the same mask: dq/dk/dv match the
    default path closely and are bitwise reproducible (portable kernels: the deterministic mode has no
    Hopper backward; the same dK / dV kernel as the default portable backward)."""
    monkeypatch.setenv("TK_ATTENTION_PATH", "portable")
    monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    B, H, T = 1, 3, 555
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed()))
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, 0.1, 0.3)
    fast = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, 0.1, False, 0.3, rng)
    det = [torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, 0.1, True, 0.3, rng) for _ in range(2)]
    for a, b, c in zip(det[0], det[1], fast):
        assert torch.equal(a, b)
        assert rel_err(c, a.double()) < 1e-2
    assert torch.equal(det[0][1], fast[1]) and torch.equal(det[0][2], fast[2])  # dK, dV: same kernel order


@pytest.mark.parametrize("limit", [101_376, 170_000], ids=["99KB", "A100"])
@pytest.mark.parametrize("D", [64, 128])
def test_other_smem_configurations_with_dropout(D, limit, monkeypatch):
    """The configurations of smaller GPUs (TK_SMEM_LIMIT: the portable backward's) regenerate the same mask."""
    monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    B, H, T = 1, 3, 300
    q, k, v = qkv_split(B, H, T, D, torch.float16, gen(new_seed()))
    dout = randn((B, H, T, D), gen(new_seed()), torch.float16)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, False, 0.125, 0.2)
    keep = tka.dropout_mask(rng, B, H, T, 0.2).bool()
    _, grads_ref = reference(q, k, v, False, 0.125, 0.2, keep, dout)
    monkeypatch.setenv("TK_SMEM_LIMIT", str(limit))
    for det in (False, True):
        assert tka.backward_path(q, 0.2, det, k, v) == "portable"  # the kernels TK_SMEM_LIMIT configures
        poison_bwd(q)
        grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, False, 0.125, det, 0.2, rng)
        for name, g, ref in zip(("dq", "dk", "dv"), grads, grads_ref):
            assert not torch.isnan(g).any()
            assert rel_err(g, ref) < 1.5 * FLOOR[torch.float16] * 4, (name, det, rel_err(g, ref))


# -----------------------------------------------------------------------------
# p = 0, eval mode, the public API

def test_p0_is_the_no_dropout_path_and_draws_nothing(path):
    B, H, T, D = 2, 3, 333, 128
    q, k, v = (t.detach().requires_grad_() for t in qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed())))
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)
    assert_path(path, q, k, v, 0.0)
    state = torch.cuda.get_rng_state()
    o_default = tka.attention(q, k, v, causal=True)
    o_p0 = tka.attention(q, k, v, causal=True, dropout_p=0.0)
    assert torch.equal(o_default, o_p0) and torch.equal(torch.cuda.get_rng_state(), state)
    _, _, rng = torch.ops.tk.attention_fwd(q.detach(), k.detach(), v.detach(), True, 0.125, 0.0)
    assert rng.shape == (0,)
    torch.use_deterministic_algorithms(True)
    try:
        g_default = torch.autograd.grad(o_default, (q, k, v), dout)
        g_p0 = torch.autograd.grad(o_p0, (q, k, v), dout)
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b in zip(g_default, g_p0):
        assert torch.equal(a, b)
    # the fast backward too (dK, dV bitwise; dQ adds with atomics)
    g_default = torch.autograd.grad(tka.attention(q, k, v, causal=True), (q, k, v), dout)
    g_p0 = torch.autograd.grad(tka.attention(q, k, v, causal=True, dropout_p=0.0), (q, k, v), dout)
    assert torch.equal(g_default[1], g_p0[1]) and torch.equal(g_default[2], g_p0[2])
    assert rel_err(g_default[0], g_p0[0].double()) < 1e-5
    with pytest.raises(ValueError, match=r"dropout_p in \[0, 1\)"):
        tka.attention(q, k, v, dropout_p=1.0)


def test_public_api_dropout_grads_flow(path):
    B, H, T, D = 2, 2, 100, 64
    q, k, v = (t.detach().requires_grad_() for t in qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed())))
    assert_path(path, q, k, v, 0.2)
    o = tka.attention(q, k, v, dropout_p=0.2)
    o.float().square().sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def _tiny_gpt(kernels, dropout):
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=256, vocab_size=512, n_layer=2, n_head=2, n_embd=128, dropout=dropout,
                    bias=True, kernels=kernels)
    return GPT(cfg).cuda()


def test_eval_mode_applies_no_dropout_and_training_does():
    model = _tiny_gpt("tk", 0.2)
    idx = torch.randint(0, 512, (2, 200), device="cuda")
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("attention", training=True) == "tk", plan.describe()
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        state = torch.cuda.get_rng_state()
        a, _ = model(idx)
        b, _ = model(idx)
        assert torch.equal(torch.cuda.get_rng_state(), state)  # nothing drew random numbers
    assert torch.equal(a, b)
    model.train()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        _, c = model(idx, idx)  # with targets kernels=tk returns the loss only (fused classifier)
        _, d = model(idx, idx)
    assert not torch.equal(c, d)


def test_plan_with_dropout_runs_tk():
    from tk_kernels import dispatch
    # (auto: families other than attention may not support these dims; attention must take tk anyway)
    plan = dispatch.plan("auto", "cuda", torch.bfloat16, 64, dropout_p=0.2, warn=False)
    assert plan.path("attention", training=True) == "tk" and "attention=tk" in plan.describe()
    q, k, v = qkv_split(1, 2, 64, 64, torch.bfloat16, gen(new_seed()))
    before = generator_state()
    dispatch.attention(plan, q, k, v, causal=True, dropout_p=0.2)
    assert generator_state() == (before[0], before[1] + 4)  # our kernel drew its offset


# -----------------------------------------------------------------------------
# torch.library.opcheck, torch.compile, CUDA graphs

def test_opcheck_with_dropout():
    seed = new_seed()
    for (B, H, T, D, causal, dtype) in [(2, 3, 33, 64, True, torch.bfloat16), (1, 2, 17, 128, False, torch.float16)]:
        q, k, v = (t.detach().requires_grad_() for t in qkv_split(B, H, T, D, dtype, gen(seed)))
        # every call draws a new mask, so the checks that compare two calls' outputs do not apply
        torch.library.opcheck(torch.ops.tk.attention_fwd.default, (q, k, v, causal, 1.0 / math.sqrt(D), 0.2),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
        qd, kd, vd = (t.detach() for t in (q, k, v))
        o, lse, rng = torch.ops.tk.attention_fwd(qd, kd, vd, causal, 0.125, 0.2)
        dout = randn(q.shape, gen(seed + 1), dtype)
        # the backward is a pure function of its inputs (the mask comes from rng_state): every check
        for det in (True, False):
            torch.library.opcheck(torch.ops.tk.attention_bwd.default,
                                  (qd, kd, vd, o, lse, dout, causal, 0.125, det, 0.2, rng))


def test_compiled_attention_matches_eager_bitwise(monkeypatch):
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    B, H, T, D = 2, 3, 300, 64
    q, k, v = (t.detach().requires_grad_() for t in qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed())))
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)

    def f(q, k, v):
        return tka.attention(q, k, v, causal=True, dropout_p=0.2)

    compiled = torch.compile(f, fullgraph=True)
    compiled(q, k, v).backward(dout)  # compile (forward and backward) before seeding
    results = []
    for fn in (f, compiled):
        torch.manual_seed(99)
        o = fn(q, k, v)
        results.append((o.detach(), torch.autograd.grad(o, (q, k, v), dout)))
    (oe, ge), (oc, gc) = results
    assert torch.equal(oe, oc)
    for a, b in zip(ge, gc):
        assert torch.equal(a, b)


def test_compiled_gpt_with_dropout_fullgraph():
    model = _tiny_gpt("tk", 0.2)
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("attention", training=True) == "tk"
    idx = torch.randint(0, 512, (4, 255), device="cuda")
    targets = torch.randint(0, 512, (4, 255), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model)(idx, targets)
    assert explained.graph_break_count == 0, str(explained)
    # the model's attention takes the fused projection (tests/attention/test_attention_qkv_gpu.py)
    assert any("attention_qkv_fwd" in g.code for g in explained.graphs), "tk op not in the traced graph"
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    losses = []
    for m in (model, compiled):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = m(idx, targets)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
        model.zero_grad(set_to_none=True)
        losses.append(loss.item())
    print(f"[compiled gpt dropout] loss eager {losses[0]:.4f} compiled {losses[1]:.4f}")
    assert abs(losses[0] - losses[1]) < 0.05  # different masks (inductor draws its own for nn.Dropout)


def test_cuda_graph_replays_draw_fresh_masks(path):
    B, H, T, D = 2, 3, 256, 64
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(new_seed()))
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    assert_path(path, q, k, v, 0.2)
    dout = randn((B, H, T, D), gen(new_seed()), torch.bfloat16)
    scale = 0.125

    def step():
        o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, scale, 0.2)
        grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, scale, False, 0.2, rng)
        return o, rng, grads

    graph, (o_s, rng_s, grads_s) = capture(step)
    replays = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        replays.append((o_s.clone(), rng_s.clone(), [g.clone() for g in grads_s]))
    (o1, r1, g1), (o2, r2, g2) = replays
    assert rng_pair(r1) != rng_pair(r2), "the replays used the same (seed, offset)"
    assert not torch.equal(o1, o2)
    for o, rng, grads in replays:  # each replay's outputs are exact for the mask of its rng_state
        keep = tka.dropout_mask(rng, B, H, T, 0.2).bool()
        o_ref, grads_ref = reference(q, k, v, True, scale, 0.2, keep, dout)
        assert rel_err(o, o_ref) < 1.5 * FLOOR[torch.bfloat16]
        for g, ref in zip(grads, grads_ref):
            assert rel_err(g, ref) < 3 * FLOOR[torch.bfloat16]
