"""GPU tests of the fused classifier (python -m pytest -m gpu tests/classifier; skipped without a GPU).

Accuracy: loss, dx and dW of tk_kernels.linear_cross_entropy against a float64 reference computed
from the same bf16/fp16 inputs, with the logits rounded to the input dtype first (the precision the
op promises: the GEMM's output dtype), as relative L2 errors; PyTorch's own bf16/fp16 path
(F.linear + F.cross_entropy on .float() logits) against the same reference sets the scale:
ours <= max(2 x PyTorch's error, a dtype floor). Fresh random inputs from an os.urandom seed (printed).
Unwritten outputs are caught by poisoning the caching allocator's free blocks with NaN first.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk classifier needs compute capability >= 8.0", allow_module_level=True)

import tk_kernels  # noqa: E402
from tk_kernels.families.classifier import ops  # noqa: E402
from gpu_test_utils import new_seed, poison_free_memory  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
FLOOR = {torch.bfloat16: 1e-2, torch.float16: 2e-3}


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = ops.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    assert reason is None, reason


def poison():
    """Fill the allocator's free memory with NaN so unwritten outputs show up."""
    poison_free_memory(4, 2 << 30)


def inputs(N, C, V, dtype, seed, ignore_frac=0.1):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(N, C, generator=g, device="cuda").to(dtype)
    w = (torch.randn(V, C, generator=g, device="cuda") * (2.0 / math.sqrt(C))).to(dtype)
    t = torch.randint(0, V, (N,), generator=g, device="cuda")
    t[torch.rand(N, generator=g, device="cuda") < ignore_frac] = -1
    return x, w, t


def ref64(x, w, t, ignore_index=-1):
    """float64 loss, dx, dW from the dtype-rounded logits (autograd in float64)."""
    x64 = x.double().requires_grad_()
    w64 = w.double().requires_grad_()
    logits = (x64 @ w64.t())
    logits = logits + (logits.detach().to(x.dtype).double() - logits.detach())  # the GEMM's rounding
    loss = F.cross_entropy(logits, t, ignore_index=ignore_index)
    loss.backward()
    return loss.detach(), x64.grad, w64.grad


def torch_path(x, w, t):
    x = x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    loss = F.cross_entropy(F.linear(x, w).float(), t, ignore_index=-1)
    loss.backward()
    return loss.detach(), x.grad, w.grad


def ours(x, w, t, ignore_index=-1):
    x = x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    poison()
    loss = tk_kernels.linear_cross_entropy(x, w, t, ignore_index)
    loss.backward()
    return loss.detach(), x.grad, w.grad


