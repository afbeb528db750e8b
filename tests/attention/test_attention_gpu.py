"""GPU tests of the tk attention kernels (python -m pytest -m gpu; skipped without a CUDA GPU).

Accuracy: every case compares our output, lse and dq/dk/dv with a float64 reference computed on
the GPU from the same bf16/fp16 inputs (upcast), as relative L2 error ||x - ref|| / ||ref|| and as
the worst single row. Tolerances are calibrated per case against PyTorch SDPA's own error on the
same inputs and the same float64 reference: ours <= max(2 x SDPA's error, a dtype floor).
Each case draws fresh random inputs from a seed taken from os.urandom; the seed is printed (run with
-s to see every case's numbers) so a failure can be reproduced.

Unwritten outputs are caught by poisoning: the binding allocates the kernels' outputs with
torch.empty from PyTorch's CUDA caching allocator. Right before each launch, poison() requests
blocks of exactly the sizes the op will request, in the same order, fills them with 0xFF bytes (NaN
in bf16, fp16 and fp32) and frees them. Freeing merges the blocks back, leaving the allocator in
the state it was in before, so the op's identical sequence of requests gets the same, now
NaN-filled, memory; any element the kernel fails to write stays NaN and fails the test.
test_poison_trick_works checks that the allocator indeed behaves like this.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk attention needs compute capability >= 8.0", allow_module_level=True)

from tk_kernels.families.attention import ops as tka  # noqa: E402
from gpu_test_utils import (ATTENTION_FLOOR as FLOOR, attention_reference, attention_reference_grads,  # noqa: E402
                            gen, new_seed, poison, qkv_split, randn, rel_err, row_err)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
ROW_FLOOR_FACTOR = 6.0  # worst-row errors get this times the floor: at (3,5,255,128) bf16 non-causal the worst dk
# row over 16 seeds (dev/attention_row_errors.py, H200) averaged 1.05e-2 on every path (SDPA 9.8e-3) and reached
# 1.76e-2, over the former 4x floor (1.6e-2) whenever SDPA's own worst row happened to be small
ROW_SDPA_FACTOR = 2.5  # and this times SDPA's worst row (the relative L2 error gets 2x): a worst row is an extreme
# over B H T rows, so its ratio to SDPA's spreads more; session 37 drew ours 4.20e-2 against SDPA's 2.02e-2 (2.08x)
# for dk at (1,3,1024,128) causal bf16 on a kernel whose dk is bitwise that of builds that had passed


@pytest.fixture(scope="module", autouse=True)
def _built():
    """Build/load the extension once, failing (not skipping) with the build error if it breaks."""
    reason = tka.unavailable_reason()
    assert reason is None, reason


# -----------------------------------------------------------------------------
# helpers

# the rng_state argument of the backward op without dropout (dropout_p = 0 reads none)
NO_RNG = torch.empty(0, dtype=torch.int64, device="cuda") if torch.cuda.is_available() else None


def poison_fwd(q):
    """The forward op allocates o (B, T, H, D) then lse (B, H, T) fp32 (csrc/bindings.cpp)."""
    B, H, T, D = q.shape
    poison(((B, H, T, D), q.dtype), ((B, H, T), torch.float32))


def poison_bwd(q):
    """The backward op allocates dq, dk, dv, then the delta workspace (csrc/bindings.cpp)."""
    B, H, T, D = q.shape
    poison(((B, H, T, D), q.dtype), ((B, H, T, D), q.dtype), ((B, H, T, D), q.dtype),
           ((B, H, T), torch.float32))


def check_close(name, ours, sdpa, ref, dtype, report):
    name = f"{report[0]} {name}"  # the case label and seed, to reproduce a failure
    assert not torch.isnan(ours).any(), f"{name}: NaN in output (unwritten elements?)"
    assert torch.isfinite(ours).all(), f"{name}: inf in output"
    e, es = rel_err(ours, ref), rel_err(sdpa, ref)
    r, rs = row_err(ours, ref), row_err(sdpa, ref)
    tol = max(2 * es, FLOOR[dtype])
    rtol = max(ROW_SDPA_FACTOR * rs, ROW_FLOOR_FACTOR * FLOOR[dtype])
    report.append(f"{name.split()[-1]}: ours {e:.2e} sdpa {es:.2e} (tol {tol:.1e}) | worst row ours {r:.2e} sdpa {rs:.2e}")
    assert e <= tol, f"{name}: relative error {e:.3e} > {tol:.3e} (SDPA: {es:.3e})"
    assert r <= rtol, f"{name}: worst-row error {r:.3e} > {rtol:.3e} (SDPA: {rs:.3e})"


def run_case(q, k, v, causal, scale, seed, label, dout=None, backward=True):
    """Forward (+ backward) of ours and SDPA vs the float64 reference, with poisoned outputs."""
    B, H, T, D = q.shape
    dtype = q.dtype
    g = gen(seed + 1)
    if dout is None:
        dout = randn((B, H, T, D), g, dtype)
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    o_ref, lse_ref, grads_ref = attention_reference_grads(q, k, v, dout, causal, sc)

    qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
    poison_fwd(q)
    o = tka.attention(qq, kk, vv, causal=causal, scale=scale)
    assert o.shape == q.shape and o.dtype == dtype
    report = [f"[{label} seed={seed}]"]
    qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
    o_sdpa = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale)
    check_close("o", o, o_sdpa, o_ref, dtype, report)

    if backward:
        poison_bwd(q)
        dq, dk, dv = torch.autograd.grad(o, (qq, kk, vv), dout)
        dqs, dks, dvs = torch.autograd.grad(o_sdpa, (qs, ks, vs), dout)
        for name, ours, sd, ref in zip(("dq", "dk", "dv"), (dq, dk, dv), (dqs, dks, dvs), grads_ref):
            assert ours.shape == q.shape and ours.dtype == dtype
            check_close(name, ours, sd, ref, dtype, report)
    print(" ".join(report))
    return o


# -----------------------------------------------------------------------------
# the accuracy matrix

T_VALUES = [1, 17, 100, 255, 256, 1000, 1024, 2048, 4096]


def batch_heads(T, D):
    # B*H odd; few rows for long T to keep the float64 reference small
    if T <= 256:
        return 3, 5
    return (3, 1) if D == 64 else (1, 3)


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", T_VALUES)
def test_forward_backward_vs_float64(T, D, causal, dtype_name):
    dtype = DTYPES[dtype_name]
    B, H = batch_heads(T, D)
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, dtype, gen(seed))
    run_case(q, k, v, causal, None, seed, f"B={B} H={H} T={T} D={D} causal={causal} {dtype_name}")


@pytest.mark.parametrize("layout", ["contiguous", "batch_stride", "misaligned", "broadcast"])
@pytest.mark.parametrize("D", [64, 128])
def test_layouts(layout, D):
    """Plain contiguous tensors, a non-standard batch stride (padding between batches), rows that
    are not 16-byte aligned (the Python side copies), and a head-broadcast k/v (stride 0)."""
    B, H, T, dtype = 3, 3, 257, torch.bfloat16
    seed = new_seed()
    g = gen(seed)
    if layout == "contiguous":
        q, k, v = (randn((B, H, T, D), g, dtype) for _ in range(3))
    elif layout == "batch_stride":
        pad = 8 * 37
        def padded():
            flat = randn((B * (H * T * D + pad),), g, dtype)
            return flat.as_strided((B, H, T, D), (H * T * D + pad, T * D, D, 1))
        q, k, v = padded(), padded(), padded()
        assert q.stride(0) == H * T * D + pad
    elif layout == "misaligned":
        q, k, v = (randn((B, H, T, D + 1), g, dtype)[..., 1:] for _ in range(3))
        assert q.stride(2) % 8 != 0
    else:
        q = randn((B, H, T, D), g, dtype)
        k, v = (randn((B, 1, T, D), g, dtype).expand(B, H, T, D) for _ in range(2))
        assert k.stride(1) == 0
    for causal in (True, False):
        run_case(q, k, v, causal, None, seed, f"{layout} D={D} causal={causal}")


@pytest.mark.parametrize("scale", [0.05, 0.4])
def test_custom_scale(scale):
    """A non-default scale: 0.4 with D=128 makes the softmax peaked (scores std ~4.5)."""
    seed = new_seed()
    q, k, v = qkv_split(1, 3, 333, 128, torch.bfloat16, gen(seed))
    for causal in (True, False):
        run_case(q, k, v, causal, scale, seed, f"scale={scale} causal={causal}")


@pytest.mark.parametrize("T", [17, 100, 255, 1000, 1024])
@pytest.mark.parametrize("D", [64, 128])
def test_causal_mask_rows(T, D):
    """q = 0 gives uniform attention over the allowed keys (scores exactly 0), so o_i is the mean of
    v_0..v_i and any leak across the diagonal or lost key shows up in single rows."""
    seed = new_seed()
    g = gen(seed)
    dtype = torch.bfloat16
    q = torch.zeros(1, 3, T, D, device="cuda", dtype=dtype)
    k, v = randn((1, 3, T, D), g, dtype), randn((1, 3, T, D), g, dtype)
    poison_fwd(q)
    o = tka.attention(q, k, v, causal=True)
    counts = torch.arange(1, T + 1, device="cuda", dtype=torch.float64)[:, None]
    ref = v.double().cumsum(dim=2) / counts
    err = ((o.double() - ref).abs().amax(dim=-1) / ref.abs().amax(dim=-1).clamp_min(1e-3)).max().item()
    print(f"[mask T={T} D={D} seed={seed}] worst row max-rel error {err:.2e}")
    assert err < 2e-2, f"causal mask: worst row error {err:.3e} (seed {seed})"


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("B,H,T,D", [(3, 11, 1024, 64), (3, 5, 2048, 128)], ids=["D64", "D128"])
def test_causal_forward_many_items(B, H, T, D, dtype_name):
    """More causal work items (128-query blocks of every head: 264 / 240 here) than an H200 has SMs (132), so
    the persistent Hopper forward's CTAs walk on to further items: at D = 64 from its counter (the dynamic walk,
    from T = 512 on: csrc/attention.h), each item handed to the consumers through the pipeline's records; at
    D = 128 in the static order. A lost or doubled item leaves NaN-poisoned or wrong rows of o (and of the
    gradients through it). The other cases have fewer items than SMs: one each per CTA."""
    dtype = DTYPES[dtype_name]
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, dtype, gen(seed))
    run_case(q, k, v, True, None, seed, f"B={B} H={H} T={T} D={D} causal=True {dtype_name} (many items)")


# -----------------------------------------------------------------------------
# raw ops: poisoned outputs, lse, determinism

@pytest.mark.parametrize("B,H,T,D", [(3, 5, 17, 64), (3, 5, 100, 64), (1, 3, 4096, 128)])
def test_poison_trick_works(B, H, T, D):
    """The caching allocator gives the op's torch.empty calls the NaN-filled blocks poison() freed."""
    keep = [torch.empty(n, device="cuda") for n in (1000, 70000, 300000)]  # a used, fragmented pool
    q = torch.empty(B, H, T, D, dtype=torch.bfloat16, device="cuda")
    poison_fwd(q)
    o = torch.empty(B, T, H, D, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(B, H, T, dtype=torch.float32, device="cuda")
    assert torch.isnan(o).all() and torch.isnan(lse).all()
    del o, lse
    poison_bwd(q)
    grads = [torch.empty(B, T, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    delta = torch.empty(B, H, T, dtype=torch.float32, device="cuda")
    assert all(torch.isnan(g).all() for g in grads) and torch.isnan(delta).all()
    del keep


@pytest.mark.parametrize("T,D", [(1, 64), (17, 128), (100, 64), (1000, 128), (4096, 64)])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_raw_forward_lse(T, D, causal):
    seed = new_seed()
    B, H = 3, 1
    q, k, v = qkv_split(B, H, T, D, torch.float16, gen(seed))
    scale = 1.0 / math.sqrt(D)
    poison_fwd(q)
    o, lse, _ = torch.ops.tk.attention_fwd(q, k, v, causal, scale, 0.0)
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()
    assert lse.shape == (B, H, T) and lse.dtype == torch.float32 and lse.is_contiguous()
    assert o.stride() == (T * H * D, D, H * D, 1)  # (B, T, H, D) memory: free transpose+view
    _, lse_ref = attention_reference(q, k, v, causal, scale)
    lse_err = (lse.double() - lse_ref).abs().max().item()
    print(f"[lse T={T} D={D} causal={causal} seed={seed}] max abs error {lse_err:.2e}")
    assert lse_err < 2e-3, f"lse max abs error {lse_err:.3e}"


def _bwd_inputs(B, H, T, D, causal, seed, dtype=torch.bfloat16):
    g = gen(seed)
    q, k, v = qkv_split(B, H, T, D, dtype, g)
    dout = randn((B, H, T, D), g, dtype)
    scale = 1.0 / math.sqrt(D)
    o, lse, _ = torch.ops.tk.attention_fwd(q, k, v, causal, scale, 0.0)
    return q, k, v, o, lse, dout, scale


@pytest.mark.parametrize("B,H,T,D,causal", [(2, 5, 1024, 64, True), (1, 3, 2048, 128, False),
                                            (3, 1, 777, 128, True)])
def test_repeatability(B, H, T, D, causal):
    seed = new_seed()
    q, k, v, o, lse, dout, scale = _bwd_inputs(B, H, T, D, causal, seed)
    # forward: bitwise
    for _ in range(2):
        poison_fwd(q)
        o2, lse2, _ = torch.ops.tk.attention_fwd(q, k, v, causal, scale, 0.0)
        assert torch.equal(o, o2) and torch.equal(lse, lse2), "forward is not bitwise reproducible"
    # backward, deterministic: bitwise, all three
    runs = []
    for _ in range(3):
        poison_bwd(q)
        runs.append(torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, True, 0.0, NO_RNG))
    for run in runs[1:]:
        for name, a, b in zip(("dq", "dk", "dv"), runs[0], run):
            assert torch.equal(a, b), f"deterministic {name} differs between runs"
    # backward, default (atomic dQ): dK, dV bitwise; dQ equal up to fp32 summation order
    fast = []
    for _ in range(3):
        poison_bwd(q)
        fast.append(torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, False, 0.0, NO_RNG))
    # (the deterministic mode always runs the portable kernels: with TK_ATTENTION_BWD=hopper the default
    # mode's dK / dV come from another kernel, equal only up to fp32 summation order)
    same_kernels = tka.backward_path(q, 0.0, False, k, v) == "portable"
    for run in fast:
        assert not any(torch.isnan(t).any() for t in run)
        assert torch.equal(run[1], fast[0][1]) and torch.equal(run[2], fast[0][2]), "dK/dV not bitwise"
        if same_kernels:
            assert torch.equal(run[1], runs[0][1]) and torch.equal(run[2], runs[0][2]), \
                "dK/dV differ between deterministic and default modes"
        else:
            for name, a, b in (("dK", run[1], runs[0][1]), ("dV", run[2], runs[0][2])):
                e = rel_err(a, b.double())
                assert e < 2e-3, f"Hopper {name} differs from the deterministic portable one by {e:.3e}"
        e = rel_err(run[0], runs[0][0].double())
        assert e < 2e-3, f"atomic dQ differs from deterministic dQ by {e:.3e}"
    print(f"[repeat B={B} H={H} T={T} D={D} seed={seed}] ok")


def test_deterministic_mode_via_torch_flag():
    """torch.use_deterministic_algorithms(True) selects the deterministic backward through autograd
    (and makes torch.empty NaN-fill new tensors, another poison)."""
    seed = new_seed()
    q, k, v = qkv_split(1, 3, 600, 64, torch.bfloat16, gen(seed))
    dout = randn(q.shape, gen(seed + 1), torch.bfloat16)
    prev = torch.are_deterministic_algorithms_enabled()
    prev_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        assert tka.deterministic_backward()
        grads = []
        for _ in range(2):
            qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
            o = tka.attention(qq, kk, vv, causal=True)
            grads.append(torch.autograd.grad(o, (qq, kk, vv), dout))
    finally:
        torch.use_deterministic_algorithms(prev)
        torch.utils.deterministic.fill_uninitialized_memory = prev_fill
    for a, b in zip(*grads):
        assert not torch.isnan(a).any()
        assert torch.equal(a, b)


@pytest.mark.parametrize("det", ["0", "1"])
def test_opcheck(det, monkeypatch):
    monkeypatch.setenv("TK_DETERMINISTIC", det)
    seed = new_seed()
    for (B, H, T, D, causal, dtype) in [(2, 3, 33, 64, True, torch.bfloat16),
                                        (1, 2, 17, 128, False, torch.float16)]:
        q, k, v = qkv_split(B, H, T, D, dtype, gen(seed))
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        torch.library.opcheck(torch.ops.tk.attention_fwd.default, (q, k, v, causal, 1.0 / math.sqrt(D), 0.0))
        qd, kd, vd = (t.detach() for t in (q, k, v))
        o, lse, rng = torch.ops.tk.attention_fwd(qd, kd, vd, causal, 0.125, 0.0)
        dout = randn(q.shape, gen(seed + 1), dtype)
        torch.library.opcheck(torch.ops.tk.attention_bwd.default,
                              (qd, kd, vd, o, lse, dout, causal, 0.125, det == "1", 0.0, rng))


def test_unsupported_inputs_raise_value_error():
    x = torch.randn(1, 2, 16, 64, device="cuda")
    with pytest.raises(ValueError, match="bfloat16 and float16"):
        tka.attention(x, x, x)
    y = torch.randn(1, 2, 16, 96, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="64, 128"):
        tka.attention(y, y, y)
    z = torch.randn(1, 2, 16, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="same shape"):
        tka.attention(z, z[:, :, :8], z[:, :, :8])
    assert tka.check_supported(z, z, z) is None
    assert tka.is_available()


# -----------------------------------------------------------------------------
# forward path: the sm_90a kernel (hopper_forward.cu) or the portable one (forward.cu).
# Every test in this file runs on whichever path TK_ATTENTION_PATH selects (default: hopper on sm_90),
# so `TK_ATTENTION_PATH=hopper pytest -m gpu tests/attention` and `TK_ATTENTION_PATH=portable ...`
# run the whole matrix on each path on one H100/H200. The tests below check the selection itself.

def hopper_ok() -> bool:
    return tka.hopper_reason(torch.device("cuda")) is None


def test_forward_path_selection(monkeypatch):
    HOPPER = hopper_ok()
    q = torch.empty(1, 1, 1, 64, device="cuda", dtype=torch.bfloat16)
    monkeypatch.setenv("TK_ATTENTION_PATH", "portable")
    assert tka.forward_path(q) == "portable"
    monkeypatch.setenv("TK_ATTENTION_PATH", "auto")
    assert tka.forward_path(q) == ("hopper" if HOPPER else "portable")
    assert tka.forward_path(q, dropout_p=0.1) == ("hopper" if HOPPER else "portable")  # both have dropout
    monkeypatch.setenv("TK_ATTENTION_PATH", "hopper")
    if HOPPER:
        assert tka.forward_path(q) == "hopper"
    else:
        with pytest.raises(RuntimeError, match="TK_ATTENTION_PATH=hopper, but"):
            tka.forward_path(q)
        with pytest.raises(RuntimeError, match="TK_ATTENTION_PATH=hopper, but"):
            tka.attention(q, q, q)
    assert torch.cuda.get_device_capability() != (9, 0) or HOPPER, tka.hopper_reason(q.device)


@pytest.mark.parametrize("B,H,T,D,causal", [(3, 5, 17, 64, True), (1, 3, 1000, 128, False), (2, 3, 2048, 64, False),
                                            (1, 2, 333, 128, True), (7, 1, 1, 64, False)])
def test_hopper_forward_matches_portable(B, H, T, D, causal, monkeypatch):
    """Both forwards on the same strided qkv views: o within bf16 rounding, lse within fp32 noise."""
    if not hopper_ok():
        pytest.skip(f"no Hopper forward here: {tka.hopper_reason(torch.device('cuda'))}")
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(seed))
    out = {}
    for path in ("hopper", "portable"):
        monkeypatch.setenv("TK_ATTENTION_PATH", path)
        assert tka.forward_path(q) == path
        poison_fwd(q)
        out[path] = torch.ops.tk.attention_fwd(q, k, v, causal, 1.0 / math.sqrt(D), 0.0)
    (oh, lh, rh), (op, lp, _) = out["hopper"], out["portable"]
    assert oh.stride() == op.stride() and lh.shape == lp.shape and rh.numel() == 0
    assert not torch.isnan(oh).any() and not torch.isnan(lh).any()
    o_err = rel_err(oh, op.double())
    lse_err = (lh - lp).abs().max().item()
    print(f"[hopper vs portable {(B, H, T, D, causal)} seed={seed}] o rel {o_err:.2e} lse max abs {lse_err:.2e}")
    assert o_err < 8e-3 and lse_err < 2e-3


