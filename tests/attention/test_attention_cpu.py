"""CPU tests of tk_kernels/families/attention/ops.py: input validation and the fake (meta) implementations of the
tk::attention_fwd / tk::attention_bwd custom ops. No GPU and no compiled extension needed."""

import re
import types

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tk_kernels.families.attention import ops as tka


def _qkv(shape=(2, 3, 17, 64), dtype=torch.bfloat16, device="cpu"):
    return tuple(torch.randn(shape, dtype=dtype, device=device) for _ in range(3))


# -----------------------------------------------------------------------------
# validation

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_cpu_tensors_are_rejected(dtype):
    q, k, v = _qkv(dtype=dtype)
    reason = tka.check_supported(q, k, v)
    assert reason is not None and "CUDA" in reason
    with pytest.raises(ValueError, match="CUDA"):
        tka.attention(q, k, v)
    with pytest.raises(ValueError, match="CUDA"):
        tka.attention(q, k, v, causal=False, scale=0.5)


def test_tk_kernels_package_exports():
    import tk_kernels
    import tk_kernels.families.attention as family
    assert tk_kernels.attention is tka.attention and callable(tk_kernels.attention)
    assert tk_kernels.check_supported is tka.check_supported
    assert tk_kernels.is_available is tka.is_available
    assert family.attention is tka.attention and family.MIN_SMEM_BYTES == tka.MIN_SMEM_BYTES
    assert type(tk_kernels) is types.ModuleType  # a plain module: no module class override


def test_is_available_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert tka.is_available() is False
    assert "CUDA" in tka.unavailable_reason()


# The tensor checks are exercised on fake CUDA tensors (FakeTensorMode needs no GPU), so each
# reason below is the one a real GPU user would see.
@pytest.mark.parametrize("case,expect", [
    (dict(dtype=torch.float32), "bfloat16 and float16"),
    (dict(dtype=torch.float64), "bfloat16 and float16"),
    (dict(shape=(2, 3, 17, 32)), "head dim D in (64, 128)"),
    (dict(shape=(2, 3, 17, 96)), "head dim D in (64, 128)"),
    (dict(shape=(2, 3, 17, 256)), "head dim D in (64, 128)"),
    (dict(shape=(3, 17, 64)), "4-D (B, H, T, D)"),
    (dict(shape=(2, 3, 0, 64)), "T >= 1"),
    (dict(k_shape=(2, 3, 9, 64)), "same shape"),
    (dict(k_shape=(2, 1, 17, 64)), "same shape"),
    (dict(v_dtype=torch.float16), "same dtype"),
    (dict(k_device="cuda:1"), "same device"),
    (dict(scale="0.1"), "scale"),
    (dict(scale=0.0), "positive finite scale"),
    (dict(scale=-0.125), "positive finite scale"),
    (dict(scale=float("nan")), "positive finite scale"),
    (dict(causal=1), "causal must be a bool"),
])
def test_tensor_reasons(case, expect):
    shape = case.get("shape", (2, 3, 17, 64))
    dtype = case.get("dtype", torch.bfloat16)
    with FakeTensorMode():
        q = torch.empty(shape, dtype=dtype, device="cuda")
        k = torch.empty(case.get("k_shape", shape), dtype=dtype, device=case.get("k_device", "cuda"))
        v = torch.empty(shape, dtype=case.get("v_dtype", dtype), device="cuda")
        reason = tka.tensor_reason(q, k, v, case.get("causal", True), case.get("scale", None))
    assert reason is not None and expect in reason, reason


def test_tensor_reason_accepts_supported_inputs():
    with FakeTensorMode():
        for dtype in (torch.bfloat16, torch.float16):
            for D in (64, 128):
                for T in (1, 17, 4096):
                    q, k, v = (torch.empty(1, 3, T, D, dtype=dtype, device="cuda") for _ in range(3))
                    assert tka.tensor_reason(q, k, v, True, None) is None
                    assert tka.tensor_reason(q, k, v, False, 0.3) is None
        # nanoGPT's split of a fused qkv: non-contiguous views are fine
        qkv = torch.empty(2, 100, 3, 4, 64, dtype=torch.bfloat16, device="cuda")
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        assert tka.tensor_reason(q, k, v, True, None) is None


