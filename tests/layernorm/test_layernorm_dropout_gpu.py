"""GPU tests of the dropout on delta inside the LayerNorm family's fused add (python -m pytest -m gpu
tests/layernorm; skipped without a CUDA GPU): s = x + dropout(delta), y = LayerNorm(s), and the backward's
regenerated mask.

The mask a call used: the forward op tk::dropout_add_layer_norm_fwd returns its (seed, offset) as rng_state
((2,) int64; beforehand the default CUDA generator's state, whose offset advances by 4 per call);
ops.dropout_mask(rng_state, rows, cols, p) returns the keep mask computed by the kernels' own chunk function,
dropout_reference.keep_mask the same in Python. The exactness tests build the reference with that mask:
s must equal torch's x + (delta * mask * keep_scale).to(delta's dtype) bitwise (what x + F.dropout(delta)
computes for that mask), y, mean, rstd and every gradient (dx, ddelta = mask * dx * keep_scale, dweight,
dbias) are compared with float64 as relative L2 errors against the dtype tolerances of
test_layernorm_gpu.py. Outputs are poisoned (NaN) before each launch.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk layer_norm needs compute capability >= 8.0", allow_module_level=True)

import tk_kernels  # noqa: E402
from tk_kernels import dispatch  # noqa: E402
from tk_kernels.families.layernorm import dropout_reference as dref  # noqa: E402
from tk_kernels.families.layernorm import ops as ln  # noqa: E402
from gpu_test_utils import capture, generator_state, new_seed, poison, rng_pair  # noqa: E402

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
TOL = {F32: 2e-4, BF16: 8e-3, F16: 1.5e-3}  # relative L2 error by the dtype a value is stored in
# (x, delta, y): autocast training with bf16 / fp16 sublayer outputs, a pure bf16 model, fp32 throughout
DTYPES = [(F32, BF16, BF16), (F32, F16, F16), (BF16, BF16, BF16), (F16, F16, F16), (F32, F32, F32)]
DTYPE_IDS = ["x32-d16b", "x32-d16h", "x16b-d16b", "x16h-d16h", "x32-d32"]
ROWS = [1, 7, 1000, 16384]
WIDTHS = [64, 384, 768, 1024, 1600, 2048]


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = ln.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    assert reason is None, reason


def randn(shape, g, dtype, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=g, device="cuda") * scale + shift).to(dtype)


def rel_err(x, ref) -> float:
    ref = ref.double()
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()



def make_case(shape, x_dt, d_dt, bias, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    C = shape[-1]
    x = randn(shape, g, x_dt, 1.0, 0.3)  # a non-zero mean per row, like a residual stream
    d = randn(shape, g, d_dt, 0.5)
    w = randn((C,), g, F32, 0.2, 1.0)
    b = randn((C,), g, F32, 0.1) if bias else None
    return g, x, d, w, b


def mask_of(rng, shape, p):
    return ln.dropout_mask(rng, math.prod(shape[:-1]), shape[-1], p).view(shape).bool()


def dropped(d, keep, p):
    """F.dropout(d, p)'s output for this keep mask: d * keep * (1 / (1 - p)) in float32, rounded to d's dtype."""
    return (d.float() * keep * ln.keep_scale(p)).to(d.dtype)


def reference(x, d, w, b, keep, p, dy, ds, eps=1e-5):
    """(s in x's dtype, and float64 y, mean, rstd, dx, ddelta, dw, db) for this mask."""
    s = x + dropped(d, keep, p)
    C = s.shape[-1]
    s64 = s.double().requires_grad_()
    w64 = w.double().requires_grad_()
    b64 = b.double().requires_grad_() if b is not None else None
    y64 = F.layer_norm(s64, (C,), w64, b64, eps)
    grads = torch.autograd.grad(y64, [t for t in (s64, w64, b64) if t is not None], dy.double())
    dx = grads[0] + (ds.double() if ds is not None else 0.0)
    s64d = s64.detach()
    return dict(s=s, y=y64.detach(), mean=s64d.mean(-1), rstd=torch.rsqrt(s64d.var(-1, unbiased=False) + eps),
                dx=dx, ddelta=dx * keep.double() * ln.keep_scale(p), dw=grads[1],
                db=grads[2] if b is not None else None)


# -----------------------------------------------------------------------------
# forward and backward against float64 with the kernels' own mask

@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_dt,d_dt,y_dt", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("C", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
def test_forward_and_backward_against_float64(rows, C, x_dt, d_dt, y_dt, bias):
    seed = new_seed()
    p = 0.2 if (rows + C) % 2 == 0 else 0.5
    g, x, d, w, b = make_case((rows, C), x_dt, d_dt, bias, seed)
    poison(((rows, C), y_dt), ((rows, C), x_dt), ((rows,), F32), ((rows,), F32), ((2,), torch.int64))
    before = generator_state()
    y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, y_dt, p)
    torch.cuda.synchronize()
    assert rng_pair(rng) == before and generator_state() == (before[0], before[1] + 4)
    keep = mask_of(rng, (rows, C), p)
    if rows * C <= 1000 * 1024:
        assert torch.equal(keep, dref.keep_mask(*rng_pair(rng), rows, C, p, device="cuda")), "mask op != Python"
    dy = randn((rows, C), g, y_dt)
    ds = randn((rows, C), g, x_dt, 0.5)
    poison(((rows, C), x_dt), ((rows, C), d_dt), ((C,), F32), ((C,) if bias else (0,), F32))
    dx, ddelta, dw, db, ddb = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s, mean, rstd, w, bias, d_dt, p, rng)
    torch.cuda.synchronize()
    assert ddb.shape == (0,)
    r = reference(x, d, w, b, keep, p, dy, ds)
    assert s.dtype == x_dt and torch.equal(s, r["s"]), "s differs from x + F.dropout(delta) with the kernels' mask"
    assert y.dtype == y_dt and dx.dtype == x_dt and ddelta.dtype == d_dt
    errs = {"y": rel_err(y, r["y"]), "mean": rel_err(mean, r["mean"]), "rstd": rel_err(rstd, r["rstd"]),
            "dx": rel_err(dx, r["dx"]), "ddelta": rel_err(ddelta, r["ddelta"]), "dw": rel_err(dw, r["dw"])}
    if bias:
        errs["db"] = rel_err(db, r["db"])
    assert not ddelta[~keep].any(), "ddelta is not zero where the mask drops"
    print(f"[ln dropout rows={rows} C={C} {x_dt}/{d_dt}/{y_dt} bias={bias} p={p} seed={seed}] "
          + " ".join(f"{k}={v:.2e}" for k, v in errs.items()))
    tol = {"y": TOL[y_dt], "mean": TOL[F32], "rstd": TOL[F32], "dx": TOL[x_dt], "ddelta": TOL[d_dt],
           "dw": TOL[F32], "db": TOL[F32]}
    bad = {k: v for k, v in errs.items() if not v <= tol[k]}  # NaN fails too
    assert not bad, f"errors above tolerance {bad} (seed {seed})"


