"""GPU tests of the sm_90a attention backward (csrc/hopper_backward.cu), selected with
TK_ATTENTION_BWD=hopper (set here for every test); skipped where the Hopper kernels cannot run.

Every case runs tk attention + autograd on nanoGPT's strided q, k, v views and compares dq, dk, dv with a
float64 reference (tolerance: max(2 x SDPA's error on the same inputs, a dtype floor), as in
test_attention_gpu.py) and with the portable backward on the same forward output. Outputs and workspaces
are poisoned with NaN before the launch (the binding allocates dq, dk, dv first, like the portable one).
The kernel's loop form (plain at D = 64 non-causal, pipelined otherwise) and its grouped causal launch
order are fixed per (D, causal) in the kernel file; the cases below cover each (D, causal) pair, and the
many-heads case the multi-group causal mapping. The whole portable matrix of test_attention_gpu.py runs
on this backward too with
`TK_ATTENTION_BWD=hopper python -m pytest -m gpu tests/attention`.
"""

import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the Hopper attention backward needs an sm_90 GPU", allow_module_level=True)

from tk_kernels.families.attention import ops as tka  # noqa: E402
from gpu_test_utils import ATTENTION_FLOOR as FLOOR, attention_reference_grads, new_seed, poison, rel_err  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(autouse=True)
def hopper_backward(monkeypatch):
    reason = tka.unavailable_reason() or tka.hopper_reason(torch.device("cuda"))
    if reason is not None:
        pytest.skip(f"no Hopper attention here: {reason}")
    monkeypatch.setenv("TK_ATTENTION_BWD", "hopper")
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    monkeypatch.delenv("TK_DETERMINISTIC", raising=False)


def nanogpt_qkv(B, H, T, D, dtype, g):
    """model.py's q, k, v: qkv.split(C, dim=2) of one (B, T, 3C) tensor, viewed as (B, H, T, D)."""
    C = H * D
    qkv = torch.randn((B, T, 3 * C), generator=g, device="cuda").to(dtype)
    return tuple(t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))


def poison_bwd(q):
    """NaN into the blocks the binding allocates next, in its order: dq, dk, dv, then the Hopper backward's workspaces
    (Delta and lse2, (B, H, Tp) fp32 each; dq_accum, (B, H, Tp, D) fp32; Tp = T rounded up to 128), so that a
    workspace the kernels assume zero-filled without filling it shows as NaN in dq."""
    B, H, T, D = q.shape
    Tp = (T + 127) // 128 * 128
    poison(*[((B, H, T, D), q.dtype)] * 3, ((B, H, Tp), torch.float32), ((B, H, Tp), torch.float32),
           ((B, H, Tp, D), torch.float32))


def grads_of(q, k, v, dout, causal, scale, path):
    """dq, dk, dv through tk attention + autograd with TK_ATTENTION_BWD=path (poisoned outputs)."""
    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
    o = tka.attention(qq, kk, vv, causal=causal, scale=scale)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TK_ATTENTION_BWD", path)
        assert tka.backward_path(q, 0.0, False, k, v) == path
        poison_bwd(q)
        return torch.autograd.grad(o, (qq, kk, vv), dout)