# -----------------------------------------------------------------------------
# the small-shared-memory configurations (99 KB GPUs: RTX 30xx / 40xx), forced on a large GPU with
# TK_SMEM_LIMIT, which the portable backward's launcher reads on every call (csrc/configs.cu: device_budget)

SMALL_GPU_SMEM = 101_376  # opt-in shared memory per block of sm_86 / sm_89
# dK/dV shared memory of the small configurations (csrc/configs.cu: the CONFIGS table, select_dkdv)
SMALL_DKDV_BYTES = {64: 99_456, 128: 90_496}


@pytest.fixture
def small_smem(monkeypatch):
    """Make the backward choose the configurations of a 99 KB GPU, and check that it does. The portable
    backward (csrc/backward*.cu) is forced: TK_SMEM_LIMIT configures it alone, and on an H200 the default
    backward is the Hopper one."""
    ext = tka._ext()
    monkeypatch.setenv("TK_SMEM_LIMIT", str(SMALL_GPU_SMEM))
    monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    q = torch.empty(1, 1, 1, 64, device="cuda", dtype=torch.bfloat16)
    for det in (False, True):
        assert tka.backward_path(q, 0.0, det, q, q) == "portable"
        assert tka.backward_path(q, 0.2, det, q, q) == "portable"
    for D in (64, 128):
        for det in (False, True):
            assert ext.backward_dkdv_smem_bytes(D, det) == SMALL_DKDV_BYTES[D]


