"""GPU tests of tk_kernels.AdamW (python -m pytest -m gpu tests/optim; skipped without a GPU).

Each step's parameters and moments against a float64 reference of clip_grad_norm_ + AdamW computed from the
same fp32 starting values and gradients, and against torch's fused AdamW + clip_grad_norm_ (fp32), over ragged
tensor sizes (1 element to several chunks of 8192, sizes not multiples of 8), a parameter whose storage is not
16-byte aligned (the kernel's element-by-element path), two parameter groups with their own weight decay and
lr, parameters without a gradient, clipping active / inactive / off, and more tensors than one launch takes
(256). Tolerances: the moments to 1e-5 relative (fp32 arithmetic, a few steps), the parameters to a few fp32
ulps of their magnitude. Fresh random inputs from an os.urandom seed (printed).
"""

import math

import pytest
import torch

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk AdamW needs compute capability >= 8.0", allow_module_level=True)

import tk_kernels  # noqa: E402
from tk_kernels import TKUnsupportedError, dispatch  # noqa: E402
from tk_kernels.families.optim import ops  # noqa: E402
from gpu_test_utils import new_seed  # noqa: E402

SIZES = [(1,), (7,), (8,), (9,), (33, 17), (4095,), (8192,), (8193,), (3, 8192 + 5), (257, 129)]
HP = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8)


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = ops.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    assert reason is None, reason


def make_params(seed, sizes=SIZES, misaligned=True):
    g = torch.Generator(device="cuda").manual_seed(seed)
    ps = [torch.nn.Parameter(torch.randn(s, generator=g, device="cuda")) for s in sizes]
    if misaligned:  # a contiguous view 4 bytes into its storage: not 16-byte aligned
        buf = torch.randn(1 + 1000, generator=g, device="cuda")
        ps.append(torch.nn.Parameter(buf[1:]))
        assert ps[-1].data_ptr() % 16 != 0
    return ps


def groups_of(params):
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0, "lr": 1e-3}]


def grads_for(params, seed, scale):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(p.shape, generator=g, device="cuda") * scale for p in params]


class Ref64:
    """clip_grad_norm_ + AdamW (torch's formula) in float64."""

    def __init__(self, params, groups):
        self.p = [p.detach().double().clone() for p in params]
        self.m = [torch.zeros_like(p) for p in self.p]
        self.v = [torch.zeros_like(p) for p in self.p]
        self.t = [0] * len(params)
        index = {id(p): i for i, p in enumerate(params)}
        self.hp = [None] * len(params)
        for g in groups:
            for p in g["params"]:
                self.hp[index[id(p)]] = (g.get("lr", HP["lr"]), g["weight_decay"])

    def step(self, grads, max_norm):
        live = [i for i, g in enumerate(grads) if g is not None]
        g64 = {i: grads[i].double() for i in live}
        norm = None
        if max_norm > 0:
            norm = math.sqrt(sum(float((g64[i] ** 2).sum()) for i in live))
            coef = min(1.0, max_norm / (norm + 1e-6))
            g64 = {i: g * coef for i, g in g64.items()}
        b1, b2 = HP["betas"]
        for i in live:
            lr, wd = self.hp[i]
            self.t[i] += 1
            t = self.t[i]
            self.p[i] *= 1 - lr * wd
            self.m[i] = b1 * self.m[i] + (1 - b1) * g64[i]
            self.v[i] = b2 * self.v[i] + (1 - b2) * g64[i] ** 2
            denom = self.v[i].sqrt() / math.sqrt(1 - b2 ** t) + HP["eps"]
            self.p[i] -= lr / (1 - b1 ** t) * self.m[i] / denom
        return norm


def rel(x, ref):
    return (float((x.double() - ref).norm()) / max(float(ref.norm()), 1e-30))


def check_close(opt, params, ref, what):
    for i, p in enumerate(params):
        ulps = 4 * torch.finfo(torch.float32).eps * float(ref.p[i].abs().max())
        err = float((p.detach().double() - ref.p[i]).abs().max())
        assert err <= ulps, f"{what}: param {i} {tuple(p.shape)}: max |p - ref| {err:.3g} > {ulps:.3g}"
        st = opt.state.get(p)
        if ref.t[i] == 0:
            assert not st, f"{what}: param {i} without a gradient got state"
            continue
        assert float(st["step"]) == ref.t[i]
        assert rel(st["exp_avg"], ref.m[i]) < 1e-5, f"{what}: exp_avg {i}"
        assert rel(st["exp_avg_sq"], ref.v[i]) < 1e-5, f"{what}: exp_avg_sq {i}"