def test_three_dim_inputs_and_no_ds():
    """(B, T, C) tensors (the model's), and a backward without the residual's gradient (ds None)."""
    seed = new_seed()
    g, x, d, w, b = make_case((4, 37, 384), F32, BF16, True, seed)
    y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, 0.2)
    assert y.shape == s.shape == x.shape and mean.shape == (4, 37)
    keep = mask_of(rng, x.shape, 0.2)
    dy = randn(x.shape, g, BF16)
    dx, ddelta, dw, db, _ = torch.ops.tk.dropout_add_layer_norm_bwd(dy, None, s, mean, rstd, w, True, BF16, 0.2, rng)
    r = reference(x, d, w, b, keep, 0.2, dy, None)
    assert torch.equal(s, r["s"])
    for name, ours, tol in (("y", y, TOL[BF16]), ("dx", dx, TOL[F32]), ("ddelta", ddelta, TOL[BF16]),
                            ("dw", dw, TOL[F32]), ("db", db, TOL[F32])):
        assert rel_err(ours, r[name]) <= tol, (name, rel_err(ours, r[name]), seed)


@pytest.mark.parametrize("x_dt,d_dt,y_dt", [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F16, F16), (F32, F32, F32)],
                         ids=["x32-d16b-y16b", "x16b-d16b-y16b", "x32-d16h-y16h", "x32-d32-y32"])
