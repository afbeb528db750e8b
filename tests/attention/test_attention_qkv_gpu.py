"""GPU tests of the fused-projection attention ops tk::attention_qkv_fwd / tk::attention_qkv_bwd (python -m pytest
-m gpu; skipped without a CUDA GPU).

The fused ops run the very kernels of tk::attention_fwd / tk::attention_bwd on the (B, H, T, D) views of qkv;
only where the backward writes differs: into the three views of one (B, T, 3C) tensor instead of three fresh
(B, T, H, D) ones. So their results are compared with the q, k, v ops' on the same inputs, not with a float64
reference (test_attention_gpu.py does that for the kernels): the forward bit for bit, and dqkv bit for bit against
dq, dk, dv laid side by side as autograd concatenates them, wherever those are repeatable: every output of the
deterministic (portable) backward, and dK, dV of the default ones (Hopper on an H100 / H200; portable elsewhere);
the atomically accumulated dQ of those only to the rounding of a 16-bit store. dqkv is poisoned (NaN) before each
backward, so an element the kernels fail to write fails the test.
"""

import math

import pytest
import torch

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk attention needs compute capability >= 8.0", allow_module_level=True)

from tk_kernels import dispatch  # noqa: E402
from tk_kernels.families.attention import ops as tka  # noqa: E402
from gpu_test_utils import attention_reference_grads, capture, new_seed, poison, rel_err  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# dQ of the atomic paths against the other op's: two roundings of fp32 sums added in different orders
DQ_TOL = {torch.bfloat16: 4e-3, torch.float16: 6e-4}


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = tka.unavailable_reason()
    assert reason is None, reason


# -----------------------------------------------------------------------------
# helpers

def gen(seed: int) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(seed)


def randn(shape, g, dtype):
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def side_by_side(dq, dk, dv):
    """dq, dk, dv (B, H, T, D) in the fused projection's (B, T, 3 * H * D) layout, as autograd concatenates them."""
    B, H, T, D = dq.shape
    return torch.stack([g.transpose(1, 2) for g in (dq, dk, dv)], dim=2).reshape(B, T, 3 * H * D)


PATHS = ("default", "portable", "deterministic")


@pytest.fixture(params=PATHS)
def bwd_path(request, monkeypatch):
    """The backward: "default" (the Hopper kernel where the GPU runs it), "portable" (TK_ATTENTION_BWD=portable,
    atomic dQ), "deterministic" (the portable kernels with the separate dQ kernel; bitwise repeatable)."""
    for name in ("TK_ATTENTION_PATH", "TK_ATTENTION_BWD", "TK_DETERMINISTIC"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "portable":
        monkeypatch.setenv("TK_ATTENTION_BWD", "portable")
    if request.param == "deterministic":
        monkeypatch.setenv("TK_DETERMINISTIC", "1")  # the autograd paths; the op calls pass it themselves
    return request.param


def check_against_views_ops(qkv, H, causal, scale, p, dout, path):
    """Forward and backward of the fused ops and of the q, k, v ops on qkv's views with the same generator
    state (dropout: the same mask); asserts what must be equal."""
    B, T, C3 = qkv.shape
    q, k, v = tka.qkv_views(qkv, H)
    det = path == "deterministic"
    want = "portable" if path != "default" else ("hopper" if tka.hopper_reason(qkv.device) is None else "portable")
    assert tka.backward_path(q, p, det, k, v) == want
    torch.manual_seed(1234)
    o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, causal, scale, p)
    torch.manual_seed(1234)
    o2, lse2, rng2 = torch.ops.tk.attention_fwd(q, k, v, causal, scale, p)
    assert o.stride() == o2.stride() and torch.equal(o, o2) and torch.equal(lse, lse2) and torch.equal(rng, rng2)
    poison((qkv.shape, qkv.dtype))  # the fused backward's first allocation is dqkv
    dqkv, _ = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, scale, det, p, rng)
    grads = torch.ops.tk.attention_bwd(q, k, v, o2, lse2, dout, causal, scale, det, p, rng2)
    assert dqkv.shape == qkv.shape and dqkv.dtype == qkv.dtype and dqkv.is_contiguous()
    assert not torch.isnan(dqkv).any(), "NaN in dqkv (unwritten elements?)"
    ref = side_by_side(*grads)
    if det:
        assert torch.equal(dqkv, ref)
    else:  # dK, dV bitwise; dQ (fp32 atomics) to the rounding
        C = C3 // 3
        assert torch.equal(dqkv[..., C:], ref[..., C:])
        err = rel_err(dqkv[..., :C], ref[..., :C].double())
        assert err <= DQ_TOL[qkv.dtype], f"dq part: relative error {err:.2e} against attention_bwd's dq"
    return o, dqkv