# The GPU checks of a made-up GPU: capability and opt-in shared memory per block as a real
# device reports them (RTX 3090 / 4090: 101,376 bytes).
@pytest.mark.parametrize("capability,smem,expect", [
    ((8, 0), 166_912, None),                    # A100
    ((9, 0), 232_448, None),                    # H100 / H200
    ((8, 6), 101_376, None),                    # RTX 3090: the small-smem configurations
    ((8, 9), 101_376, None),                    # RTX 4090
    ((8, 6), tka.MIN_SMEM_BYTES, None),         # exactly enough
    ((8, 6), None, None),                       # a torch that does not report it
    ((8, 6), tka.MIN_SMEM_BYTES - 1, "shared memory per block"),
    ((8, 7), 49_152, "shared memory per block"),
    ((7, 5), 65_536, "compute capability >= 8.0"),
])
def test_gpu_reason_capability_and_shared_memory(capability, smem, expect):
    reason = tka.gpu_reason(capability, smem, "Made-up GPU")
    if expect is None:
        assert reason is None
    else:
        assert reason is not None and expect in reason and "Made-up GPU" in reason, reason
        if "shared memory" in expect:
            assert str(tka.MIN_SMEM_BYTES) in reason and str(smem) in reason


@pytest.mark.parametrize("device,dtype,head_dim,expect", [
    ("cpu", torch.bfloat16, 64, "no CUDA GPU"),
    ("meta", torch.bfloat16, 64, "no CUDA GPU"),
    ("cuda", torch.float32, 64, "bfloat16 and float16"),
    ("cuda", torch.bfloat16, 32, "head dim D in (64, 128)"),
])
def test_unsupported_reason_before_any_gpu_query(device, dtype, head_dim, expect):
    """The plan-time check rejects device type, dtype and head dim without touching a GPU
    (on a machine without one, every CUDA case says so instead)."""
    reason = tka.unsupported_reason(torch.device(device), dtype, head_dim)
    if device == "cuda" and not torch.cuda.is_available():
        expect = "no usable CUDA GPU"
    assert reason is not None and expect in reason, reason


def test_non_tensor_input():
    reason = tka.check_supported([1.0], torch.randn(1), torch.randn(1))
    assert "must be a torch.Tensor" in reason


# -----------------------------------------------------------------------------
# fake implementations: shapes, dtypes and strides match what the binding allocates

def _bthd_strides(B, H, T, D):
    return (T * H * D, D, H * D, 1)