@pytest.mark.parametrize("rows,C", [(7, 200), (1000, 768), (16384, 768), (333, 2048)])
def test_delta_bias_with_dropout(rows, C, x_dt, d_dt, y_dt):
    """delta_bias (a GEMM's bias added here) under the dropout: s = x + dropout(round_D(delta + delta_bias))
    exactly, its gradient the column sums of ddelta (masked and scaled); the rest against float64."""
    seed = new_seed()
    p = 0.2
    g, x, d, w, b = make_case((rows, C), x_dt, d_dt, True, seed)
    dbias = randn((C,), g, F32, 0.3)
    poison(((rows, C), y_dt), ((rows, C), x_dt), ((rows,), F32), ((rows,), F32), ((2,), torch.int64))
    y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, y_dt, p, dbias)
    keep = mask_of(rng, (rows, C), p)
    dy, ds = randn((rows, C), g, y_dt), randn((rows, C), g, x_dt, 0.5)
    poison(((rows, C), x_dt), ((rows, C), d_dt), ((C,), F32), ((C,), F32), ((C,), F32))
    dx, ddelta, dw, db, ddb = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s, mean, rstd, w, True, d_dt, p, rng,
                                                                      True)
    torch.cuda.synchronize()
    r = reference(x, (d + dbias).to(d_dt), w, b, keep, p, dy, ds)
    assert torch.equal(s, r["s"]), "s differs from x + F.dropout(delta + delta_bias) with the kernels' mask"
    errs = {"y": rel_err(y, r["y"]), "dx": rel_err(dx, r["dx"]), "ddelta": rel_err(ddelta, r["ddelta"]),
            "dw": rel_err(dw, r["dw"]), "db": rel_err(db, r["db"]),
            "ddelta_bias": rel_err(ddb, r["ddelta"].sum(0)),
            "ddelta_bias_vs_stored": rel_err(ddb, ddelta.double().sum(0))}
    print(f"[ln dropout+delta_bias rows={rows} C={C} {x_dt}/{d_dt}/{y_dt} seed={seed}] "
          + " ".join(f"{k}={v:.2e}" for k, v in errs.items()))
    tol = {"y": TOL[y_dt], "dx": TOL[x_dt], "ddelta": TOL[d_dt], "dw": TOL[F32], "db": TOL[F32],
           "ddelta_bias": TOL[d_dt], "ddelta_bias_vs_stored": 1e-5}
    bad = {k: v for k, v in errs.items() if not v <= tol[k]}
    assert not bad, f"errors above tolerance {bad} (seed {seed})"
    # eager (C++ autograd) and custom-op paths: the same kernels, the same gradients bitwise
    outs = []
    for path in (ln.add_layer_norm_op, ln._custom_op_path):
        leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b, dbias)]
        torch.manual_seed(seed)  # each path draws its mask from the generator: the same one
        s2, y2 = path(*leaves[:4], 1e-5, y_dt, p, leaves[4])
        torch.autograd.backward([y2, s2], [dy, ds])
        outs.append((s2, y2, [t.grad for t in leaves]))
    (s1, y1, g1), (s2, y2, g2) = outs
    assert torch.equal(s1, s2) and torch.equal(y1, y2)
    for i, (a, c) in enumerate(zip(g1, g2)):
        assert a.dtype == c.dtype and torch.equal(a, c), f"gradient {i} (seed {seed})"


# -----------------------------------------------------------------------------
# the mask: the debug op, statistics, reproducibility, p = 0