# -----------------------------------------------------------------------------
# the ops against the q, k, v ops

@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 17, 1000])
def test_qkv_ops_equal_the_views_ops(T, D, causal, dtype_name, bwd_path):
    seed = new_seed()
    dtype = DTYPES[dtype_name]
    B, H = (3, 5) if T <= 17 else (1, 3)  # B * H odd
    qkv = randn((B, T, 3 * H * D), gen(seed), dtype)
    dout = randn((B, H, T, D), gen(seed + 1), dtype)
    print(f"[qkv B={B} H={H} T={T} D={D} {dtype_name} causal={causal} {bwd_path} seed={seed}]")
    check_against_views_ops(qkv, H, causal, 1.0 / math.sqrt(D), 0.0, dout, bwd_path)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
def test_qkv_ops_with_dropout_equal_the_views_ops(D, causal, bwd_path):
    """Dropout: the same generator state gives both forwards the same (seed, offset), hence the same mask, and
    both backwards regenerate it from that rng_state."""
    seed = new_seed()
    B, H, T = 3, 3, 300
    qkv = randn((B, T, 3 * H * D), gen(seed), torch.bfloat16)
    dout = randn((B, H, T, D), gen(seed + 1), torch.bfloat16)
    print(f"[qkv dropout D={D} causal={causal} {bwd_path} seed={seed}]")
    check_against_views_ops(qkv, H, causal, 1.0 / math.sqrt(D), 0.2, dout, bwd_path)


def test_autograd_of_the_fused_op_equals_the_views_op(bwd_path):
    """Eager autograd (_EagerAttentionQKV) and the dispatch: qkv's gradient through attention_qkv_op equals the
    one through attention_op on the views (the same backward kernels; dQ to the rounding off the
    deterministic mode), and the gradient of the views op arrives in the same layout."""
    seed = new_seed()
    B, H, T, D = 2, 3, 257, 64
    x = randn((B, T, 3 * H * D), gen(seed), torch.bfloat16)
    dout = randn((B, H, T, D), gen(seed + 1), torch.bfloat16)
    plan = dispatch.plan("auto", "cuda", torch.bfloat16, D, warn=False)
    assert plan.path("attention") == "tk"
    grads = []
    for call in (lambda t: dispatch.attention_qkv(plan, t, H), lambda t: tka.attention_op(*tka.qkv_views(t, H))):
        qkv = x.detach().requires_grad_()
        call(qkv).backward(dout)
        grads.append(qkv.grad)
    a, b = grads
    assert a.shape == b.shape == x.shape and a.is_contiguous()
    C = H * D
    if bwd_path == "deterministic":
        assert torch.equal(a, b)
    else:
        assert torch.equal(a[..., C:], b[..., C:]) and rel_err(a[..., :C], b[..., :C].double()) <= DQ_TOL[a.dtype]


# -----------------------------------------------------------------------------
# the projection bias's gradient (qkv_bias_grad.cuh: the Hopper backward's row passes sum it)