def rel(a, ref):
    ref = ref.double()
    return ((a.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


CASES = [(1, 64, 65), (7, 768, 50257), (1000, 1024, 50304), (1000, 64, 65), (7, 64, 50304),
         (16384, 768, 50304), (16384, 1024, 50257), (1000, 768, 65)]


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("N,C,V", CASES, ids=[f"N{n}-C{c}-V{v}" for n, c, v in CASES])
def test_vs_float64(N, C, V, dtype_name):
    dtype = DTYPES[dtype_name]
    seed = new_seed()
    x, w, t = inputs(N, C, V, dtype, seed)
    if (t != -1).sum() == 0:
        t[0] = 0
    ref = ref64(x, w, t)
    got = ours(x, w, t)
    base = torch_path(x, w, t)
    names = ("loss", "dx", "dw")
    for name, a, b, r in zip(names, got, base, ref):
        assert torch.isfinite(a).all(), f"{name} has non-finite values (seed {seed})"
        e, eb = rel(a, r), rel(b, r)
        print(f"[N={N} C={C} V={V} {dtype_name} seed={seed}] {name}: ours {e:.2e}, torch {eb:.2e}")
        assert e <= max(2 * eb, FLOOR[dtype] if name != "loss" else 1e-4), f"{name} (seed {seed})"


def test_ignored_rows_and_all_ignored():
    x, w, t = inputs(300, 64, 65, torch.bfloat16, new_seed(), ignore_frac=0.5)
    t[t == -1] = -100  # this test ignores -100 (an ignored -1 would be out of range for the reference)
    t[:10] = -100
    loss, dx, dw = ours(x, w, t, ignore_index=-100)
    r = ref64(x, w, t, ignore_index=-100)
    assert abs(loss.item() - r[0].item()) < 1e-3 * abs(r[0].item())
    assert torch.all(dx[:10] == 0), "ignored rows must have a zero gradient"
    t_all = torch.full_like(t, -1)
    loss, dx, dw = ours(x, w, t_all)
    ref = F.cross_entropy(F.linear(x, w).float(), t_all, ignore_index=-1)
    assert torch.isnan(loss) and torch.isnan(ref)  # the mean over no targets is 0/0, as in PyTorch


def test_out_of_range_target_gives_nan():
    x, w, t = inputs(10, 64, 65, torch.bfloat16, new_seed(), ignore_frac=0.0)
    t[3] = 65
    assert torch.isnan(tk_kernels.linear_cross_entropy(x, w, t))


def test_grad_output_scales_the_gradients():
    x, w, t = inputs(500, 64, 129, torch.bfloat16, new_seed())
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    (tk_kernels.linear_cross_entropy(xa, wa, t) * 3.0).backward()
    _, dx, dw = ours(x, w, t)
    # the op rounds dx * (3 / count) once; the expected value rounds dx / count and then its 3x again:
    # up to ~1.5 bf16 ulps apart per element, so an elementwise rtol of 2e-2 with an atol of one ulp
    # of the largest gradient, and a relative L2 error at bf16's rounding level
    for got, want in ((xa.grad, dx * 3), (wa.grad, dw * 3)):
        assert rel(got, want) < 4e-3, rel(got, want)
        torch.testing.assert_close(got, want, rtol=2e-2, atol=want.abs().max().item() * 2.0 ** -8)


def test_opcheck():
    x, w, t = inputs(100, 64, 65, torch.bfloat16, new_seed())
    torch.library.opcheck(torch.ops.tk.linear_cross_entropy_fwd, (x, w, t, -1))
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    torch.library.opcheck(torch.ops.tk.linear_cross_entropy_fwd, (xg, wg, t, -1),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                                      "test_aot_dispatch_dynamic"))


def _extra_peak(fn) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def test_peak_memory():
    N, C, V = 16384, 768, 50304
    x, w, t = inputs(N, C, V, torch.bfloat16, new_seed())
    x.requires_grad_()
    w.requires_grad_()

    def step():
        tk_kernels.linear_cross_entropy(x, w, t).backward()
        x.grad = w.grad = None

    step()  # warm-up: cuBLAS workspaces, the build
    extra = _extra_peak(step)
    print(f"[peak] extra peak memory of fwd+bwd at N={N} C={C} V={V}: {extra / 2**30:.3f} GiB")
    assert extra <= 0.5e9, f"extra peak {extra / 1e9:.3f} GB > 0.5 GB"


def _gpt_pair(kernels_a="tk"):
    from model import GPT, GPTConfig
    torch.manual_seed(new_seed())
    cfg = dict(block_size=128, vocab_size=65, n_layer=2, n_head=2, n_embd=128, dropout=0.0, bias=False)
    a = GPT(GPTConfig(**cfg, kernels=kernels_a)).cuda()
    b = GPT(GPTConfig(**cfg, kernels="torch")).cuda()
    b.load_state_dict(a.state_dict())
    return a, b


def test_compiled_gpt_train_step_has_no_graph_breaks():
    model, model_torch = _gpt_pair()
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("classifier") == "tk"
    idx = torch.randint(0, 65, (4, 128), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_break_count == 0, str(explained)
    assert any("linear_cross_entropy_fwd" in g.code for g in explained.graphs), "tk op not in the graph"
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model), fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits, loss = compiled(idx, idx)
        _, loss_t = model_torch(idx, idx)
    assert logits is None
    loss.backward()
    assert abs(loss.item() - loss_t.item()) < 1e-2 * loss_t.item()


def test_50_training_steps_match_torch():
    """Same init, same batches: AdamW for 50 steps; every loss within 1e-3 relative of kernels=torch.
    Attention runs PyTorch's SDPA in both (planned with the TK attention taken out of the registry),
    so the difference is the classifier's alone."""
    from tk_kernels import dispatch
    model_tk, model_torch = _gpt_pair()
    with dispatch.override("attention", tk=None):
        plan = model_tk.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("classifier") == "tk" and plan.path("attention") == "torch"
    g = torch.Generator(device="cuda").manual_seed(new_seed())
    batches = [torch.randint(0, 65, (8, 129), generator=g, device="cuda") for _ in range(50)]
    losses = {}
    for name, model in (("tk", model_tk), ("torch", model_torch)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        out = []
        for b in batches:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                _, loss = model(b[:, :-1], b[:, 1:])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.append(loss.item())
        losses[name] = out
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses["tk"], losses["torch"]))
    print(f"[50 steps] first {losses['tk'][0]:.4f}/{losses['torch'][0]:.4f} last "
          f"{losses['tk'][-1]:.4f}/{losses['torch'][-1]:.4f}, worst relative difference {worst:.2e}")
    assert worst < 1e-3