def test_mask_op_matches_python_reference():
    for seed, offset in ((1337, 0), (2**62 + 12345, 2**32 + 8), (7, 2**40 + 4)):
        rng = torch.tensor([seed, offset], dtype=torch.int64, device="cuda")
        for rows, cols, p in ((3, 64, 0.1), (129, 200, 0.5), (1, 8, 0.2), (1000, 1600, 0.2)):
            ours = ln.dropout_mask(rng, rows, cols, p)
            assert ours.shape == (rows, cols) and ours.dtype == torch.uint8
            assert torch.equal(ours.bool(), dref.keep_mask(seed, offset, rows, cols, p, device="cuda")), \
                (seed, offset, rows, cols, p)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_kept_fraction_and_independence(p):
    """1.26e7 elements (16384 x 768): the kept fraction within 4 sigma of 1 - p, the elements the forward
    drops are exactly the mask's zeros (s == x there), two calls draw different masks that agree like
    independent bits, rows differ."""
    rows, C = 16384, 768
    g, x, d, w, b = make_case((rows, C), F32, BF16, True, new_seed())
    d = d.abs() + 0.01  # never 0: every dropped element shows in s - x
    y, s, mean, rstd, rng1 = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, p)
    _, s2, _, _, rng2 = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, p)
    assert rng_pair(rng2) == (rng_pair(rng1)[0], rng_pair(rng1)[1] + 4)
    m1, m2 = mask_of(rng1, (rows, C), p), mask_of(rng2, (rows, C), p)
    n = m1.numel()
    kept = m1.double().mean().item()
    sigma = math.sqrt(p * (1 - p) / n)
    print(f"[p={p}] kept {kept:.6f} vs {1 - p} ({(kept - (1 - p)) / sigma:+.2f} sigma, n={n})")
    assert abs(kept - (1 - p)) < 4 * sigma
    assert torch.equal(s == x, ~m1) and torch.equal(s2 == x, ~m2)
    assert not torch.equal(m1, m2) and not torch.equal(m1[0], m1[1])
    agree = (m1 == m2).double().mean().item()
    assert abs(agree - (p * p + (1 - p) ** 2)) < 1e-3


def test_same_seed_same_results_and_manual_seed_reproduces():
    seed = new_seed()
    g, x, d, w, b = make_case((777, 1024), F32, BF16, True, seed)
    dy, ds = randn(x.shape, g, BF16), randn(x.shape, g, F32)
    runs = []
    for _ in range(2):
        torch.manual_seed(4321)
        y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, 0.2)
        grads = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s, mean, rstd, w, True, BF16, 0.2, rng)
        runs.append((y, s, mean, rstd, rng, grads))
    (y1, s1, mean1, rstd1, r1, g1), (y2, s2, _, _, r2, g2) = runs
    assert rng_pair(r1) == rng_pair(r2) and rng_pair(r1)[0] == 4321
    assert torch.equal(y1, y2) and torch.equal(s1, s2)
    for a, c in zip(g1, g2):
        assert torch.equal(a, c)
    # the backward depends on rng_state's values only: a fresh tensor of the same (seed, offset) gives the same
    explicit = torch.tensor([int(v) for v in r1.tolist()], dtype=torch.int64, device="cuda")
    again = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s1, mean1, rstd1, w, True, BF16, 0.2, explicit)
    for a, c in zip(again, g1):
        assert torch.equal(a, c)
    # the next call (no reseeding) draws another mask
    _, s3, _, _, r3 = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, 0.2)
    assert rng_pair(r3) != rng_pair(r1) and not torch.equal(s3, s1)


@pytest.mark.parametrize("x_dt,d_dt,y_dt", [(F32, BF16, BF16), (BF16, BF16, BF16)], ids=["autocast", "bf16"])
def test_p0_is_the_op_without_dropout_and_draws_nothing(x_dt, d_dt, y_dt):
    """dropout_p = 0 through every entry point is bitwise the op without dropout (the same kernels), and the
    generator is not touched."""
    seed = new_seed()
    g, x, d, w, b = make_case((1000, 768), x_dt, d_dt, True, seed)
    gy, gs = randn(x.shape, g, y_dt), randn(x.shape, g, x_dt)
    outs = []
    state = torch.cuda.get_rng_state()
    for call in (lambda *t: ln.add_layer_norm_op(*t, 1e-5, y_dt),
                 lambda *t: ln.add_layer_norm_op(*t, 1e-5, y_dt, 0.0),
                 lambda *t: ln._custom_op_path(*t, 1e-5, y_dt, 0.0),
                 lambda *t: tk_kernels.add_layer_norm(*t, out_dtype=y_dt, dropout_p=0.0)):
        leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b)]
        s, y = call(*leaves)
        torch.autograd.backward([y, s], [gy, gs])
        outs.append((s, y, [t.grad for t in leaves]))
    assert torch.equal(torch.cuda.get_rng_state(), state)
    for s, y, grads in outs[1:]:
        assert torch.equal(s, outs[0][0]) and torch.equal(y, outs[0][1])
        for a, c in zip(grads, outs[0][2]):
            assert torch.equal(a, c)