def bias_sums(dq, dk, dv):
    """[dq | dk | dv] summed over batch and tokens, heads side by side: a fused projection's bias gradient."""
    return torch.cat([g.sum((0, 2)).flatten() for g in (dq, dk, dv)])


@pytest.mark.parametrize("dtype_name", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("T", [1, 17, 1000])
def test_qkv_bias_gradient_against_float64(T, D, causal, dtype_name, bwd_path):
    """tk::attention_qkv_bwd(bias_grad=True): dqkv exactly the op's without it, and the bias gradient against
    float64 sums of the float64 reference's dq, dk, dv; its key third exactly 0 (the float64 one is ~1e-16)."""
    seed = new_seed()
    dtype = DTYPES[dtype_name]
    B, H = (3, 5) if T <= 17 else (3, 3)  # B * H odd
    C = H * D
    qkv = randn((B, T, 3 * C), gen(seed), dtype)
    dout = randn((B, H, T, D), gen(seed + 1), dtype)
    scale = 1.0 / math.sqrt(D)
    det = bwd_path == "deterministic"
    print(f"[qkv bias B={B} H={H} T={T} D={D} {dtype_name} causal={causal} {bwd_path} seed={seed}]")
    o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, causal, scale, 0.0)
    dqkv0, none = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, scale, det, 0.0, rng)
    poison(((3 * C,), torch.float32), (qkv.shape, qkv.dtype))
    dqkv, dbias = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, scale, det, 0.0, rng, True)
    assert none.shape == (0,) and dbias.shape == (3 * C,) and dbias.dtype == torch.float32
    assert not torch.isnan(dbias).any()
    if det:
        assert torch.equal(dqkv, dqkv0)
    else:  # dq's fp32 atomics add in another order
        assert torch.equal(dqkv[..., C:], dqkv0[..., C:])
    assert torch.all(dbias[C:2 * C] == 0)
    _, _, grads = attention_reference_grads(*tka.qkv_views(qkv, H), dout, causal, scale)
    ref = bias_sums(*grads)
    assert ref[C:2 * C].abs().max().item() < 1e-9 * max(ref.abs().max().item(), 1.0)
    err_q, err_v = rel_err(dbias[:C], ref[:C]), rel_err(dbias[2 * C:], ref[2 * C:])
    # d b_q: the sum of fp32 dq (not rounded to 16 bits); d b_v: fp32 sums of dout (Hopper) or of the 16-bit dv.
    # At T = 1 (one key: P = 1, dS = dP - Delta) dq is exactly 0 and ours is the fp32 cancellation of dP against
    # Delta, whatever the input dtype; rel_err measures it against its absolute floor, where fp16's 6e-4 is below
    # that noise (session 37: 6.08e-4 at D = 128, fp16), so it gets bf16's bound.
    tol_q = DQ_TOL[torch.bfloat16] if T == 1 else DQ_TOL[dtype]
    assert err_q <= tol_q and err_v <= DQ_TOL[dtype], (err_q, err_v)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_qkv_bias_gradient_with_dropout(causal, bwd_path):
    """With dropout the rows of the dropped P do not sum to 1: d b_v is the sums of dv (PyTorch's, from the
    op's own dq and dv), d b_q the sums of dq, d b_k 0."""
    seed = new_seed()
    B, H, T, D = 3, 3, 300, 64
    C = H * D
    qkv = randn((B, T, 3 * C), gen(seed), torch.bfloat16)
    dout = randn((B, H, T, D), gen(seed + 1), torch.bfloat16)
    det = bwd_path == "deterministic"
    o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, causal, 0.125, 0.2)
    dqkv, dbias = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, 0.125, det, 0.2, rng, True)
    ref = bias_sums(*(g.double() for g in tka.qkv_views(dqkv, H)))
    ref[C:2 * C] = 0.0
    assert torch.all(dbias[C:2 * C] == 0) and rel_err(dbias, ref) < 1e-6