def check_case(q, k, v, dout, causal, scale, label):
    dtype = q.dtype
    sc = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    refs = attention_reference_grads(q, k, v, dout, causal, sc)[2]
    hop = grads_of(q, k, v, dout, causal, scale, "hopper")
    por = grads_of(q, k, v, dout, causal, scale, "portable")
    qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
    sdpa = torch.autograd.grad(F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale),
                               (qs, ks, vs), dout)
    report = [label]
    for name, h, p, s, r in zip(("dq", "dk", "dv"), hop, por, sdpa, refs):
        assert h.shape == q.shape and h.dtype == dtype and h.stride() == p.stride()
        assert torch.isfinite(h).all(), f"{label} {name}: NaN/inf (unwritten elements?)"
        e, es, ep = rel_err(h, r), rel_err(s, r), rel_err(p, r)
        tol = max(2 * es, FLOOR[dtype])
        report.append(f"{name} hopper {e:.2e} portable {ep:.2e} sdpa {es:.2e} (tol {tol:.1e})")
        assert e <= tol, f"{label} {name}: rel error {e:.3e} > {tol:.3e} (SDPA {es:.3e}, portable {ep:.3e})"
        assert e <= max(2 * ep, FLOOR[dtype]), f"{label} {name}: {e:.3e} vs the portable backward's {ep:.3e}"
    print(" | ".join(report))


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 17, 255, 1000, 2048])
def test_hopper_backward_vs_float64_and_portable(T, D, causal, dtype_name):
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    dtype = DTYPES[dtype_name]
    B, H = (3, 5) if T <= 255 else (1, 3)
    q, k, v = nanogpt_qkv(B, H, T, D, dtype, g)
    dout = torch.randn((B, H, T, D), generator=g, device="cuda").to(dtype)
    check_case(q, k, v, dout, causal, None, f"[{(B, H, T, D, causal, dtype_name)} seed={seed}]")


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("B,H,dtype_name", [(3, 11, "bf16"), (5, 13, "fp16")], ids=["33heads", "65heads"])
def test_hopper_backward_many_heads_causal(B, H, dtype_name, D):
    """Causal grids are launched in groups of heads sized to a quarter of the L2 (8 T D bytes a head): at
    T = 1000 on a 50 MB L2, 33 / 65 heads make 2 / 3 groups at D = 64 and 3 / 6 at D = 128, the last one partial.
    Every key block of every head must be visited exactly once (a wrong group mapping leaves NaN-poisoned
    dk / dv rows where a block is skipped and a doubled dq share where one is visited twice)."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    dtype = DTYPES[dtype_name]
    q, k, v = nanogpt_qkv(B, H, 1000, D, dtype, g)
    dout = torch.randn(q.shape, generator=g, device="cuda").to(dtype)
    check_case(q, k, v, dout, True, None, f"[{(B, H, 1000, D, 'causal', dtype_name)} seed={seed}]")


@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_hopper_backward_more_key_blocks_than_ctas(D, causal):
    """400 key blocks (B H ceil(T / 128) = 4 x 25 x 4), about 3 per SM: the persistent grids (D = 64; D = 128
    non-causal) walk several items per CTA, reusing the K / V buffer(s) and alternating the dS^T buffers across
    items; the one-CTA-per-item grids run several waves. A block skipped or visited twice shows as poisoned dK / dV
    rows or a doubled dq share."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = nanogpt_qkv(4, 25, 400, D, torch.bfloat16, g)
    dout = torch.randn(q.shape, generator=g, device="cuda").to(torch.bfloat16)
    check_case(q, k, v, dout, causal, None, f"[{(4, 25, 400, D, causal)} seed={seed}]")


@pytest.mark.parametrize("scale", [0.05, 0.4])
def test_hopper_backward_custom_scale(scale):
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = nanogpt_qkv(2, 3, 300, 64, torch.bfloat16, g)
    dout = torch.randn(q.shape, generator=g, device="cuda").to(torch.bfloat16)
    check_case(q, k, v, dout, True, scale, f"[scale={scale} seed={seed}]")


def test_hopper_backward_layouts():
    """Contiguous (B, H, T, D) inputs, and a head-broadcast dout (stride 0: copied before TMA reads it)."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    B, H, T, D = 2, 4, 500, 128
    q, k, v = (torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
    dout = torch.randn((B, 1, T, D), generator=g, device="cuda").to(torch.bfloat16).expand(B, H, T, D)
    assert not tka.tma_ready(dout)
    check_case(q, k, v, dout, False, None, f"[contiguous, broadcast dout seed={seed}]")


def test_hopper_backward_dk_dv_repeatable():
    """dk, dv have no atomics: bitwise equal across runs (dq is summed with fp32 reductions)."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = nanogpt_qkv(2, 6, 1024, 64, torch.bfloat16, g)
    dout = torch.randn(q.shape, generator=g, device="cuda").to(torch.bfloat16)
    a = grads_of(q, k, v, dout, True, None, "hopper")
    b = grads_of(q, k, v, dout, True, None, "hopper")
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert rel_err(a[0], b[0].double()) < 1e-3