def test_eager_path_equals_custom_op_path():
    """The eager op (autograd in C++: DropoutAddLayerNorm) and the custom ops with their registered autograd,
    from the same generator state: the same mask, outputs and gradients bitwise; also with s or y unused."""
    seed = new_seed()
    g, x, d, w, b = make_case((513, 1600), F32, BF16, True, seed)
    gy, gs = randn(x.shape, g, BF16), randn(x.shape, g, F32)
    for use in (("y", "s"), ("y",), ("s",)):
        results = []
        for path in (ln.add_layer_norm_op, ln._custom_op_path):
            leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b)]
            torch.manual_seed(77)
            s, y = path(*leaves, 1e-5, BF16, 0.2)
            outs = [(o, gg) for name, o, gg in (("y", y, gy), ("s", s, gs)) if name in use]
            torch.autograd.backward([o for o, _ in outs], [gg for _, gg in outs])
            results.append((s, y, [t.grad for t in leaves]))
        (s1, y1, g1), (s2, y2, g2) = results
        assert torch.equal(s1, s2) and torch.equal(y1, y2), use
        if use == ("s",):  # eager: no gradient for weight / bias; the custom op: zeros
            assert g1[2] is None and g1[3] is None and not g2[2].any() and not g2[3].any()
            g1, g2 = g1[:2], g2[:2]
        for a, c in zip(g1, g2):
            assert a.dtype == c.dtype and torch.equal(a, c), use


def test_eager_node_is_the_cpp_one():
    _, x, d, w, b = make_case((8, 256), F32, BF16, True, new_seed())
    s, y = ln.add_layer_norm_op(x, d.requires_grad_(), w, b, 1e-5, BF16, 0.2)
    assert "DropoutAddLayerNorm" in y.grad_fn.name(), y.grad_fn.name()


def test_public_api_with_dropout_and_errors():
    _, x, d, w, b = make_case((64, 768), F32, BF16, True, new_seed())
    torch.manual_seed(3)
    s, y = tk_kernels.add_layer_norm(x, d, w, b, out_dtype=BF16, dropout_p=0.2)
    torch.manual_seed(3)
    s2, y2 = ln.add_layer_norm_op(x, d, w, b, 1e-5, BF16, 0.2)
    assert torch.equal(s, s2) and torch.equal(y, y2)
    with torch.autocast("cuda", dtype=torch.bfloat16):  # the output dtype from autocast, as without dropout
        _, y3 = tk_kernels.add_layer_norm(x, d, w, b, dropout_p=0.2)
    assert y3.dtype == BF16
    with pytest.raises(ValueError, match=r"dropout_p in \[0, 1\)"):
        tk_kernels.add_layer_norm(x, d, w, b, out_dtype=BF16, dropout_p=1.0)
    with pytest.raises(RuntimeError, match="dropout_p must be in"):
        torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, 0.0)


# -----------------------------------------------------------------------------
# opcheck, torch.compile, CUDA graphs