def test_qkv_bias_gradient_through_autograd_and_dispatch():
    """attention_qkv(qkv, bias=b) on the TK path and on the torch path (dispatch's fallback adds b - b.detach()):
    b gets the sums of qkv's gradient (key third 0 on the TK path), qkv the same gradient as without b."""
    seed = new_seed()
    B, H, T, D = 2, 3, 257, 64
    C = H * D
    x = randn((B, T, 3 * C), gen(seed), torch.bfloat16)
    dout = randn((B, H, T, D), gen(seed + 1), torch.bfloat16)
    for kernels in ("tk", "torch"):
        plan = dispatch.plan(kernels, "cuda", torch.bfloat16, D, warn=False)
        qkv = x.detach().requires_grad_()
        b = torch.zeros(3 * C, device="cuda", requires_grad=True)
        dispatch.attention_qkv(plan, qkv, H, qkv_bias=b).backward(dout)
        ref = qkv.grad.double().sum((0, 1))
        if kernels == "tk":
            ref[C:2 * C] = 0.0
            assert torch.all(b.grad[C:2 * C] == 0)
        assert b.grad.dtype == torch.float32 and rel_err(b.grad, ref) <= DQ_TOL[torch.bfloat16], kernels


# -----------------------------------------------------------------------------
# the binding's checks of the given outputs (attention_backward_into)

def _into_args(B=2, H=3, T=40, D=64, dtype=torch.bfloat16):
    seed = new_seed()
    qkv = randn((B, T, 3 * H * D), gen(seed), dtype)
    q, k, v = tka.qkv_views(qkv, H)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, 0.125, 0.0)
    dout = randn((B, H, T, D), gen(seed + 1), dtype)
    return qkv, (q, k, v, o, lse, dout)


@pytest.mark.parametrize("hopper", [False, True])
def test_backward_into_writes_given_views(hopper):
    """attention_backward_into writes exactly what attention_backward returns (deterministic) or the Hopper
    backward does (dK, dV bitwise, dQ to the rounding) into strided views; nothing around them changes."""
    if hopper and tka.hopper_reason(torch.device("cuda", torch.cuda.current_device())) is not None:
        pytest.skip("needs the Hopper backward")
    qkv, (q, k, v, o, lse, dout) = _into_args()
    B, T, C3 = qkv.shape
    no_rng = torch.empty(0, dtype=torch.int64, device="cuda")
    buf = torch.full((B, T, 3 * C3), 7.0, device="cuda", dtype=qkv.dtype)
    outs = tka.qkv_views(buf[..., C3:2 * C3], q.shape[1])  # the middle third of a wider buffer
    det = not hopper
    tka._ext().attention_backward_into(q, k, v, o, lse, dout, *outs, True, 0.125, det, 0.0, no_rng, hopper)
    ref = (tka._ext().attention_backward_hopper(q, k, v, o, lse, dout, True, 0.125, 0.0, no_rng) if hopper else
           tka._ext().attention_backward(q, k, v, o, lse, dout, True, 0.125, True, 0.0, no_rng))
    assert torch.equal(outs[1], ref[1]) and torch.equal(outs[2], ref[2])
    assert torch.equal(outs[0], ref[0]) if det else rel_err(outs[0], ref[0].double()) <= DQ_TOL[q.dtype]
    assert (buf[..., :C3] == 7).all() and (buf[..., 2 * C3:] == 7).all()