@pytest.mark.parametrize("B,H,T,D", [(2, 3, 17, 64), (1, 1, 1, 128), (3, 1, 256, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fake_forward_shapes_and_strides(B, H, T, D, dtype):
    with FakeTensorMode():
        qkv = torch.empty(B, T, 3, H, D, dtype=dtype, device="cuda")
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, 0.125, 0.0)
        o2, lse2, rng2 = torch.ops.tk.attention_fwd(q, k, v, True, 0.125, 0.2)
        ref = torch.empty(B, T, H, D, dtype=dtype, device="cuda").transpose(1, 2)
    # rng_state: empty without dropout (nothing drawn), (seed, offset) with it
    assert rng.shape == (0,) and rng2.shape == (2,) and rng2.dtype == torch.int64 and rng2.device.type == "cuda"
    assert o2.stride() == o.stride() and lse2.shape == lse.shape
    assert o.shape == (B, H, T, D) and o.dtype == dtype and o.device.type == "cuda"
    assert o.stride() == ref.stride() == _bthd_strides(B, H, T, D)
    assert lse.shape == (B, H, T) and lse.dtype == torch.float32 and lse.is_contiguous()
    # the model's y.transpose(1, 2).view(B, T, C) needs no copy
    assert o.transpose(1, 2).is_contiguous()


@pytest.mark.parametrize("B,H,T,D", [(2, 3, 17, 64), (1, 2, 5, 128)])
def test_fake_backward_shapes_and_strides(B, H, T, D):
    with FakeTensorMode():
        q, k, v, o, do = (torch.empty(B, H, T, D, dtype=torch.float16, device="cuda") for _ in range(5))
        lse = torch.empty(B, H, T, dtype=torch.float32, device="cuda")
        rng = torch.empty(2, dtype=torch.int64, device="cuda")
        dq, dk, dv = torch.ops.tk.attention_bwd(q, k, v, o, lse, do, False, 0.1, True, 0.3, rng)
    for g in (dq, dk, dv):
        assert g.shape == (B, H, T, D) and g.dtype == torch.float16
        assert g.stride() == _bthd_strides(B, H, T, D)


def test_autograd_backward_calls_bwd_op_with_deterministic_flag(monkeypatch):
    """The registered backward passes causal/scale from the forward and the deterministic setting."""
    calls = []

    def fake_bwd(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state):
        calls.append((causal, scale, deterministic, dropout_p, rng_state))
        return q, k, v

    monkeypatch.setattr(torch.ops.tk, "attention_bwd", fake_bwd, raising=False)
    q, k, v, o, do = (torch.randn(1, 1, 2, 64) for _ in range(5))
    lse = torch.randn(1, 1, 2)
    rng = torch.tensor([7, 12])
    ctx = types.SimpleNamespace(saved_tensors=(q, k, v, o, lse, rng), causal=False, scale=0.25, dropout_p=0.2)
    monkeypatch.delenv("TK_DETERMINISTIC", raising=False)
    grads = tka._backward(ctx, do, None, None)
    assert grads[3:] == (None, None, None) and grads[0] is q
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    tka._backward(ctx, do, None, None)
    monkeypatch.delenv("TK_DETERMINISTIC")
    prev = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        tka._backward(ctx, do, None, None)
    finally:
        torch.use_deterministic_algorithms(prev)
    # the backward regenerates the forward's mask: same dropout_p, the rng_state the forward saved
    assert [c[:4] for c in calls] == [(False, 0.25, False, 0.2), (False, 0.25, True, 0.2), (False, 0.25, True, 0.2)]
    assert all(c[4] is rng for c in calls)


def test_kernel_ready_copies_only_when_needed():
    x = torch.randn(2, 5, 3, 4, 64)
    view = x[:, :, 1].transpose(1, 2)              # qkv split: used in place
    assert tka._kernel_ready(view) is view
    bcast = torch.randn(1, 1, 1, 64).expand(2, 4, 5, 64)     # stride 0 outside the last dim: the
    assert tka._kernel_ready(bcast) is bcast                  # kernels only read inputs, so fine
    expanded = torch.ones(()).expand(2, 4, 5, 64)             # grad of o.sum(): all strides 0
    fixed = tka._kernel_ready(expanded)
    assert fixed is not expanded and fixed.is_contiguous() and torch.equal(fixed, expanded)
    odd = torch.randn(2, 4, 5, 65)[..., 1:]       # last dim contiguous but misaligned rows
    fixed = tka._kernel_ready(odd)
    assert fixed.is_contiguous() and fixed.data_ptr() % 16 == 0 and torch.equal(fixed, odd)
    shifted = torch.randn(2 * 4 * 5 * 64 + 1)[1:].view(2, 4, 5, 64)  # contiguous, base off by 4 bytes
    assert shifted.data_ptr() % 16 != 0
    fixed = tka._kernel_ready(shifted)
    assert fixed.data_ptr() % 16 == 0 and torch.equal(fixed, shifted)
    col = torch.randn(2, 4, 64, 5).transpose(-1, -2)   # last dim not contiguous
    assert tka._kernel_ready(col).stride(-1) == 1


def test_ops_have_schemas():
    assert "tk::attention_fwd" in str(torch.ops.tk.attention_fwd.default._schema)
    assert "tk::attention_bwd" in str(torch.ops.tk.attention_bwd.default._schema)



# -----------------------------------------------------------------------------
# forward path (Hopper / portable) selection

def test_forward_path_env_values(monkeypatch):
    q = torch.empty(1, 1, 1, 64)
    monkeypatch.setenv("TK_ATTENTION_PATH", "bogus")
    with pytest.raises(ValueError, match="TK_ATTENTION_PATH must be one of auto, hopper, portable"):
        tka.forward_path(q)
    # portable never asks about the GPU (hopper_reason would fail on CPU), with dropout or without
    monkeypatch.setattr(tka, "hopper_reason", lambda device: pytest.fail("hopper_reason called"))
    monkeypatch.setenv("TK_ATTENTION_PATH", "Portable")
    assert tka.forward_path(q) == "portable"
    assert tka.forward_path(q, dropout_p=0.1) == "portable"
    # dropout takes the Hopper forward wherever p = 0 does (both kernels apply the same mask)
    for reason, want in ((None, "hopper"), ("no sm_90 here", "portable")):
        monkeypatch.setattr(tka, "hopper_reason", lambda device: reason)
        for env in ("", "auto"):
            monkeypatch.setenv("TK_ATTENTION_PATH", env)
            assert tka.forward_path(q, dropout_p=0.1) == want
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    monkeypatch.setenv("TK_ATTENTION_PATH", "hopper")
    assert tka.forward_path(q, dropout_p=0.1) == "hopper"


@pytest.mark.parametrize("reason", [None, "no sm_90 here"])
def test_forward_path_auto_and_forced_hopper(monkeypatch, reason):
    q = torch.empty(1, 1, 1, 64)
    monkeypatch.setattr(tka, "hopper_reason", lambda device: reason)
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    assert tka.forward_path(q) == ("hopper" if reason is None else "portable")
    monkeypatch.setenv("TK_ATTENTION_PATH", "hopper")
    if reason is None:
        assert tka.forward_path(q) == "hopper"
    else:
        with pytest.raises(RuntimeError, match="TK_ATTENTION_PATH=hopper, but no sm_90 here"):
            tka.forward_path(q)


def test_forward_path_layouts_tma_cannot_read(monkeypatch):
    """A head-broadcast k/v (stride 0) takes the portable kernel by default; forced onto the Hopper
    path it stays there (attention_fwd copies it)."""
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    q = torch.empty(2, 4, 16, 64, dtype=torch.bfloat16)
    k = torch.empty(2, 1, 16, 64, dtype=torch.bfloat16).expand(2, 4, 16, 64)
    assert tka.tma_ready(q) and not tka.tma_ready(k)
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    assert tka.forward_path(q, 0.0, q, q) == "hopper"
    assert tka.forward_path(q, 0.0, k, k) == "portable"
    monkeypatch.setenv("TK_ATTENTION_PATH", "hopper")
    assert tka.forward_path(q, 0.0, k, k) == "hopper"


def test_backward_path_env_values(monkeypatch):
    """TK_ATTENTION_BWD: portable never asks about the GPU; the default is hopper (where forward_path says
    hopper); a bad value is one clear error."""
    q = torch.empty(1, 1, 1, 64)
    monkeypatch.setattr(tka, "hopper_reason", lambda device: pytest.fail("hopper_reason called"))
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    for env in ("portable", " Portable "):
        monkeypatch.setenv("TK_ATTENTION_BWD", env)
        assert tka.backward_path(q) == "portable"
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    for env in (None, "", "hopper"):
        if env is None:
            monkeypatch.delenv("TK_ATTENTION_BWD", raising=False)
        else:
            monkeypatch.setenv("TK_ATTENTION_BWD", env)
        assert tka.backward_path(q) == "hopper"
    monkeypatch.setattr(tka, "hopper_reason", lambda device: pytest.fail("hopper_reason called"))
    monkeypatch.setenv("TK_ATTENTION_BWD", "fast")
    with pytest.raises(ValueError, match="TK_ATTENTION_BWD must be one of portable, hopper, got 'fast'"):
        tka.backward_path(q)
    # the deterministic mode stays on the portable backward, without a GPU query (dropout or not)
    monkeypatch.setenv("TK_ATTENTION_BWD", "hopper")
    assert tka.backward_path(q, 0.0, True) == "portable"
    assert tka.backward_path(q, 0.1, True) == "portable"
    # dropout takes the Hopper backward where the forward takes the Hopper path (the same mask, regenerated)
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    assert tka.backward_path(q, 0.1) == "hopper"
    monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    assert tka.backward_path(q, 0.1) == "portable"


@pytest.mark.parametrize("reason", [None, "no sm_90 here"])
def test_backward_path_follows_forward_path(monkeypatch, reason):
    """With TK_ATTENTION_BWD=hopper the backward takes the Hopper kernel exactly where forward_path says
    hopper (TK_ATTENTION_PATH and the TMA layout check included)."""
    monkeypatch.setattr(tka, "hopper_reason", lambda device: reason)
    monkeypatch.setenv("TK_ATTENTION_BWD", "hopper")
    q = torch.empty(2, 4, 16, 64, dtype=torch.bfloat16)
    k = torch.empty(2, 1, 16, 64, dtype=torch.bfloat16).expand(2, 4, 16, 64)
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    assert tka.backward_path(q, 0.0, False, q, q) == ("hopper" if reason is None else "portable")
    assert tka.backward_path(q, 0.0, False, k, k) == "portable"
    monkeypatch.setenv("TK_ATTENTION_PATH", "portable")
    assert tka.backward_path(q, 0.0, False, q, q) == "portable"
    monkeypatch.setenv("TK_ATTENTION_PATH", "hopper")
    if reason is None:
        assert tka.backward_path(q, 0.0, False, k, k) == "hopper"
    else:
        with pytest.raises(RuntimeError, match="TK_ATTENTION_PATH=hopper, but no sm_90 here"):
            tka.backward_path(q)


@pytest.mark.parametrize("capability,archs,expect", [
    ((8, 0), ("sm_80", "sm_90a"), "needs an sm_90 GPU"),
    ((12, 0), ("sm_120",), "needs an sm_90 GPU"),
    ((9, 0), ("sm_80", "sm_90"), "without sm_90a"),
    ((9, 0), ("sm_80", "sm_90a"), None),
])
def test_hopper_reason(monkeypatch, capability, archs, expect):
    monkeypatch.setattr(tka, "_hopper_reasons", {})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Test GPU")
    monkeypatch.setattr(tka, "_ext", lambda: types.SimpleNamespace(tk_archs=archs))
    reason = tka.hopper_reason(torch.device("cuda", 0))
    if expect is None:
        assert reason is None
    else:
        assert expect in reason


# -----------------------------------------------------------------------------
# the eager path (_EagerAttention): the op implementations under an autograd.Function

def _in_bthd_memory(x):
    """x (B, H, T, D) copied into (B, T, H, D) memory, the layout the extension's outputs have."""
    B, H, T, D = x.shape
    return x.new_empty((B, T, H, D)).transpose(1, 2).copy_(x)


class AttentionExtStandIn:
    """The extension's forward/backward entry points in PyTorch (SDPA math in float64), recording which
    ones were called: the eager path runs on a CPU with it."""

    def __init__(self):
        self.calls = []

    def _forward(self, q, k, v, causal, scale):
        s = (q.double() @ k.double().transpose(-1, -2)) * scale
        if causal:
            T = q.shape[2]
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        lse = s.logsumexp(-1)
        o = (s - lse[..., None]).exp() @ v.double()
        return _in_bthd_memory(o.to(q.dtype)), lse.float(), q.new_empty((0,), dtype=torch.int64)

    def _backward(self, q, k, v, dout, causal, scale):
        # the flash backward's formulas (no autograd: this runs inside compiled backward graphs too)
        q2, k2, v2, do = (t.double() for t in (q, k, v, dout))
        s = (q2 @ k2.transpose(-1, -2)) * scale
        if causal:
            T = q.shape[2]
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        p = s.softmax(-1)
        dp = do @ v2.transpose(-1, -2)
        ds = p * (dp - (p * dp).sum(-1, keepdim=True))
        grads = ((ds @ k2) * scale, (ds.transpose(-1, -2) @ q2) * scale, p.transpose(-1, -2) @ do)
        return tuple(_in_bthd_memory(g.to(q.dtype)) for g in grads)

    def attention_forward_hopper(self, q, k, v, causal, scale, dropout_p):
        self.calls.append("forward_hopper")
        return self._forward(q, k, v, causal, scale)

    def attention_forward(self, q, k, v, causal, scale, dropout_p):
        self.calls.append("forward")
        return self._forward(q, k, v, causal, scale)

    def attention_backward_hopper(self, q, k, v, o, lse, dout, causal, scale, dropout_p, rng_state):
        self.calls.append("backward_hopper")
        return self._backward(q, k, v, dout, causal, scale)

    def attention_backward(self, q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state):
        self.calls.append(f"backward(deterministic={deterministic})")
        return self._backward(q, k, v, dout, causal, scale)


@pytest.mark.parametrize("causal", [True, False])
def test_eager_path_gradients(monkeypatch, causal):
    """attention_op outside torch.compile runs the op implementations through _EagerAttention (the
    custom ops have no CPU kernel: calling them here would fail), with the registered backward: the
    output and the gradients of SDPA, the backward the path choice says (TK_DETERMINISTIC goes to the
    portable one), views of a fused qkv tensor and an expanded output gradient."""
    ext = AttentionExtStandIn()
    monkeypatch.setattr(tka, "_ext", lambda: ext)
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    monkeypatch.delenv("TK_ATTENTION_PATH", raising=False)
    monkeypatch.delenv("TK_ATTENTION_BWD", raising=False)
    torch.manual_seed(0)
    B, H, T, D = 2, 3, 9, 64
    qkv = torch.randn(B, T, 3, H, D, requires_grad=True)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, T, D) views, as model.py makes them
    for deterministic in ("0", "1"):
        monkeypatch.setenv("TK_DETERMINISTIC", deterministic)
        qkv.grad = None
        o = tka.attention_op(q, k, v, causal)
        o.sum().backward()  # the gradient of o is an expanded (stride 0) tensor
        ref_qkv = qkv.detach().double().requires_grad_()
        rq, rk, rv = ref_qkv.permute(2, 0, 3, 1, 4).unbind(0)
        ref = torch.nn.functional.scaled_dot_product_attention(rq, rk, rv, is_causal=causal)
        ref.sum().backward()
        torch.testing.assert_close(o.double(), ref.detach())
        torch.testing.assert_close(qkv.grad.double(), ref_qkv.grad)
    assert ext.calls == ["forward_hopper", "backward_hopper", "forward_hopper", "backward(deterministic=True)"]
    with torch.no_grad():  # no graph: nothing saved, the forward only
        o = tka.attention_op(q, k, v, causal)
    assert not o.requires_grad and ext.calls[-1] == "forward_hopper"


# -----------------------------------------------------------------------------
# the fused-projection ops tk::attention_qkv_fwd / tk::attention_qkv_bwd

class QKVExtStandIn(AttentionExtStandIn):
    """AttentionExtStandIn with the extension's attention_backward_into: the same gradients, copied into the
    given outputs (and the outputs' layout recorded)."""

    def __init__(self):
        super().__init__()
        self.outs = []

    def attention_backward_into(self, q, k, v, o, lse, dout, dq, dk, dv, causal, scale, deterministic, dropout_p,
                                rng_state, hopper, dbias=None):
        self.calls.append(f"backward_into(hopper={hopper}, deterministic={deterministic})"
                          + ("" if dbias is None else ", dbias"))
        self.outs.append([(t.data_ptr(), t.shape, t.stride()) for t in (dq, dk, dv)])
        for out, g in zip((dq, dk, dv), self._backward(q, k, v, dout, causal, scale)):
            out.copy_(g)
        if dbias is not None:  # the kernels' row passes: dq's sums, 0, dout's sums (qkv_bias_grad.cuh)
            hd = q.shape[1] * q.shape[3]
            dbias[:hd] = dq.sum((0, 2), dtype=torch.float32).flatten()
            dbias[hd:2 * hd] = 0.0
            dbias[2 * hd:] = dout.sum((0, 2), dtype=torch.float32).flatten()


@pytest.fixture
def qkv_ext(monkeypatch):
    """The stand-in extension on the default path choice of an H200 (Hopper forward and backward)."""
    ext = QKVExtStandIn()
    monkeypatch.setattr(tka, "_ext", lambda: ext)
    monkeypatch.setattr(tka, "hopper_reason", lambda device: None)
    for name in ("TK_ATTENTION_PATH", "TK_ATTENTION_BWD", "TK_DETERMINISTIC"):
        monkeypatch.delenv(name, raising=False)
    return ext


@pytest.mark.parametrize("B,H,T,D", [(2, 3, 17, 64), (1, 1, 1, 128), (3, 2, 256, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fake_qkv_ops_match_the_qkv_views_ops(B, H, T, D, dtype):
    """The fused ops' fakes: the forward's outputs are exactly attention_fwd's on the views (o in (B, T, H, D)
    memory), the backward's is one contiguous tensor of qkv's shape."""
    with FakeTensorMode():
        qkv = torch.empty(B, T, 3 * H * D, dtype=dtype, device="cuda")
        q, k, v = tka.qkv_views(qkv, H)
        for p in (0.0, 0.2):
            o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, True, 0.125, p)
            o2, lse2, rng2 = torch.ops.tk.attention_fwd(q, k, v, True, 0.125, p)
            for a, b in ((o, o2), (lse, lse2), (rng, rng2)):
                assert (a.shape, a.stride(), a.dtype, a.device) == (b.shape, b.stride(), b.dtype, b.device)
            assert o.stride() == _bthd_strides(B, H, T, D)
        dqkv, dbias = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, o, H, True, 0.125, False, 0.2, rng)
        o3, _, _ = torch.ops.tk.attention_qkv_fwd(qkv, H, True, 0.125, 0.0, torch.empty(3 * H * D, device="cuda"))
        _, dbias2 = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, o, H, True, 0.125, False, 0.0, rng, True)
    assert dqkv.shape == (B, T, 3 * H * D) and dqkv.dtype == dtype and dqkv.device.type == "cuda"
    assert dqkv.is_contiguous() and dbias.shape == (0,)
    assert o3.shape == o.shape and dbias2.shape == (3 * H * D,) and dbias2.dtype == torch.float32


def test_qkv_backward_writes_the_views_of_one_buffer(qkv_ext):
    """The real backward implementation allocates what its fake promises (one contiguous tensor of qkv's shape)
    and hands the extension its three (B, H, T, D) views, dq at offset 0, dk at H * D, dv at 2 H * D elements."""
    B, H, T, D = 2, 3, 5, 64
    qkv = torch.randn(B, T, 3 * H * D)
    o, lse, rng = tka.attention_qkv_fwd._init_fn(qkv, H, True, 0.125, 0.0)
    dqkv, dbias = tka._qkv_backward_impl(qkv, o, lse, torch.randn(B, H, T, D), H, True, 0.125, False, 0.0, rng)
    with FakeTensorMode():
        fake, fake_db = tka._attention_qkv_bwd_fake(torch.empty(B, T, 3 * H * D, device="cuda"), None, None, None, H,
                                                    True, 0.125, False, 0.0, None)
    assert dbias.shape == fake_db.shape == (0,)
    assert (dqkv.shape, dqkv.stride()) == (fake.shape, fake.stride()) and dqkv.is_contiguous()
    base, e = dqkv.data_ptr(), dqkv.element_size()
    view_strides = (T * 3 * H * D, D, 3 * H * D, 1)
    assert qkv_ext.outs == [[(base + i * H * D * e, (B, H, T, D), view_strides) for i in range(3)]]
    assert qkv_ext.calls == ["forward_hopper", "backward_into(hopper=True, deterministic=False)"]


@pytest.mark.parametrize("bad,expect", [
    (dict(shape=(2, 5, 3, 128)), "(B, T, 3 * n_head * D)"),
    (dict(shape=(2, 5, 3 * 64 * 2 + 3)), "(B, T, 3 * n_head * D)"),
    (dict(n_head=0), "n_head must be a positive int"),
    (dict(n_head=2.0), "n_head must be a positive int"),
])
def test_qkv_shape_errors(bad, expect):
    qkv = torch.empty(bad.get("shape", (2, 5, 3 * 64 * 2)))
    n_head = bad.get("n_head", 2)
    assert expect in tka.qkv_shape_reason(qkv, n_head)
    with pytest.raises(ValueError, match=re.escape(expect)):
        tka._check_qkv(qkv, n_head)
    with pytest.raises(ValueError, match=re.escape(expect)):
        tka.attention_qkv(qkv, n_head)
    assert tka.qkv_shape_reason(torch.empty(2, 5, 3 * 64 * 2), 2) is None


def test_attention_qkv_checks_like_attention():
    """tk_kernels.attention_qkv gives attention's reasons for what the views cannot be (here: CPU tensors)."""
    qkv = torch.randn(1, 4, 3 * 2 * 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="CUDA"):
        tka.attention_qkv(qkv, 2)
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        tka.attention_qkv([1.0], 2)


def test_qkv_autograd_backward_calls_bwd_op(monkeypatch):
    """The registered backward of attention_qkv_fwd passes qkv, o, lse, dout, n_head, causal, scale, the
    deterministic setting, dropout_p and the forward's rng_state to tk::attention_qkv_bwd."""
    calls = []

    def fake_bwd(qkv, o, lse, dout, n_head, causal, scale, deterministic, dropout_p, rng_state, bias_grad):
        calls.append((n_head, causal, scale, deterministic, dropout_p, bias_grad, rng_state))
        return qkv, torch.ones(qkv.shape[-1] if bias_grad else 0)

    monkeypatch.setattr(torch.ops.tk, "attention_qkv_bwd", fake_bwd, raising=False)
    qkv, o, do = torch.randn(1, 2, 3 * 64), torch.randn(1, 1, 2, 64), torch.randn(1, 1, 2, 64)
    lse, rng = torch.randn(1, 1, 2), torch.tensor([7, 12])
    ctx = types.SimpleNamespace(saved_tensors=(qkv, o, lse, rng), n_head=1, causal=False, scale=0.25, dropout_p=0.2,
                                bias_dtype=None, needs_input_grad=(True,) + (False,) * 5)
    monkeypatch.delenv("TK_DETERMINISTIC", raising=False)
    grads = tka._qkv_backward(ctx, do, None, None)
    assert grads[0] is qkv and grads[1:] == (None,) * 5
    assert tka._qkv_backward(ctx, None, None, None) == (None,) * 6
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    tka._qkv_backward(ctx, do, None, None)
    ctx.bias_dtype = torch.bfloat16  # a bias that needs no gradient: none asked for
    tka._qkv_backward(ctx, do, None, None)
    ctx.needs_input_grad = (True,) * 6  # one that needs it: asked for, returned in its dtype
    grads = tka._qkv_backward(ctx, do, None, None)
    assert grads[5].dtype == torch.bfloat16 and grads[5].shape == (3 * 64,)
    assert [c[:6] for c in calls] == [(1, False, 0.25, False, 0.2, False), (1, False, 0.25, True, 0.2, False),
                                      (1, False, 0.25, True, 0.2, False), (1, False, 0.25, True, 0.2, True)]
    assert all(c[6] is rng for c in calls)


# per backward path choice: the entry point the fused op calls, the one the views op calls
BACKWARD_CALLS = [
    (dict(), "backward_into(hopper=True, deterministic=False)", "backward_hopper"),
    (dict(TK_DETERMINISTIC="1"), "backward_into(hopper=False, deterministic=True)", "backward(deterministic=True)"),
    (dict(TK_ATTENTION_BWD="portable"), "backward_into(hopper=False, deterministic=False)",
     "backward(deterministic=False)"),
]


@pytest.mark.parametrize("env,fused_call,views_call", BACKWARD_CALLS)
@pytest.mark.parametrize("causal", [True, False])
def test_eager_qkv_path_equals_the_views_path(qkv_ext, monkeypatch, causal, env, fused_call, views_call):
    """attention_qkv_op outside torch.compile (_EagerAttentionQKV) gives exactly the output and qkv gradient of
    attention_op on the views (whose dq, dk, dv autograd concatenates), with the same path choice."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    torch.manual_seed(0)
    B, H, T, D = 2, 3, 9, 64
    qkv = torch.randn(B, T, 3 * H * D, requires_grad=True)
    dout = torch.randn(B, H, T, D)
    o = tka.attention_qkv_op(qkv, H, causal)
    o.backward(dout)
    fused = (o.detach(), qkv.grad)
    qkv.grad = None
    o = tka.attention_op(*tka.qkv_views(qkv, H), causal)
    o.backward(dout)
    assert torch.equal(fused[0], o.detach()) and torch.equal(fused[1], qkv.grad)
    assert qkv_ext.calls == ["forward_hopper", fused_call, "forward_hopper", views_call]
    with torch.no_grad():  # no graph: the forward only
        assert not tka.attention_qkv_op(qkv, H, causal).requires_grad
    assert qkv_ext.calls[4:] == ["forward_hopper"]


@pytest.fixture
def qkv_ops_on_cpu(qkv_ext):
    """The fused ops' own implementations registered for CPU tensors during the test (a library scoped to it),
    on the stand-in extension: torch.compile's graphs call them as they would on a GPU."""
    lib = torch.library.Library("tk", "IMPL")
    for op in (tka.attention_qkv_fwd, tka.attention_qkv_bwd):
        lib.impl(op._name, op._init_fn, "CPU")
    yield qkv_ext
    torch._dynamo.reset()
    lib._destroy()


def test_compiled_gpt_runs_the_fused_ops(qkv_ops_on_cpu):
    """A kernels=tk GPT under torch.compile (aot_eager, fullgraph: no graph break) calls tk::attention_qkv_fwd
    in its forward graph and tk::attention_qkv_bwd in its backward graph, one per layer, with the loss and
    gradients of the eager model."""
    from model import GPT, GPTConfig
    from tk_kernels import dispatch
    ext = qkv_ops_on_cpu
    ok = lambda device, dtype, dims: None  # noqa: E731
    with dispatch.override("attention", unsupported=ok), dispatch.override("layer_norm", tk=None), \
            dispatch.override("classifier", tk=None), dispatch.override("mlp", tk=None):
        torch.manual_seed(0)
        model = GPT(GPTConfig(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=128, dropout=0.0,
                              kernels="tk"))
        model.plan_kernels()
        idx = torch.randint(64, (2, 16))
        results = []
        for m in (model, torch.compile(model, backend="aot_eager", fullgraph=True)):
            ext.calls.clear()
            _, loss = m(idx, idx)
            loss.backward()
            results.append((loss.detach(), [p.grad.clone() for p in model.parameters()], list(ext.calls)))
            model.zero_grad(set_to_none=True)
    (loss_e, grads_e, calls_e), (loss_c, grads_c, calls_c) = results
    into = "backward_into(hopper=True, deterministic=False), dbias"  # c_attn's bias gradient too
    assert calls_e == calls_c == ["forward_hopper"] * 2 + [into] * 2
    torch.testing.assert_close(loss_c, loss_e)
    for a, b in zip(grads_c, grads_e):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("compiled", [False, True])
def test_gpt_c_attn_bias_gradient_comes_from_the_attention(qkv_ops_on_cpu, compiled):
    """Training without dropout on the TK attention, c_attn adds its bias but leaves the bias's gradient to the
    attention's backward (dispatch.attention_sums_qkv_bias), whose kernels sum it: every gradient, c_attn.bias's
    included, is the kernels=torch model's (its key third exactly 0, autograd's ~0); in eval, or with a
    bias-free model, nothing is handed over."""
    from model import GPT, GPTConfig
    from tk_kernels import dispatch
    ext = qkv_ops_on_cpu
    ok = lambda device, dtype, dims: None  # noqa: E731
    cfg = dict(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=128, dropout=0.0)
    torch.manual_seed(0)
    ref = GPT(GPTConfig(**cfg, kernels="torch"))
    ref.plan_kernels()
    idx = torch.randint(64, (2, 16))
    _, loss_ref = ref(idx, idx)
    loss_ref.backward()
    with dispatch.override("attention", unsupported=ok), dispatch.override("layer_norm", tk=None), \
            dispatch.override("classifier", tk=None), dispatch.override("mlp", tk=None):
        model = GPT(GPTConfig(**cfg, kernels="tk"))
        model.load_state_dict(ref.state_dict())
        model.plan_kernels()
        m = torch.compile(model, backend="aot_eager", fullgraph=True) if compiled else model
        ext.calls.clear()
        _, loss = m(idx, idx)
        loss.backward()
        assert ext.calls[2:] == ["backward_into(hopper=True, deterministic=False), dbias"] * 2
        torch.testing.assert_close(loss, loss_ref)
        for (name, p), p_ref in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-4, atol=1e-6, msg=name)
        for block in model.transformer.h:
            assert torch.all(block.attn.c_attn.bias.grad[128:256] == 0)
        plan = model.plan_kernels()
        assert dispatch.attention_sums_qkv_bias(plan, True, 0.0)
        assert not dispatch.attention_sums_qkv_bias(plan, False, 0.0)
        assert not dispatch.attention_sums_qkv_bias(plan, True, 0.1)
        nobias = GPT(GPTConfig(**cfg, bias=False, kernels="tk"))
        nobias.plan_kernels()
        ext.calls.clear()
        nobias(idx, idx)[1].backward()
        assert ext.calls[2:] == ["backward_into(hopper=True, deterministic=False)"] * 2