def test_opcheck():
    g = torch.Generator(device="cuda").manual_seed(0)
    x, d = randn((3, 5, 200), g, F32), randn((3, 5, 200), g, BF16)
    w, b = randn((200,), g, F32), randn((200,), g, F32)
    # every call draws a new mask: the checks comparing two calls' outputs do not apply to the forward
    torch.library.opcheck(torch.ops.tk.dropout_add_layer_norm_fwd.default, (x, d, w, b, 1e-5, BF16, 0.2),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, 0.2)
    dy = torch.randn_like(y)
    # the backward is a pure function of its inputs (the mask comes from rng_state): every check
    torch.library.opcheck(torch.ops.tk.dropout_add_layer_norm_bwd.default,
                          (dy, x, s, mean, rstd, w, True, BF16, 0.2, rng))
    torch.library.opcheck(torch.ops.tk.dropout_add_layer_norm_bwd.default,
                          (dy, None, s, mean, rstd, w, False, F32, 0.5, rng))
    # with a delta_bias
    torch.library.opcheck(torch.ops.tk.dropout_add_layer_norm_fwd.default, (x, d, w, b, 1e-5, BF16, 0.2, b),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    torch.library.opcheck(torch.ops.tk.dropout_add_layer_norm_bwd.default,
                          (dy, x, s, mean, rstd, w, True, BF16, 0.2, rng, True))


def test_compiled_matches_eager_bitwise():
    seed = new_seed()
    g, x, d, w, b = make_case((333, 768), F32, BF16, True, seed)
    gy, gs = randn(x.shape, g, BF16), randn(x.shape, g, F32)
    with dispatch.override("attention", tk=None), dispatch.override("classifier", tk=None), \
            dispatch.override("mlp", tk=None):
        plan = dispatch.plan("tk", "cuda", BF16, 64, dropout_p=0.2, n_embd=768)

    def f(x, d, w, b):
        return dispatch.add_layer_norm(plan, x, d, w, b, dropout_p=0.2)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b)]
    s, y = compiled(*leaves)  # compile (forward and backward) before seeding
    torch.autograd.backward([y, s], [gy, gs])
    results = []
    for fn in (f, compiled):
        leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b)]
        torch.manual_seed(99)
        s, y = fn(*leaves)
        torch.autograd.backward([y, s], [gy, gs])
        results.append((s, y, [t.grad for t in leaves]))
    (s1, y1, g1), (s2, y2, g2) = results
    assert torch.equal(s1, s2) and torch.equal(y1, y2)
    for a, c in zip(g1, g2):
        assert torch.equal(a, c)


def test_cuda_graph_replays_draw_fresh_masks():
    seed = new_seed()
    rows, C, p = 4096, 384, 0.2
    g, x, d, w, b = make_case((rows, C), F32, BF16, True, seed)
    dy, ds = randn(x.shape, g, BF16), randn(x.shape, g, F32)

    def step():
        y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, p)
        grads = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s, mean, rstd, w, True, BF16, p, rng)
        return y, s, rng, grads

    graph, (y_s, s_s, rng_s, grads_s) = capture(step)
    replays = []
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        replays.append((y_s.clone(), s_s.clone(), rng_s.clone(), [t.clone() for t in grads_s]))
    (y1, s1, r1, g1), (y2, s2, r2, g2) = replays
    assert rng_pair(r1) != rng_pair(r2), "the replays used the same (seed, offset)"
    assert not torch.equal(s1, s2)
    for y, s, rng, (dx, ddelta, dw, db, _) in replays:  # each replay's outputs are exact for its own mask
        keep = mask_of(rng, (rows, C), p)
        r = reference(x, d, w, b, keep, p, dy, ds)
        assert torch.equal(s, r["s"])
        for name, ours, tol in (("y", y, TOL[BF16]), ("dx", dx, TOL[F32]), ("ddelta", ddelta, TOL[BF16]),
                                ("dw", dw, TOL[F32]), ("db", db, TOL[F32])):
            assert rel_err(ours, r[name]) <= tol, (name, rel_err(ours, r[name]), seed)


# -----------------------------------------------------------------------------
# the GPT model

CFG = dict(block_size=64, vocab_size=512, n_layer=2, n_head=2, n_embd=128, dropout=0.2, bias=True)


def test_compiled_gpt_train_step_with_dropout_has_no_graph_breaks():
    from model import GPT, GPTConfig
    torch.manual_seed(new_seed())
    model = GPT(GPTConfig(**CFG, kernels="tk")).cuda()
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("layer_norm", training=True) == "tk" and plan.path("attention", training=True) == "tk"
    idx = torch.randint(0, CFG["vocab_size"], (4, 64), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_break_count == 0, str(explained)
    code = "".join(gr.code for gr in explained.graphs)
    assert "dropout_add_layer_norm_fwd" in code, "the fused dropout op is not in the graph"
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model), fullgraph=True)
    for m in (compiled, model):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = m(idx, idx)
        loss.backward()
        for n, q in m.named_parameters():
            assert q.grad is not None and torch.isfinite(q.grad).all(), n
    # the compiled step draws our op's offsets: 2 n_layer fused adds (all but the first block's ln_1, plus
    # ln_f) and n_layer attention calls, 4 each, on top of whatever Inductor draws for the embedding dropout
    before = generator_state()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        compiled(idx, idx)
    assert generator_state()[1] - before[1] >= 4 * 3 * CFG["n_layer"]