def test_smem_limit_override_is_read_per_call(monkeypatch):
    ext = tka._ext()
    assert ext.min_smem_bytes() == tka.MIN_SMEM_BYTES <= SMALL_GPU_SMEM
    monkeypatch.delenv("TK_SMEM_LIMIT", raising=False)
    optin = torch.cuda.get_device_properties(torch.cuda.current_device()).shared_memory_per_block_optin
    unlimited = {D: ext.backward_dkdv_smem_bytes(D, False) for D in (64, 128)}
    assert all(SMALL_DKDV_BYTES[D] <= b <= optin for D, b in unlimited.items()), unlimited
    monkeypatch.setenv("TK_SMEM_LIMIT", str(SMALL_GPU_SMEM))
    assert {D: ext.backward_dkdv_smem_bytes(D, False) for D in (64, 128)} == SMALL_DKDV_BYTES
    monkeypatch.setenv("TK_SMEM_LIMIT", "0")  # not a positive number: no cap
    assert {D: ext.backward_dkdv_smem_bytes(D, False) for D in (64, 128)} == unlimited
    monkeypatch.delenv("TK_SMEM_LIMIT")
    assert {D: ext.backward_dkdv_smem_bytes(D, False) for D in (64, 128)} == unlimited


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 17, 100, 255, 1000, 2048])
def test_small_smem_forward_backward_vs_float64(T, D, causal, dtype_name, small_smem):
    """The accuracy matrix above, on the 99 KB configurations (non-contiguous qkv views, B*H odd)."""
    dtype = DTYPES[dtype_name]
    B, H = batch_heads(T, D)
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, dtype, gen(seed))
    run_case(q, k, v, causal, None, seed, f"small-smem B={B} H={H} T={T} D={D} causal={causal} {dtype_name}")