def _bad_outputs(qkv, q):
    """(outputs, message) cases the binding must refuse, each with one clear error."""
    B, H, T, D = q.shape
    good = tka.qkv_views(torch.empty_like(qkv), H)
    flat = torch.empty(qkv.numel() + 8, device="cuda", dtype=q.dtype)
    shifted = flat[1:1 + qkv.numel()].view(qkv.shape)  # 2 bytes off a 16-byte boundary

    def padded(width):  # (B, H, T, D) in (B, T, H, width) memory: row strides of H * width elements
        return torch.empty(B, T, H, width, device="cuda", dtype=q.dtype)[..., :D].transpose(1, 2)
    other = torch.float16 if q.dtype == torch.bfloat16 else torch.bfloat16
    return [
        ((good[0].float(), good[1], good[2]), "dq must be bfloat16 or float16"),
        ((good[0].cpu(), good[1], good[2]), "dq must be a CUDA tensor"),
        ((good[0], good[1][:, :, :-1], good[2]), "dk has shape"),
        ((good[0], good[1], good[2].to(other)), "dv has dtype"),
        ((good[0], good[1], torch.empty(B, H, T, 2 * D, device="cuda", dtype=q.dtype)[..., ::2]),
         "dv must have a contiguous last dim"),
        ((padded(D + 4), good[1], good[2]), "dq strides must be multiples of 8 elements"),
        (tka.qkv_views(shifted, H), "dq data pointer must be 16-byte aligned"),
        ((torch.empty(B, H, 1, D, device="cuda", dtype=q.dtype).expand(B, H, T, D), good[1], good[2]),
         "dq has overlapping elements"),
        ((good[0], good[0], good[2]), "the outputs dq and dk share memory"),
        ((good[0], good[1], good[1]), "the outputs dk and dv share memory"),
        ((good[0], q, good[2]), "the output dk shares memory with the input q"),
        ((good[0], good[1], tka.qkv_views(qkv, H)[2]), "the output dv shares memory with the input v"),
        ((padded(D + 8), good[1], good[2]), None),  # a layout of its own, but a valid one
    ]


def test_backward_into_refuses_bad_outputs():
    qkv, (q, k, v, o, lse, dout) = _into_args()
    no_rng = torch.empty(0, dtype=torch.int64, device="cuda")
    for outs, message in _bad_outputs(qkv, q):
        if message is None:
            tka._ext().attention_backward_into(q, k, v, o, lse, dout, *outs, True, 0.125, True, 0.0, no_rng, False)
            continue
        with pytest.raises(RuntimeError, match=message):
            tka._ext().attention_backward_into(q, k, v, o, lse, dout, *outs, True, 0.125, True, 0.0, no_rng, False)
    good = tka.qkv_views(torch.empty_like(qkv), q.shape[1])
    with pytest.raises(RuntimeError, match="Hopper backward has no deterministic mode"):
        tka._ext().attention_backward_into(q, k, v, o, lse, dout, *good, True, 0.125, True, 0.0, no_rng, True)


# -----------------------------------------------------------------------------
# torch.library.opcheck, torch.compile, CUDA graphs

@pytest.mark.parametrize("det", [False, True])
def test_opcheck(det):
    seed = new_seed()
    for (B, H, T, D, causal, dtype) in [(2, 3, 33, 64, True, torch.bfloat16), (1, 2, 17, 128, False, torch.float16)]:
        qkv = randn((B, T, 3 * H * D), gen(seed), dtype).requires_grad_()
        scale = 1.0 / math.sqrt(D)
        torch.library.opcheck(torch.ops.tk.attention_qkv_fwd.default, (qkv, H, causal, scale, 0.0))
        # with dropout every call draws a new mask: the checks that compare two calls' outputs do not apply
        torch.library.opcheck(torch.ops.tk.attention_qkv_fwd.default, (qkv, H, causal, scale, 0.2),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
        x = qkv.detach()
        dout = randn((B, H, T, D), gen(seed + 1), dtype)
        bias = torch.randn(3 * H * D, device="cuda", requires_grad=True)
        torch.library.opcheck(torch.ops.tk.attention_qkv_fwd.default, (qkv, H, causal, scale, 0.0, bias))
        for p in (0.0, 0.2):
            o, lse, rng = torch.ops.tk.attention_qkv_fwd(x, H, causal, scale, p)
            for bias_grad in (False, True):
                torch.library.opcheck(torch.ops.tk.attention_qkv_bwd.default,
                                      (x, o, lse, dout, H, causal, scale, det, p, rng, bias_grad))


def _tiny_gpt(kernels, dropout=0.0, n_head=2):
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=256, vocab_size=512, n_layer=2, n_head=n_head, n_embd=128, dropout=dropout, bias=True,
                    kernels=kernels)
    return GPT(cfg).cuda()