def test_deterministic_mode_stays_portable(monkeypatch):
    q = torch.empty(1, 1, 16, 64, device="cuda", dtype=torch.bfloat16)
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    assert tka.deterministic_backward()
    assert tka.backward_path(q, 0.0, tka.deterministic_backward(), q, q) == "portable"
    monkeypatch.delenv("TK_DETERMINISTIC")
    assert tka.backward_path(q, 0.0, False, q, q) == "hopper"


def test_hopper_kernels_on_a_fresh_thread():
    """Our ops as the first CUDA work of a new thread (what PyTorch's autograd worker threads can be):
    the TMA tensor maps are built by a driver call that needs the thread's CUDA context bound
    (tk::host::bind_context). Same results as on the main thread: o, lse, dk, dv bitwise, dq to atomics' rounding."""
    import threading
    B, H, T, D = 2, 3, 300, 64
    g = torch.Generator(device="cuda").manual_seed(new_seed())
    q, k, v = nanogpt_qkv(B, H, T, D, torch.bfloat16, g)
    dout = torch.randn(B, H, T, D, generator=g, device="cuda").bfloat16()
    assert tka.forward_path(q, 0.0, k, v) == "hopper"
    sc = D ** -0.5
    no_rng = torch.empty(0, dtype=torch.int64, device="cuda")
    o, lse, _ = torch.ops.tk.attention_fwd(q, k, v, True, sc, 0.0)
    dq, dk, dv = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, sc, False, 0.0, no_rng)
    out = {}

    def work():
        try:
            out["fwd"] = torch.ops.tk.attention_fwd(q, k, v, True, sc, 0.0)
            out["bwd"] = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, sc, False, 0.0, no_rng)
            torch.cuda.synchronize()
        except Exception as e:  # reported below, on the test's thread
            out["error"] = e

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert "error" not in out, f"{type(out['error']).__name__}: {out['error']}"
    assert torch.equal(out["fwd"][0], o) and torch.equal(out["fwd"][1], lse)
    assert torch.equal(out["bwd"][1], dk) and torch.equal(out["bwd"][2], dv)
    assert rel_err(out["bwd"][0], dq.double()) < 1e-3


def test_hopper_bindings_reject_broadcast_strides():
    """The Hopper kernels read q, k, v (and the backward dout) with TMA, which cannot follow a zero stride:
    called directly with a head-broadcast k, the bindings stop with one clear message (before, the tensor
    map silently used the packed stride and read past k's storage); through tk_kernels.attention such a k
    is copied first and the result matches the float64 reference."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    B, H, T, D = 2, 4, 300, 64
    q, v = (torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16) for _ in range(2))
    k = torch.randn((B, 1, T, D), generator=g, device="cuda").to(torch.bfloat16).expand(B, H, T, D)
    ext = tka._ext()
    with pytest.raises(RuntimeError, match="nonzero strides") as info:
        ext.attention_forward_hopper(q, k, v, True, 0.125, 0.0)
    assert "Traceback" not in str(info.value) and "k is read with TMA" in str(info.value)
    o, lse, rng = ext.attention_forward_hopper(q, k.contiguous(), v, True, 0.125, 0.0)
    dout = torch.randn((B, 1, T, D), generator=g, device="cuda").to(torch.bfloat16).expand(B, H, T, D)
    with pytest.raises(RuntimeError, match="dout is read with TMA"):
        ext.attention_backward_hopper(q, k.contiguous(), v, o, lse, dout, True, 0.125, 0.0, rng)
    # through tk_kernels.attention the broadcast k is copied for the kernels (the backward then runs where TMA
    # readiness sends it): forward and gradients against float64
    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
    out = tka.attention(qq, kk, vv, causal=True, scale=0.125)
    grads = torch.autograd.grad(out, (qq, kk, vv), dout)
    o_ref, _, refs = attention_reference_grads(q, k, v, dout, True, 0.125)
    for name, got, ref in zip(("o", "dq", "dk", "dv"), (out, *grads), (o_ref, *refs)):
        assert rel_err(got, ref) <= 2 * FLOOR[torch.bfloat16], f"broadcast k seed={seed}: {name} {rel_err(got, ref):.2e}"