@pytest.mark.parametrize("D", [64, 128])
def test_small_smem_layouts_and_scale(D, small_smem):
    """A batch-strided layout and a peaked softmax (scale 0.4) on the 99 KB configurations."""
    B, H, T, dtype = 3, 3, 257, torch.bfloat16
    seed = new_seed()
    g = gen(seed)
    pad = 8 * 37
    def padded():
        flat = randn((B * (H * T * D + pad),), g, dtype)
        return flat.as_strided((B, H, T, D), (H * T * D + pad, T * D, D, 1))
    q, k, v = padded(), padded(), padded()
    for causal in (True, False):
        run_case(q, k, v, causal, None, seed, f"small-smem batch_stride D={D} causal={causal}")
        run_case(q, k, v, causal, 0.4, seed, f"small-smem scale=0.4 D={D} causal={causal}")


@pytest.mark.parametrize("B,H,T,D,causal", [(3, 1, 777, 64, True), (1, 3, 1000, 64, False),
                                            (3, 1, 777, 128, True), (1, 3, 1000, 128, False)])
def test_small_smem_deterministic(B, H, T, D, causal, small_smem, monkeypatch):
    """Deterministic mode on the 99 KB configurations: accurate (float64 reference), bitwise
    repeatable, and dK/dV bitwise equal to the default (atomic dQ) mode's."""
    seed = new_seed()
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(seed))
    run_case(q, k, v, causal, None, seed, f"small-smem deterministic B={B} H={H} T={T} D={D} causal={causal}")
    q, k, v, o, lse, dout, scale = _bwd_inputs(B, H, T, D, causal, seed)
    runs = []
    for _ in range(2):
        poison_bwd(q)
        runs.append(torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, True, 0.0, NO_RNG))
    for name, a, b in zip(("dq", "dk", "dv"), *runs):
        assert not torch.isnan(a).any(), f"deterministic {name}: NaN"
        assert torch.equal(a, b), f"deterministic {name} differs between runs"
    poison_bwd(q)
    fast = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, False, 0.0, NO_RNG)
    assert torch.equal(fast[1], runs[0][1]) and torch.equal(fast[2], runs[0][2]), \
        "dK/dV differ between deterministic and default modes"
    e = rel_err(fast[0], runs[0][0].double())
    assert e < 2e-3, f"atomic dQ differs from deterministic dQ by {e:.3e}"