VIEW_OPS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "alias", "getitem"}


def _feeds_gemms_directly(node) -> list[str]:
    """The ops that read node's output, looking through views: what consumes the fused gradient."""
    out = []
    for user in node.users:
        name = getattr(user.target, "__name__", str(user.target)).split(".")[0]
        out += _feeds_gemms_directly(user) if name in VIEW_OPS else [name]
    return out


@pytest.mark.parametrize("n_head", [2, 1], ids=["D64", "D128"])
def test_compiled_gpt_backward_reads_dqkv_in_place(n_head):
    """The compiled kernels=tk GPT (one graph, no break) calls tk::attention_qkv_fwd in its forward graph and
    tk::attention_qkv_bwd in its backward graph, whose output reaches c_attn's gradient GEMMs (and the bias
    gradient's sum), or the tk::linear_bwd op that runs them, through views only: no concatenation, no copy."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    graphs = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs.setdefault(kind, []).append(gm)
            return make_boxed_func(gm.forward)
        return compiler

    model = _tiny_gpt("tk", n_head=n_head)
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("attention") == "tk"
    idx = torch.randint(0, 512, (4, 255), device="cuda")
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=keep("fw"), bw_compiler=keep("bw")),
                             fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        _, loss = compiled(idx, idx)
    loss.backward()
    assert len(graphs["fw"]) == 1 and len(graphs["bw"]) == 1
    fw_ops = [n.target for n in graphs["fw"][0].graph.nodes if n.op == "call_function"]
    assert fw_ops.count(torch.ops.tk.attention_qkv_fwd.default) == 2
    assert torch.ops.tk.attention_fwd.default not in fw_ops
    bwd_nodes = [n for n in graphs["bw"][0].graph.nodes if n.target == torch.ops.tk.attention_qkv_bwd.default]
    assert len(bwd_nodes) == 2
    for node in bwd_nodes:
        consumers = _feeds_gemms_directly(node)
        # c_attn's backward: tk::linear_bwd on the TK GEMM path (session 25 on), cuBLAS's mm / sum otherwise;
        # the op's second output, c_attn's bias gradient (session 32), goes to the graph's output
        assert consumers and set(consumers) <= {"mm", "addmm", "sum", "bmm", "linear_bwd", "output"}, consumers


def test_eager_gpt_is_bitwise_the_views_model(monkeypatch):
    """The kernels=tk GPT in eager mode with the deterministic backward: loss and gradients exactly those of the
    same model whose attention splits q, k, v itself (the q, k, v op, gradients concatenated by autograd): the
    fused op changes where the gradient is written, not a bit of it. (Bitwise wherever two runs of the fused
    model agree bitwise, which the attention's and c_attn's parameters must; any other parameter to 1e-3.)"""
    import model as model_module

    def old_forward(self, x, plan, cache=None, resid_dropout=True, proj_bias=True):
        B, T, C = x.size()
        H, D = self.n_head, C // self.n_head
        # the projections as the model ran them before the attention summed c_attn's bias gradient
        qkv = dispatch.linear(plan, self.c_attn, x, training=self.training)
        q, k, v = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
        y = dispatch.attention(plan, q, k, v, causal=True, dropout_p=self.dropout if self.training else 0.0)
        y = dispatch.linear(plan, self.c_proj, y.transpose(1, 2).reshape(B, T, C), training=self.training,
                            bias=proj_bias)
        return self.resid_dropout(y) if resid_dropout else y

    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    idx = torch.randint(0, 512, (4, 255), device="cuda", generator=gen(new_seed()))
    results = []
    for forward in (None, None, old_forward):
        if forward is not None:
            monkeypatch.setattr(model_module.CausalSelfAttention, "forward", forward)
        m = _tiny_gpt("tk")
        m.plan_kernels(dtype=torch.bfloat16)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = m(idx, idx)
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in m.named_parameters()}))
    (l1, g1), (l2, g2), (lv, gv) = results
    repeatable = {n for n in g1 if torch.equal(g1[n], g2[n])}
    assert {n for n in g1 if ".attn." in n} <= repeatable, sorted(set(g1) - repeatable)
    assert torch.equal(l1, lv) if torch.equal(l1, l2) else abs(l1.item() - lv.item()) < 1e-3
    for n in [n for n in g1 if n.endswith("attn.c_attn.bias")]:  # summed by the attention, in another order
        C = g1[n].shape[0] // 3
        assert torch.all(g1[n][C:2 * C] == 0), n  # the views model's: the sums of dk's rounding errors
        assert rel_err(g1[n], torch.cat([gv[n][:C], 0 * gv[n][C:2 * C], gv[n][2 * C:]]).double()) < 1e-5, n
        repeatable.discard(n)
    for n in g1:
        if n in repeatable:
            assert torch.equal(g1[n], gv[n]), n
        else:
            assert rel_err(g1[n], gv[n].double()) < 1e-3, n
    print(f"[eager gpt] bitwise: {len(repeatable)} of {len(g1)} parameters (the others are not repeatable: "
          f"{sorted(set(g1) - repeatable)})")


@pytest.mark.parametrize("p", [0.0, 0.2])
def test_cuda_graph_capture_of_forward_and_backward(p, bwd_path):
    """Forward + backward of the fused op (eager autograd) captured in a CUDA graph: each replay's output and
    qkv gradient are those the ops give for that replay's inputs (with dropout a new mask per replay, which the
    q, k, v backward regenerates from the replay's rng_state)."""
    B, H, T, D = 2, 3, 256, 64
    seed = new_seed()
    qkv = randn((B, T, 3 * H * D), gen(seed), torch.bfloat16).requires_grad_()
    dout = randn((B, H, T, D), gen(seed + 1), torch.bfloat16)

    bias = torch.zeros(3 * H * D, device="cuda", requires_grad=True)  # c_attn's bias, handed over (p = 0)

    def step():
        o, lse, rng = tka._EagerAttentionQKV.apply(qkv, H, True, 0.125, p, bias if p == 0 else None)
        grads = torch.autograd.grad(o, (qkv, bias) if p == 0 else (qkv,), dout)
        return o, lse, rng, *grads

    graph, captured = capture(step)
    replays = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        replays.append([t.clone() for t in captured])
    if p > 0:
        assert not torch.equal(replays[0][2], replays[1][2]), "the replays used the same (seed, offset)"
    x = qkv.detach()
    q, k, v = tka.qkv_views(x, H)
    det, C = bwd_path == "deterministic", H * D
    eager_o, eager_lse, _ = torch.ops.tk.attention_fwd(q, k, v, True, 0.125, 0.0)
    for o, lse, rng, g, *gb in replays:
        if p == 0:
            assert torch.equal(o, eager_o) and torch.equal(lse, eager_lse)
            sums = g.double().sum((0, 1))
            sums[C:2 * C] = 0.0
            assert torch.all(gb[0][C:2 * C] == 0) and rel_err(gb[0], sums) <= DQ_TOL[g.dtype]
        else:  # lse is of the softmax before dropout (another kernel instance: to the float rounding)
            torch.testing.assert_close(lse, eager_lse)
        ref = side_by_side(*torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, 0.125, det, p, rng))
        assert not torch.isnan(g).any() and torch.equal(g[..., C:], ref[..., C:])
        assert torch.equal(g, ref) if det else rel_err(g[..., :C], ref[..., :C].double()) <= DQ_TOL[g.dtype]