@pytest.mark.parametrize("max_norm,scale", [(1.0, 1.0), (1e4, 1.0), (0.0, 1.0), (1.0, 1e-3)],
                         ids=["clipping", "clip-inactive", "no-clip", "tiny-grads"])
def test_matches_float64_reference_and_torch_fused(max_norm, scale):
    seed = new_seed()
    print("seed", seed)
    ours = make_params(seed)
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    ref = Ref64(ours, groups_of(ours))
    opt = tk_kernels.AdamW(groups_of(ours), **HP)
    fused = torch.optim.AdamW(groups_of(theirs), **HP, fused=True)
    for step in range(3):
        grads = grads_for(ours, seed + 1 + step, scale)
        if step == 1:
            grads[2] = None  # one parameter without a gradient this step
        for ps in (ours, theirs):
            for p, g in zip(ps, grads):
                p.grad = None if g is None else g.clone()
        ref_norm = ref.step(grads, max_norm)
        torch_norm = torch.nn.utils.clip_grad_norm_(theirs, max_norm) if max_norm > 0 else None
        opt.clip_grad_norm_(max_norm)
        opt.step()
        fused.step()
        torch.cuda.synchronize()
        for p, g in zip(ours, grads):  # the gradients are left as they were
            assert (g is None and p.grad is None) or torch.equal(p.grad, g)
        if max_norm > 0:
            assert abs(opt.grad_norm.item() - ref_norm) <= 1e-5 * ref_norm
            assert abs(opt.grad_norm.item() - torch_norm.item()) <= 1e-5 * ref_norm
        check_close(opt, ours, ref, f"step {step}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            ulps = 8 * torch.finfo(torch.float32).eps * float(b.detach().abs().max())
            assert float((a - b).detach().abs().max()) <= ulps, f"step {step}: param {i} vs torch's fused AdamW"


def test_more_tensors_than_one_launch():
    """300 tensors: two launches of each kernel; the clip factor comes from all of them."""
    seed = new_seed()
    print("seed", seed)
    sizes = [(1 + (i * 37) % 300,) if i % 3 else (5, 1 + i % 17) for i in range(300)]
    ours = make_params(seed, sizes, misaligned=False)
    ref = Ref64(ours, groups_of(ours))
    opt = tk_kernels.AdamW(groups_of(ours), **HP)
    for step in range(2):
        grads = grads_for(ours, seed + 7 + step, 1.0)
        for p, g in zip(ours, grads):
            p.grad = g
        ref_norm = ref.step(grads, 1.0)
        opt.clip_grad_norm_(1.0)
        opt.step()
        assert abs(opt.grad_norm.item() - ref_norm) <= 1e-5 * ref_norm
        check_close(opt, ours, ref, f"step {step}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_step_writes_16bit_copies(dtype):
    """keep_copies: after every step each kept copy is bitwise its parameter rounded to the copy's dtype (what
    p.to(dtype) gives), over the ragged sizes, a misaligned parameter, a misaligned copy (a view 2 bytes into
    its storage: the element-by-element path), a parameter without a gradient (copy untouched) and parameters
    without copies; the update itself is bitwise the one without copies. More than one launch (300 tensors)."""
    seed = new_seed()
    print("seed", seed)
    for sizes in (SIZES, [(1 + (i * 37) % 300,) if i % 3 else (5, 1 + i % 17) for i in range(300)]):
        ours = make_params(seed, sizes)
        twins = [torch.nn.Parameter(p.detach().clone()) for p in ours]
        copies = {p: torch.full(p.shape, float("nan"), device="cuda", dtype=dtype) for p in ours[::2]}
        odd = ours[1]
        buf = torch.full((odd.numel() + 1,), float("nan"), device="cuda", dtype=dtype)
        copies[odd] = buf[1:].view(odd.shape)  # 2 bytes into its storage
        assert copies[odd].data_ptr() % 16 != 0
        opt = tk_kernels.AdamW(groups_of(ours), **HP)
        twin_opt = tk_kernels.AdamW(groups_of(twins), **HP)
        opt.keep_copies(copies)
        skipped = ours[2]  # no gradient in the first step: its copy keeps its NaNs
        for step in range(2):
            grads = grads_for(ours, seed + 11 + step, 1.0)
            for p, t, g in zip(ours, twins, grads):
                p.grad = None if (step == 0 and p is skipped) else g
                t.grad = None if (step == 0 and p is skipped) else g.clone()
            opt.clip_grad_norm_(1.0)
            opt.step()
            twin_opt.clip_grad_norm_(1.0)
            twin_opt.step()
            for i, (p, t) in enumerate(zip(ours, twins)):
                assert torch.equal(p, t), f"step {step}: param {i}: the copies changed the update"
            for p, c in copies.items():
                if step == 0 and p is skipped:
                    assert torch.isnan(c).all()
                else:
                    assert torch.equal(c, p.detach().to(dtype)), f"step {step}: copy of {tuple(p.shape)}"


def test_keep_copies_rejects_what_the_kernel_cannot_write():
    ours = make_params(new_seed(), [(10,), (4, 3)], misaligned=False)
    opt = tk_kernels.AdamW(groups_of(ours), **HP)
    stranger = torch.nn.Parameter(torch.zeros(3, device="cuda"))
    bad = [({stranger: stranger.detach().bfloat16()}, "not this optimizer's"),
           ({ours[0]: torch.zeros(10, device="cuda")}, "bf16 / fp16"),
           ({ours[1]: torch.zeros(3, 4, device="cuda", dtype=torch.bfloat16)}, "shape"),
           ({ours[1]: torch.zeros(3, 4, device="cuda", dtype=torch.bfloat16).t()}, "contiguous")]
    for copies, match in bad:
        with pytest.raises(TKUnsupportedError, match=match):
            opt.keep_copies(copies)


def test_non_finite_gradients_poison_the_parameters_like_torch():
    for bad in (float("nan"), float("inf")):
        ours = make_params(new_seed(), [(10,), (4, 3)], misaligned=False)
        theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
        opt = tk_kernels.AdamW(ours, **HP)
        fused = torch.optim.AdamW(theirs, **HP, fused=True)
        for a, b in zip(ours, theirs):
            a.grad = torch.ones_like(a)
            b.grad = torch.ones_like(b)
        ours[0].grad[3] = bad
        theirs[0].grad[3] = bad
        opt.clip_grad_norm_(1.0)
        opt.step()
        torch.nn.utils.clip_grad_norm_(theirs, 1.0)
        fused.step()
        for a, b in zip(ours, theirs):
            assert torch.equal(a.isnan(), b.isnan())
        assert bool(ours[0].isnan().any())  # inf: only the inf element (inf * 0); NaN: every element
        assert ours[1].isnan().all() == (bad != bad)
        assert not math.isfinite(opt.grad_norm.item())


def test_state_dict_roundtrip_with_torch_fused():
    """A fused torch AdamW's state (steps on the GPU) continues in ours and ours in torch's, like torch alone."""
    seed = new_seed()
    a, b = make_params(seed, misaligned=False), make_params(seed, misaligned=False)
    torch_only = torch.optim.AdamW(groups_of(b), **HP, fused=True)
    first = torch.optim.AdamW(groups_of(a), **HP, fused=True)
    for step in range(3):
        grads = grads_for(a, seed + 3 + step, 1.0)
        for ps in (a, b):
            for p, g in zip(ps, grads):
                p.grad = g.clone()
        if step == 0:
            first.step()
            ours = tk_kernels.AdamW(groups_of(a), **HP)
            ours.load_state_dict(first.state_dict())  # steps arrive on the GPU
        elif step == 1:
            ours.step()
            assert all(st["step"].device.type == "cpu" for st in ours.state.values())
            last = torch.optim.AdamW(groups_of(a), **HP, fused=True)
            last.load_state_dict(ours.state_dict())
        else:
            last.step()
        torch_only.step()
    for x, y in zip(a, b):
        assert float((x - y).abs().max()) <= 8 * torch.finfo(torch.float32).eps * float(y.abs().max())


def test_dispatch_rejects_parameters_it_cannot_update():
    half = [torch.nn.Parameter(torch.zeros(8, device="cuda", dtype=torch.bfloat16))]
    with pytest.raises(TKUnsupportedError, match="float32"):
        dispatch.adamw("tk", half, 1e-3, (0.9, 0.95))
    dispatch.reset()
    with pytest.warns(UserWarning, match="optimizer falls back to PyTorch.*float32"):
        opt = dispatch.adamw("auto", half, 1e-3, (0.9, 0.95))
    assert type(opt) is torch.optim.AdamW and opt.defaults.get("fused")
    dispatch.reset()
    assert isinstance(dispatch.adamw("tk", make_params(1, [(3,)], False), 1e-3, (0.9, 0.95)), tk_kernels.AdamW)
    p = torch.nn.Parameter(torch.zeros(4, 4, device="cuda"))
    opt = tk_kernels.AdamW([p], lr=1e-3)
    p.grad = torch.zeros(4, 4, device="cuda").t()
    with pytest.raises(TKUnsupportedError, match="gradients must be dense contiguous float32"):
        opt.step()  # the first step checks each parameter as it makes its state
    p.grad = torch.zeros(4, 4, device="cuda")
    opt.step()
    p.grad = torch.zeros(4, 4, device="cuda").t()
    with pytest.raises(RuntimeError, match=r"tk adamw: grads\[0\] must be contiguous"):
        opt.step()  # later steps: the extension's checks


def test_gpt_training_with_tk_adamw_tracks_torch():
    """A small GPT (PyTorch ops) trained 20 steps with clip 1.0: tk_kernels.AdamW against torch's fused AdamW."""
    from model import GPT, GPTConfig
    cfg = dict(n_layer=2, n_head=2, n_embd=64, block_size=32, vocab_size=101, dropout=0.0, kernels="torch")
    seed = new_seed()
    print("seed", seed)
    losses = {}
    for name in ("torch", "tk"):
        torch.manual_seed(seed)
        model = GPT(GPTConfig(**cfg)).cuda()
        groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
        opt = (tk_kernels.AdamW(groups, lr=1e-3, betas=(0.9, 0.95)) if name == "tk" else
               torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.95), fused=True))
        g = torch.Generator(device="cuda").manual_seed(seed)
        out = []
        for _ in range(20):
            x = torch.randint(0, 101, (4, 32), device="cuda", generator=g)
            _, loss = model(x, torch.roll(x, -1, 1))
            loss.backward()
            dispatch.clip_grad_norm_(opt, model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.append(loss.item())
        losses[name] = out
    for step, (a, b) in enumerate(zip(losses["tk"], losses["torch"])):
        assert abs(a - b) <= 1e-4 * abs(b), f"step {step}: tk {a} vs torch {b}"


@pytest.mark.parametrize("optimizer", ["tk", "torch"])
def test_gpt_training_with_weight_copies_is_bitwise_the_same(optimizer, monkeypatch):
    """A kernels=tk GPT under bf16 autocast, trained 3 eager then 3 compiled steps with GPT.keep_weight16 (the
    GEMMs read 16-bit copies that tk_kernels.AdamW writes in its kernel, or that torch's AdamW's step hook
    recasts) and without (the ops cast the weights). After every step each copy is bitwise its weight rounded
    to bf16. The runs differ only in lm_head's (= wte's) gradient, which with the copy comes from the
    classifier's scaling kernel in fp32 instead of rounded to bf16 and cast (TK_DETERMINISTIC: nothing else
    varies): the losses agree to 1e-5 (they came out bitwise equal on an H100), the parameters to 1e-3."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the MLP family's GEMM (the copies' main reader) runs on Hopper only")
    from model import GPT, GPTConfig
    monkeypatch.setenv("TK_DETERMINISTIC", "1")
    cfg = dict(n_layer=2, n_head=2, n_embd=128, block_size=64, vocab_size=515, dropout=0.0, bias=True, kernels="tk")
    seed = new_seed()
    print("seed", seed)
    runs = []
    for keep in (False, True):
        torch.manual_seed(seed)
        model = GPT(GPTConfig(**cfg)).cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model.plan_kernels()
        opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cuda")
        if optimizer == "torch":
            opt = torch.optim.AdamW(opt.param_groups, lr=1e-3, betas=(0.9, 0.95), fused=True)
        if keep:
            assert model.keep_weight16(opt) == 2 * 4 + 1
        torch._dynamo.reset()
        compiled = torch.compile(model)
        g = torch.Generator(device="cuda").manual_seed(seed)
        losses = []
        for step in range(6):
            x = torch.randint(0, cfg["vocab_size"], (4, 64), device="cuda", generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                _, loss = (model if step < 3 else compiled)(x, torch.roll(x, -1, 1))
            loss.backward()
            dispatch.clip_grad_norm_(opt, model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            for m in model.modules():
                if "weight16" in m._buffers:
                    assert torch.equal(m.weight16, m.weight.detach().bfloat16()), f"step {step}: a stale copy"
        runs.append((losses, [p.detach().clone() for p in model.parameters()]))
    for step, (a, b) in enumerate(zip(runs[0][0], runs[1][0])):
        assert abs(a - b) <= 1e-5 * abs(a), f"step {step}: loss {a} without copies, {b} with"
    for i, (a, b) in enumerate(zip(runs[0][1], runs[1][1])):
        assert rel(b, a.double()) <= 1e-3, f"parameter {i} {tuple(a.shape)}: {rel(b, a.double()):.3g}"