def test_eval_mode_draws_nothing_and_training_does():
    from model import GPT, GPTConfig
    torch.manual_seed(0)
    model = GPT(GPTConfig(**CFG, kernels="tk")).cuda()
    model.plan_kernels(dtype=torch.bfloat16)
    idx = torch.randint(0, CFG["vocab_size"], (2, 64), device="cuda")
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        state = torch.cuda.get_rng_state()
        _, a = model(idx, idx)
        _, b = model(idx, idx)
        assert torch.equal(torch.cuda.get_rng_state(), state) and torch.equal(a, b)
    model.train()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        _, c = model(idx, idx)
        _, d = model(idx, idx)
    assert not torch.equal(c, d)


def _train_losses(kernels, steps=60, seed=1234, attention_torch=False):
    """Training losses of 60 AdamW steps on a learnable stream (token t+1 = token t + 7 mod V, 20% noise),
    bf16 autocast, dropout 0.2, and the eval loss on a fixed batch afterwards."""
    from model import GPT, GPTConfig
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**CFG, kernels=kernels)).cuda()
    if attention_torch:  # only the layer_norm family differs from kernels=torch
        with dispatch.override("attention", unsupported=lambda device, dtype, dims: "off in this test"), \
                dispatch.override("mlp", tk=None):
            model.plan_kernels(dtype=torch.bfloat16, warn=False)
    else:
        model.plan_kernels(dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator(device="cuda").manual_seed(seed)
    V = CFG["vocab_size"]
    losses = []
    for _ in range(steps):
        start = torch.randint(0, V, (8, 1), generator=g, device="cuda")
        seq = (start + 7 * torch.arange(65, device="cuda")) % V
        noise = torch.randint(0, V, seq.shape, generator=g, device="cuda")
        seq = torch.where(torch.rand(seq.shape, generator=g, device="cuda") < 0.2, noise, seq)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    start = torch.randint(0, V, (32, 1), generator=torch.Generator(device="cuda").manual_seed(99), device="cuda")
    seq = (start + 7 * torch.arange(65, device="cuda")) % V
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        _, ev = model(seq[:, :-1], seq[:, 1:])
    return losses, ev.item()


@pytest.mark.parametrize("attention_torch", [True, False], ids=["ln-only", "all-tk"])
def test_training_losses_with_dropout_match_torch_statistically(attention_torch):
    """The masks differ from PyTorch's, so the losses are compared statistically: the mean of the last 20
    training losses within 1.5% and the eval loss within 3% of kernels=torch's. Calibration (CPU, fp32,
    this config and data, kernels=torch with 5 different mask seeds): the mean of the last 20 losses spread
    over 0.12% (4.809-4.815) and the eval loss over 0.6% (3.236-3.257), while dropout 0.1 instead of 0.2
    moved them by 4.6% and 8.6%."""
    kernels = "auto" if attention_torch else "tk"
    (ours, ev_ours), (ref, ev_ref) = _train_losses(kernels, attention_torch=attention_torch), _train_losses("torch")
    m_ours, m_ref = sum(ours[-20:]) / 20, sum(ref[-20:]) / 20
    print(f"[train dropout {kernels} attention_torch={attention_torch}] first {ours[0]:.4f}/{ref[0]:.4f} "
          f"mean(last 20) {m_ours:.4f}/{m_ref:.4f} eval {ev_ours:.4f}/{ev_ref:.4f}")
    assert ours[-1] < ours[0] - 0.5, "the model did not learn"
    assert abs(m_ours - m_ref) / m_ref < 0.015, (m_ours, m_ref)
    assert abs(ev_ours - ev_ref) / ev_ref < 0.03, (ev_ours, ev_ref)