# -----------------------------------------------------------------------------
# the GPT model under torch.compile

def _gpt_step(model, idx, targets):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        _, loss = model(idx, targets)
    loss.backward()
    grads = {n.removeprefix("_orig_mod."): p.grad.detach().clone()
             for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return loss.detach().float(), grads


@pytest.mark.parametrize("n_head", [2, 1], ids=["D64", "D128"])
def test_compiled_gpt_matches_eager(n_head):
    from model import GPT, GPTConfig
    seed = new_seed()
    torch.manual_seed(seed)
    cfg = dict(block_size=256, vocab_size=512, n_layer=2, n_head=n_head, n_embd=128, dropout=0.0, bias=True)
    model_tk = GPT(GPTConfig(**cfg, kernels="tk")).cuda()
    model_torch = GPT(GPTConfig(**cfg, kernels="torch")).cuda()
    model_torch.load_state_dict(model_tk.state_dict())
    B, T = 4, 255
    idx = torch.randint(0, cfg["vocab_size"], (B, T), device="cuda")
    targets = torch.randint(0, cfg["vocab_size"], (B, T), device="cuda")

    # one graph, and it calls our op (fullgraph=True below also fails on any graph break); the plan
    # is made first, as train.py does (a first forward under torch.compile would make it, with a
    # graph break in that first graph only)
    plan = model_tk.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("attention") == "tk" and plan.path("attention", training=True) == "tk"
    with torch.autocast("cuda", dtype=torch.bfloat16):  # as in _gpt_step: the op takes bf16, not fp32
        explained = torch._dynamo.explain(model_tk)(idx, targets)
    assert explained.graph_break_count == 0, str(explained)
    # the model's attention takes the fused projection (tests/attention/test_attention_qkv_gpu.py)
    assert any("attention_qkv_fwd" in g.code for g in explained.graphs), "tk op not in the traced graph"
    torch._dynamo.reset()

    compiled = torch.compile(copy.deepcopy(model_tk), fullgraph=True)
    loss_e, grads_e = _gpt_step(model_tk, idx, targets)
    loss_c, grads_c = _gpt_step(compiled, idx, targets)
    loss_t, grads_t = _gpt_step(model_torch, idx, targets)
    assert torch.isfinite(loss_e) and torch.isfinite(loss_c)
    assert set(grads_c) == set(grads_e) == set(grads_t)
    names = sorted(grads_e)
    flat = lambda grads: torch.cat([grads[n].double().flatten() for n in names])
    all_c, all_t = rel_err(flat(grads_c), flat(grads_e).double()), rel_err(flat(grads_t), flat(grads_e))
    worst_c = max(rel_err(grads_c[n], grads_e[n].double()) for n in names)
    worst_t = max(rel_err(grads_t[n], grads_e[n].double()) for n in names)
    print(f"[gpt n_head={n_head} seed={seed}] loss eager {loss_e.item():.5f} compiled {loss_c.item():.5f} "
          f"torch {loss_t.item():.5f}; grad rel err compiled {all_c:.2e} (worst param {worst_c:.2e}), "
          f"torch {all_t:.2e} (worst param {worst_t:.2e})")
    assert abs(loss_c.item() - loss_e.item()) < 1e-2
    assert abs(loss_t.item() - loss_e.item()) < 1e-2
    assert all_c < 3e-2 and worst_c < 1e-1, "compiled vs eager grads differ"
    assert all_t < 3e-2 and worst_t < 1e-1, "tk vs torch (SDPA) grads differ"


# -----------------------------------------------------------------------------
# the configurations between the small ones and the H100/H200 defaults: an A100-sized budget makes the
# portable backward pick the red.add dQ path (the TMA bulk dQ path of sm_90 needs more shared memory).
# TK_SMEM_LIMIT configures the portable backward only, and on an sm_90 GPU the default kernels are the
# Hopper ones, so the test forces the portable forward and backward (what an A100 runs) and checks that
# the ops take them: an H200 then tests the A100's kernels and configurations.

A100_SMEM = 170_000  # fits the transposed (D=64, 166,016 B) and two-barrier split (D=128, 164,992 B) kernels
A100_DKDV_BYTES = {64: 166_016, 128: 164_992}


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 100, 1000, 2048])
def test_atomic_dq_configs_vs_float64(T, D, causal, monkeypatch):
    ext = tka._ext()
    monkeypatch.setenv("TK_SMEM_LIMIT", str(A100_SMEM))
    monkeypatch.setenv("TK_ATTENTION_PATH", "portable")
    monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    monkeypatch.delenv("TK_DETERMINISTIC", raising=False)  # the atomic (red.add) dQ path, not the deterministic one
    assert ext.backward_dkdv_smem_bytes(D, False) == A100_DKDV_BYTES[D]
    B, H = batch_heads(T, D)
    seed = new_seed()
    q, k, v = qkv_split(B, H, T, D, torch.bfloat16, gen(seed))
    assert not tka.deterministic_backward()
    assert tka.forward_path(q, 0.0, k, v) == "portable"
    assert tka.backward_path(q, 0.0, False, k, v) == "portable"
    run_case(q, k, v, causal, None, seed, f"A100-budget B={B} H={H} T={T} D={D} causal={causal}")
