"""GPU tests of the residual add + LayerNorm kernels (python -m pytest -m gpu tests/layernorm;
skipped without a CUDA GPU).

Accuracy: the forward (s, y, mean, rstd) and every gradient (dx, ddelta, dweight, dbias) are compared
with a float64 reference computed on the GPU from the same inputs (upcast), as relative L2 error
||x - ref|| / ||ref||, against a tolerance set by the dtype the value is stored in. The sum s must
equal torch's x + delta exactly. Each case draws fresh random inputs from a seed taken from
os.urandom, printed with -s so a failure can be reproduced.

Unwritten outputs are caught by poisoning (as in tests/attention/test_attention_gpu.py): right
before a launch, blocks of exactly the sizes the op will allocate, in its order, are filled with
0xFF bytes (NaN in every float dtype) and freed, so the op's own torch.empty calls get NaN memory;
any element a kernel fails to write stays NaN and fails the comparison.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("tk layer_norm needs compute capability >= 8.0", allow_module_level=True)

import tk_kernels  # noqa: E402
from tk_kernels import dispatch  # noqa: E402
from tk_kernels.families.layernorm import ops as ln  # noqa: E402
from gpu_test_utils import new_seed, poison  # noqa: E402


F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
# tolerance of the relative L2 error by the dtype a value is stored in (bf16 rounding is ~1e-3)
TOL = {F32: 2e-4, BF16: 8e-3, F16: 1.5e-3}
# (x, delta, y): autocast training (fp32 residual, 16-bit sublayer output and LN output), pure
# 16-bit models, fp32 everywhere, and plain LayerNorm (delta None)
DTYPES = [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F16, F16), (F16, F16, F16), (F32, F32, F32),
          (F32, None, BF16), (BF16, None, BF16), (F32, F32, BF16)]
DTYPE_IDS = ["x32-d16b-y16b", "x16b-d16b-y16b", "x32-d16h-y16h", "x16h-d16h-y16h", "x32-d32-y32",
             "x32-noD-y16b", "x16b-noD-y16b", "x32-d32-y16b"]
ROWS = [1, 7, 1000, 16384]
WIDTHS = [64, 96, 200, 768, 1024, 1600, 2048, 8192]


@pytest.fixture(scope="module", autouse=True)
def _built():
    """Build/load the extension once, failing (not skipping) with the build error if it breaks."""
    reason = ln.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    assert reason is None, reason


def randn(shape, g, dtype, scale=1.0, shift=0.0):
    return (torch.randn(shape, generator=g, device="cuda") * scale + shift).to(dtype)


def rel_err(x, ref) -> float:
    ref = ref.double()
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def ref_forward(s, w, b, eps):
    """float64 LayerNorm of s (already the rounded sum) with mean and rstd."""
    s = s.double()
    mean = s.mean(-1)
    rstd = torch.rsqrt(s.var(-1, unbiased=False) + eps)
    y = (s - mean[..., None]) * rstd[..., None] * w.double()
    return (y + b.double() if b is not None else y), mean, rstd


def make_case(rows, C, x_dt, d_dt, bias, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = randn((rows, C), g, x_dt, 1.0, 0.3)  # a non-zero mean per row, like a residual stream
    d = None if d_dt is None else randn((rows, C), g, d_dt, 0.5)
    w = randn((C,), g, F32, 0.2, 1.0)
    b = randn((C,), g, F32, 0.1) if bias else None
    return g, x, d, w, b


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_dt,d_dt,y_dt", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("C", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
def test_forward_and_backward_against_float64(rows, C, x_dt, d_dt, y_dt, bias):
    if rows * C > 16384 * 2048:
        pytest.skip("keeps the float64 reference within a few GB")
    seed = new_seed()
    g, x, d, w, b = make_case(rows, C, x_dt, d_dt, bias, seed)
    eps = 1e-5
    # forward: y, s, mean, rstd (the binding's allocation order)
    poison(((rows, C), y_dt), ((rows, C) if d is not None else (0,), x_dt), ((rows,), F32), ((rows,), F32))
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, eps, y_dt)
    torch.cuda.synchronize()
    s_torch = x if d is None else x + d
    if d is not None:
        assert s.dtype == x_dt and torch.equal(s, s_torch), "s differs from torch's x + delta"
    y_ref, mean_ref, rstd_ref = ref_forward(s_torch, w, b, eps)
    errs = {"y": rel_err(y, y_ref), "mean": rel_err(mean, mean_ref), "rstd": rel_err(rstd, rstd_ref)}
    assert y.dtype == y_dt

    # backward: dy in y's dtype, ds (the residual's incoming gradient) in x's dtype
    dy = randn((rows, C), g, y_dt)
    ds = randn((rows, C), g, x_dt, 0.5) if d is not None else None
    split = d is not None and d.dtype != x_dt
    poison(((rows, C), x_dt), ((rows, C) if split else (0,), d_dt or x_dt), ((C,), F32),
           ((C,) if bias else (0,), F32))
    dx, ddelta, dw, db, ddb = torch.ops.tk.add_layer_norm_bwd(dy, ds, s if d is not None else x, mean, rstd, w,
                                                              bias, d.dtype if split else None)
    torch.cuda.synchronize()
    assert ddb.shape == (0,)
    s64 = s_torch.double().requires_grad_()
    w64 = w.double().requires_grad_()
    b64 = b.double().requires_grad_() if b is not None else None
    y64 = F.layer_norm(s64, (C,), w64, b64, eps)
    grads = torch.autograd.grad(y64, [t for t in (s64, w64, b64) if t is not None], dy.double())
    dx_ref = grads[0] + (ds.double() if ds is not None else 0.0)
    errs.update(dx=rel_err(dx, dx_ref), dw=rel_err(dw, grads[1]))
    if bias:
        errs["db"] = rel_err(db, grads[2])
    if split:
        errs["ddelta"] = rel_err(ddelta, dx_ref)
        assert ddelta.dtype == d.dtype
    print(f"[ln rows={rows} C={C} {x_dt}/{d_dt}/{y_dt} bias={bias} seed={seed}] "
          + " ".join(f"{k}={v:.2e}" for k, v in errs.items()))
    tol = {"y": TOL[y_dt], "mean": TOL[F32], "rstd": TOL[F32], "dx": TOL[x_dt], "dw": TOL[F32],
           "db": TOL[F32], "ddelta": TOL[d_dt or x_dt]}
    # dw sums dy * xhat over the rows: the reference's xhat is float64, ours fp32 from fp32 mean/rstd
    bad = {k: v for k, v in errs.items() if not v <= tol[k]}  # NaN fails too
    assert not bad, f"errors above tolerance {bad} (seed {seed})"


@pytest.mark.parametrize("x_dt,d_dt,y_dt", [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, None, F16)],
                         ids=["autocast", "bf16", "plain"])
def test_public_api_autograd(x_dt, d_dt, y_dt):
    """tk_kernels.add_layer_norm / layer_norm through autograd: the gradients of x, delta, weight, bias
    equal the reference op's (a float64 copy), including the residual gradient flowing through s."""
    seed = new_seed()
    g, x, d, w, b = make_case(333, 768, x_dt, d_dt, True, seed)
    leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b) if t is not None]
    if d is not None:
        xs, ds_, ws, bs = leaves
        s, y = tk_kernels.add_layer_norm(xs, ds_, ws, bs, out_dtype=y_dt)
    else:
        xs, ws, bs = leaves
        s, y = xs, tk_kernels.layer_norm(xs, ws, bs, out_dtype=y_dt)
    gy, gs = randn(y.shape, g, y_dt), randn(s.shape, g, x_dt)
    torch.autograd.backward([y, s] if d is not None else [y], [gy, gs] if d is not None else [gy])
    refs = [t.detach().double().requires_grad_() for t in (x, d, w, b) if t is not None]
    s64 = refs[0] + refs[1] if d is not None else refs[0]
    if d is not None:  # s = x + delta is rounded to x's dtype, as the residual stream stores it
        s64 = s64 + (s64.detach().to(x_dt).double() - s64.detach())
    y64 = F.layer_norm(s64, (768,), refs[-2], refs[-1], 1e-5)
    torch.autograd.backward([y64, s64] if d is not None else [y64],
                            [gy.double(), gs.double()] if d is not None else [gy.double()])
    for ours, ref in zip(leaves, refs):
        assert ours.grad is not None and ours.grad.dtype == ours.dtype
        err = rel_err(ours.grad, ref.grad)
        assert err <= TOL[ours.dtype], f"grad error {err:.2e} for a {ours.dtype} input (seed {seed})"


def test_non_contiguous_inputs_are_copied():
    x = torch.randn(64, 2, 256, device="cuda")[:, 1]  # row stride 512
    w = torch.randn(256, device="cuda")
    assert not x.is_contiguous()
    torch.testing.assert_close(tk_kernels.layer_norm(x, w), F.layer_norm(x, (256,), w), rtol=1e-5, atol=1e-5)
    off = torch.randn(64 * 256 + 1, device="cuda")[1:].view(64, 256)  # 4-byte offset: not 16-byte aligned
    torch.testing.assert_close(tk_kernels.layer_norm(off, w), F.layer_norm(off, (256,), w), rtol=1e-5, atol=1e-5)
    xt = torch.randn(256, 64, device="cuda").t()  # columns: not contiguous at all
    torch.testing.assert_close(tk_kernels.layer_norm(xt, w), F.layer_norm(xt, (256,), w), rtol=1e-5, atol=1e-5)


def test_backward_is_reproducible():
    seed = new_seed()
    _, x, d, w, b = make_case(5000, 1024, F32, BF16, True, seed)
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, BF16)
    dy = torch.randn_like(y)
    outs = [torch.ops.tk.add_layer_norm_bwd(dy, None, s, mean, rstd, w, True, BF16) for _ in range(2)]
    for a, c in zip(*outs):
        assert torch.equal(a, c)


def test_backward_widths_in_any_order():
    """Widths that share a backward kernel but need different shared memory (C > 6144: 8 C bytes per
    CTA), in growing, shrinking and growing order again (the launch parameters are cached per width)."""
    for C in (7000, 8192, 6400, 8192, 7000):
        seed = new_seed()
        g, x, d, w, b = make_case(37, C, F32, BF16, True, seed)
        y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, BF16)
        dy = randn((37, C), g, BF16)
        dx, _, dw, db, _ = torch.ops.tk.add_layer_norm_bwd(dy, None, s, mean, rstd, w, True, None)
        s64, w64, b64 = (t.double().requires_grad_() for t in (s, w, b))
        grads = torch.autograd.grad(F.layer_norm(s64, (C,), w64, b64, 1e-5), [s64, w64, b64], dy.double())
        for ours, ref, tol in zip((dx, dw, db), grads, (TOL[F32], TOL[F32], TOL[F32])):
            assert rel_err(ours, ref) <= tol, f"C={C} (seed {seed})"


def test_zero_rows():
    x = torch.empty(0, 768, device="cuda")
    w = torch.randn(768, device="cuda")
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, x, w, w, 1e-5, BF16)
    assert y.shape == (0, 768) and mean.shape == (0,)
    dx, _, dw, db, _ = torch.ops.tk.add_layer_norm_bwd(y, None, s, mean, rstd, w, True, None)
    assert dx.shape == (0, 768) and torch.equal(dw, torch.zeros_like(w)) and torch.equal(db, torch.zeros_like(w))
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, x, w, w, 1e-5, BF16, w)
    _, _, _, _, ddb = torch.ops.tk.add_layer_norm_bwd(y, None, s, mean, rstd, w, True, None, True)
    assert torch.equal(ddb, torch.zeros_like(w))


def test_opcheck():
    g = torch.Generator(device="cuda").manual_seed(0)
    x, d = randn((3, 5, 200), g, F32), randn((3, 5, 200), g, BF16)
    w, b = randn((200,), g, F32), randn((200,), g, F32)
    torch.library.opcheck(torch.ops.tk.add_layer_norm_fwd.default, (x, d, w, b, 1e-5, BF16))
    torch.library.opcheck(torch.ops.tk.add_layer_norm_fwd.default, (x, None, w, None, 1e-5, F32))
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, BF16)
    dy = torch.randn_like(y)
    torch.library.opcheck(torch.ops.tk.add_layer_norm_bwd.default, (dy, x, s, mean, rstd, w, True, BF16))
    torch.library.opcheck(torch.ops.tk.add_layer_norm_bwd.default, (dy, None, s, mean, rstd, w, False, None))
    # with a delta_bias (the GEMM bias moved into the op)
    torch.library.opcheck(torch.ops.tk.add_layer_norm_fwd.default, (x, d, w, b, 1e-5, BF16, b))
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, b)
    torch.library.opcheck(torch.ops.tk.add_layer_norm_bwd.default, (dy, x, s, mean, rstd, w, True, BF16, True))
    torch.library.opcheck(torch.ops.tk.add_layer_norm_bwd.default, (dy, None, s, mean, rstd, w, False, None, True))


# -----------------------------------------------------------------------------
# delta_bias: a GEMM's bias added to delta here (model.py's c_proj biases), its gradient ddelta's column sums

DB_DTYPES = [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F16, F16), (F16, F16, F16), (F32, F32, F32)]
DB_IDS = ["x32-d16b-y16b", "x16b-d16b-y16b", "x32-d16h-y16h", "x16h-d16h-y16h", "x32-d32-y32"]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_dt,d_dt,y_dt", DB_DTYPES, ids=DB_IDS)
@pytest.mark.parametrize("C", [64, 200, 768, 2048, 8192])
@pytest.mark.parametrize("rows", ROWS)
def test_delta_bias_against_float64(rows, C, x_dt, d_dt, y_dt, bias):
    """s = x + round_D(delta + delta_bias) exactly as torch computes it; y, mean, rstd and every gradient
    (dx, ddelta, dweight, dbias, ddelta_bias) against float64, ddelta_bias = the column sums of ddelta."""
    if rows * C > 16384 * 2048:
        pytest.skip("keeps the float64 reference within a few GB")
    seed = new_seed()
    g, x, d, w, b = make_case(rows, C, x_dt, d_dt, bias, seed)
    dbias = randn((C,), g, F32, 0.3)
    eps = 1e-5
    # forward: y, s, mean, rstd (the binding's allocation order)
    poison(((rows, C), y_dt), ((rows, C), x_dt), ((rows,), F32), ((rows,), F32))
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, eps, y_dt, dbias)
    torch.cuda.synchronize()
    s_torch = x + (d + dbias).to(d_dt)
    assert s.dtype == x_dt and torch.equal(s, s_torch), "s differs from torch's x + (delta + delta_bias)"
    y_ref, mean_ref, rstd_ref = ref_forward(s_torch, w, b, eps)
    errs = {"y": rel_err(y, y_ref), "mean": rel_err(mean, mean_ref), "rstd": rel_err(rstd, rstd_ref)}

    dy, ds = randn((rows, C), g, y_dt), randn((rows, C), g, x_dt, 0.5)
    split = d_dt != x_dt
    poison(((rows, C), x_dt), ((rows, C) if split else (0,), d_dt), ((C,), F32), ((C,) if bias else (0,), F32),
           ((C,), F32))
    dx, ddelta, dw, db, ddb = torch.ops.tk.add_layer_norm_bwd(dy, ds, s, mean, rstd, w, bias,
                                                              d_dt if split else None, True)
    torch.cuda.synchronize()
    s64, w64 = s_torch.double().requires_grad_(), w.double().requires_grad_()
    b64 = b.double().requires_grad_() if b is not None else None
    y64 = F.layer_norm(s64, (C,), w64, b64, eps)
    grads = torch.autograd.grad(y64, [t for t in (s64, w64, b64) if t is not None], dy.double())
    dx_ref = grads[0] + ds.double()
    errs.update(dx=rel_err(dx, dx_ref), dw=rel_err(dw, grads[1]), ddelta_bias=rel_err(ddb, dx_ref.sum(0)))
    if bias:
        errs["db"] = rel_err(db, grads[2])
    if split:
        errs["ddelta"] = rel_err(ddelta, dx_ref)
    # exactly the column sums of ddelta as stored, up to fp32 summation order
    stored = ddelta if split else dx
    errs["ddelta_bias_vs_stored"] = rel_err(ddb, stored.double().sum(0))
    print(f"[ln+delta_bias rows={rows} C={C} {x_dt}/{d_dt}/{y_dt} bias={bias} seed={seed}] "
          + " ".join(f"{k}={v:.2e}" for k, v in errs.items()))
    tol = {"y": TOL[y_dt], "mean": TOL[F32], "rstd": TOL[F32], "dx": TOL[x_dt], "dw": TOL[F32], "db": TOL[F32],
           "ddelta": TOL[d_dt], "ddelta_bias": TOL[d_dt], "ddelta_bias_vs_stored": 1e-5}
    bad = {k: v for k, v in errs.items() if not v <= tol[k]}  # NaN fails too
    assert not bad, f"errors above tolerance {bad} (seed {seed})"


def with_delta_bias(path):
    """path (add_layer_norm_op or _custom_op_path) taking (x, delta, weight, bias, delta_bias, eps, out_dtype), for
    run_path."""
    return lambda x, d, w, b, db, eps, out_dtype: path(x, d, w, b, eps, out_dtype, 0.0, db)


@pytest.mark.parametrize("requires", [(1, 1, 1, 1, 1), (0, 0, 0, 0, 1), (1, 0, 0, 0, 0), (0, 1, 1, 1, 0)],
                         ids=lambda r: "rg" + "".join(map(str, r)))
@pytest.mark.parametrize("x_dt,d_dt,y_dt", [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F32, F32)],
                         ids=["autocast", "bf16", "f32"])
def test_delta_bias_eager_path_equals_custom_op_path(x_dt, d_dt, y_dt, requires):
    seed = new_seed()
    (x, d, w, b), gy, gs = eager_case(1000, 768, x_dt, d_dt, y_dt, True, seed)
    dbias = torch.randn(768, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed))
    inputs, req = (x, d, w, b, dbias), [bool(r) for r in requires]
    eager = run_path(with_delta_bias(ln.add_layer_norm_op), inputs, req, y_dt, gy, gs)
    assert "AddLayerNorm" in eager[1].grad_fn.name(), eager[1].grad_fn.name()
    assert_same(eager, run_path(with_delta_bias(ln._custom_op_path), inputs, req, y_dt, gy, gs), f"(seed {seed})")
    # s unused: no ds, the same kernels on both paths
    eager = run_path(with_delta_bias(ln.add_layer_norm_op), inputs, [True] * 5, y_dt, gy, gs, use=("y",))
    custom = run_path(with_delta_bias(ln._custom_op_path), inputs, [True] * 5, y_dt, gy, gs, use=("y",))
    assert_same(eager, custom, f"y alone (seed {seed})")
    # y unused: only the residual gradient flows (no kernel on the eager path), delta_bias's is ddelta's sums
    _, _, (gx, gd, gw, gb, gdb) = run_path(with_delta_bias(ln.add_layer_norm_op), inputs, [True] * 5, y_dt, gy, gs,
                                           use=("s",))
    assert torch.equal(gx, gs) and torch.equal(gd, gs.to(d_dt)) and gw is None and gb is None
    torch.testing.assert_close(gdb, gs.to(d_dt).double().sum(0).float(), rtol=1e-5, atol=1e-4)


def test_delta_bias_public_api_autograd():
    """tk_kernels.add_layer_norm(..., delta_bias=) through autograd against float64 (the roundings of delta +
    delta_bias and of the sum taken as the kernels take them), a 16-bit delta_bias's gradient in its dtype; delta_bias's
    gradient is the column sums of ddelta as stored."""
    seed = new_seed()
    g, x, d, w, b = make_case(333, 1024, F32, BF16, True, seed)
    for db_dt in (F32, BF16):
        dbias = randn((1024,), g, db_dt, 0.3)
        leaves = [t.detach().clone().requires_grad_() for t in (x, d, w, b, dbias)]
        s, y = tk_kernels.add_layer_norm(*leaves[:4], out_dtype=BF16, delta_bias=leaves[4])
        gy, gs = randn(y.shape, g, BF16), randn(s.shape, g, F32)
        torch.autograd.backward([y, s], [gy, gs])
        refs = [t.detach().double().requires_grad_() for t in (x, d, w, b, dbias)]
        dd = refs[1] + refs[4]
        dd = dd + (dd.detach().to(BF16).double() - dd.detach())  # delta + delta_bias rounded to delta's dtype
        s64 = refs[0] + dd
        s64 = s64 + (s64.detach().float().double() - s64.detach())
        y64 = F.layer_norm(s64, (1024,), refs[2], refs[3], 1e-5)
        torch.autograd.backward([y64, s64], [gy.double(), gs.double()])
        for i, (ours, ref) in enumerate(zip(leaves, refs)):
            assert ours.grad is not None and ours.grad.dtype == ours.dtype, i
            err = rel_err(ours.grad, ref.grad)
            # delta_bias's gradient sums ddelta as stored (rounded to delta's dtype, as an unfused bias's would be):
            # within delta's tolerance of float64, and within float32 summation of the stored ddelta
            tol = TOL[BF16] if i == 4 else TOL[ours.dtype]
            assert err <= tol, f"input {i}: grad error {err:.2e} (seed {seed})"
        stored = rel_err(leaves[4].grad, leaves[1].grad.double().sum(0))
        assert stored <= (1e-5 if db_dt == F32 else TOL[BF16]), f"delta_bias's grad vs stored ddelta {stored:.2e}"


def test_delta_bias_errors():
    x, w = torch.randn(8, 128, device="cuda"), torch.randn(128, device="cuda")
    with pytest.raises(ValueError, match="delta_bias is given without delta"):
        ln._checked(x, None, w, None, 1e-5, F32, 0.0, w)
    with pytest.raises(ValueError, match=r"delta_bias must have shape \(128,\)"):
        tk_kernels.add_layer_norm(x, x, w, delta_bias=torch.randn(64, device="cuda"))
    with pytest.raises(RuntimeError, match="delta_bias needs delta"):
        ln.add_layer_norm_op(x, None, w, None, 1e-5, F32, 0.0, w)


def test_delta_bias_backward_is_reproducible():
    seed = new_seed()
    _, x, d, w, b = make_case(5000, 768, F32, BF16, True, seed)
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, BF16, b)
    dy = torch.randn_like(y)
    outs = [torch.ops.tk.add_layer_norm_bwd(dy, x, s, mean, rstd, w, True, BF16, True) for _ in range(2)]
    for a, c in zip(*outs):
        assert torch.equal(a, c)


# -----------------------------------------------------------------------------
# the eager path (autograd in C++, csrc/bindings.cpp) against the custom ops with their registered
# autograd (what torch.compile traces): the same kernels on the same tensors, so bitwise equal

def run_path(path, inputs, requires, y_dt, gy, gs, use=("y", "s")):
    """(s, y, grads of the inputs) of one path: copies of the inputs (None stays None) requiring grad
    where `requires` says, the outputs in `use` backpropagated with gy / gs."""
    leaves = [None if t is None else t.detach().clone().requires_grad_(r) for t, r in zip(inputs, requires)]
    s, y = path(*leaves, 1e-5, y_dt)
    outs = [(o, g) for name, o, g in (("y", y, gy), ("s", s, gs)) if name in use and o.requires_grad]
    if outs:
        torch.autograd.backward([o for o, _ in outs], [g for _, g in outs])
    return s, y, [None if t is None else t.grad for t in leaves]


def assert_same(a, b, what=""):
    (s1, y1, g1), (s2, y2, g2) = a, b
    assert s1.dtype == s2.dtype and torch.equal(s1, s2), f"s differs {what}"
    assert y1.dtype == y2.dtype and torch.equal(y1, y2), f"y differs {what}"
    assert y1.requires_grad == y2.requires_grad and s1.requires_grad == s2.requires_grad, what
    for i, (p, q) in enumerate(zip(g1, g2)):
        assert (p is None) == (q is None), f"gradient {i}: {p is None} vs {q is None} {what}"
        if p is not None:
            assert p.dtype == q.dtype and torch.equal(p, q), f"gradient {i} differs {what}"


def eager_case(rows, C, x_dt, d_dt, y_dt, bias, seed, w_dt=F32):
    g, x, d, w, b = make_case(rows, C, x_dt, d_dt, bias, seed)
    gy, gs = randn((rows, C), g, y_dt), randn((rows, C), g, x_dt, 0.5)
    return (x, d, w.to(w_dt), None if b is None else b.to(w_dt)), gy, gs


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("x_dt,d_dt,y_dt", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("C", WIDTHS)
@pytest.mark.parametrize("rows", ROWS)
def test_eager_path_equals_custom_op_path(rows, C, x_dt, d_dt, y_dt, bias):
    seed = new_seed()
    inputs, gy, gs = eager_case(rows, C, x_dt, d_dt, y_dt, bias, seed)
    eager = run_path(ln.add_layer_norm_op, inputs, [True] * 4, y_dt, gy, gs)
    assert "AddLayerNorm" in eager[1].grad_fn.name(), eager[1].grad_fn.name()  # the C++ node
    assert_same(eager, run_path(ln._custom_op_path, inputs, [True] * 4, y_dt, gy, gs), f"(seed {seed})")


@pytest.mark.parametrize("delta", [True, False], ids=["delta", "noD"])
@pytest.mark.parametrize("requires", [(a, b, c, d) for a in (0, 1) for b in (0, 1) for c in (0, 1) for d in (0, 1)],
                         ids=lambda r: "rg" + "".join(map(str, r)))
def test_eager_path_requires_grad_combinations(requires, delta):
    """Every subset of (x, delta, weight, bias) requiring grad (none: no graph at all)."""
    seed = new_seed()
    inputs, gy, gs = eager_case(100, 768, F32, BF16 if delta else None, BF16, True, seed)
    requires = [bool(r) for r in requires]
    eager = run_path(ln.add_layer_norm_op, inputs, requires, BF16, gy, gs)
    assert_same(eager, run_path(ln._custom_op_path, inputs, requires, BF16, gy, gs), f"(seed {seed})")
    assert eager[1].requires_grad == any(r for r, t in zip(requires, inputs) if t is not None)


@pytest.mark.parametrize("w_dt", [BF16, F16, F32])
@pytest.mark.parametrize("x_dt,d_dt,y_dt", [(F32, BF16, BF16), (BF16, BF16, BF16), (F16, None, F16)],
                         ids=["autocast", "bf16", "plain-f16"])
def test_eager_path_weight_dtypes(w_dt, x_dt, d_dt, y_dt):
    """16-bit weight / bias are cast to fp32 before the kernels, the casts recorded by autograd: their
    gradients come back in their dtype, as on the custom-op path."""
    seed = new_seed()
    inputs, gy, gs = eager_case(300, 1024, x_dt, d_dt, y_dt, True, seed, w_dt)
    eager = run_path(ln.add_layer_norm_op, inputs, [True] * 4, y_dt, gy, gs)
    assert eager[2][2].dtype == w_dt and eager[2][3].dtype == w_dt
    assert_same(eager, run_path(ln._custom_op_path, inputs, [True] * 4, y_dt, gy, gs), f"(seed {seed})")


def test_eager_path_unused_outputs():
    """y unused: only the residual gradient flows and weight / bias get none (the custom-op path gives
    them zeros); s unused: the same gradients as the custom-op path, whose ds is zeros."""
    seed = new_seed()
    inputs, gy, gs = eager_case(64, 768, F32, BF16, BF16, True, seed)
    s, y, (gx, gd, gw, gb) = run_path(ln.add_layer_norm_op, inputs, [True] * 4, BF16, gy, gs, use=("s",))
    assert torch.equal(gx, gs) and gd.dtype == BF16 and torch.equal(gd, gs.to(BF16))
    assert gw is None and gb is None
    eager = run_path(ln.add_layer_norm_op, inputs, [True] * 4, BF16, gy, gs, use=("y",))
    assert_same(eager, run_path(ln._custom_op_path, inputs, [True] * 4, BF16, gy, gs, use=("y",)), f"(seed {seed})")
    # without delta s is x itself: the eager path returns the very tensor
    x = inputs[0].detach().clone().requires_grad_()
    s, _ = ln.add_layer_norm_op(x, None, inputs[2], None, 1e-5, BF16)
    assert s is x


def test_eager_path_non_contiguous():
    """Strided, unaligned and transposed x / delta, and non-contiguous incoming gradients (an expanded dy
    from .sum(), a transposed ds): copied as on the custom-op path, the same results bitwise."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    w, b = randn((256,), g, F32, 0.2, 1.0), randn((256,), g, F32, 0.1)
    xs = {"strided": randn((64, 2, 256), g, F32)[:, 1],
          "unaligned": randn((64 * 256 + 1,), g, F32)[1:].view(64, 256),
          "transposed": randn((256, 64), g, F32).t()}
    d = randn((256, 64), g, BF16).t()
    gy = randn((64, 256), g, BF16)
    gs = randn((256, 64), g, F32).t()
    for name, x in xs.items():
        assert not x.is_contiguous() or x.data_ptr() % 16
        for delta in (d, None):
            inputs = (x, delta, w, b)
            eager = run_path(ln.add_layer_norm_op, inputs, [True] * 4, BF16, gy, gs)
            assert_same(eager, run_path(ln._custom_op_path, inputs, [True] * 4, BF16, gy, gs), f"{name} (seed {seed})")
    # an expanded dy: y.float().sum().backward()
    grads = []
    for path in (ln.add_layer_norm_op, ln._custom_op_path):
        leaves = [t.detach().clone().requires_grad_() for t in (xs["strided"], d, w, b)]
        s, y = path(*leaves, 1e-5, BF16)
        (y.sum() + s.sum()).backward()
        grads.append([t.grad for t in leaves])
    for p, q in zip(*grads):
        assert torch.equal(p, q)


def test_eager_path_autocast():
    """Under autocast the public API's output dtype is the autocast dtype on both paths, and nothing in
    between is autocast (the same results bitwise, the backward run outside autocast as in training)."""
    seed = new_seed()
    inputs, gy, gs = eager_case(200, 768, F32, BF16, BF16, True, seed, BF16)
    outs = []
    for path in (ln.add_layer_norm_op, ln._custom_op_path):
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            s, y = path(*leaves, 1e-5, ln._out_dtype(leaves[0]))
        torch.autograd.backward([y, s], [gy, gs])
        outs.append((s, y, [t.grad for t in leaves]))
    assert outs[0][1].dtype == BF16
    assert_same(*outs, f"(seed {seed})")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        s, y = tk_kernels.add_layer_norm(*inputs)
    assert y.dtype == BF16 and torch.equal(y, outs[0][1])


def test_eager_path_errors():
    """The public API raises its ValueError before any kernel (tensor_reason, as before); the extension's
    own checks fire in the C++ path for callers that skip those checks."""
    x, w = torch.randn(8, 100, device="cuda"), torch.randn(100, device="cuda")
    with pytest.raises(ValueError, match="multiple of 8"):
        tk_kernels.layer_norm(x, w)
    with pytest.raises(RuntimeError, match="tk layer_norm: the width"):
        ln.add_layer_norm_op(x, None, w, None, 1e-5, F32)
    x = torch.randn(8, 128, device="cuda", dtype=torch.float64)
    with pytest.raises(RuntimeError, match="tk layer_norm: dtype must be"):
        ln.add_layer_norm_op(x, x, torch.randn(128, device="cuda"), None, 1e-5, BF16)


@pytest.mark.parametrize("delta", [True, False], ids=["delta", "noD"])
def test_eager_and_compiled_paths_agree(delta):
    """dispatch.add_layer_norm under a kernels=tk plan, eager (the C++ autograd) and torch.compile'd
    (fullgraph: the custom ops): the same outputs and gradients bitwise."""
    seed = new_seed()
    inputs, gy, gs = eager_case(333, 768, F32, BF16 if delta else None, BF16, True, seed)
    with dispatch.override("attention", tk=None), dispatch.override("classifier", tk=None), \
            dispatch.override("mlp", tk=None):
        plan = dispatch.plan("tk", "cuda", BF16, 64, n_embd=768)

    def f(x, d, w, b, eps, out_dtype):
        return dispatch.add_layer_norm(plan, x, d, w, b, eps)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    eager = run_path(f, inputs, [True] * 4, BF16, gy, gs)
    assert "AddLayerNorm" in eager[1].grad_fn.name()
    assert_same(eager, run_path(compiled, inputs, [True] * 4, BF16, gy, gs), f"(seed {seed})")


# -----------------------------------------------------------------------------
# the GPT model

CFG = dict(block_size=64, vocab_size=512, n_layer=2, n_head=2, n_embd=128, dropout=0.0, bias=True)


def test_compiled_gpt_train_step_has_no_graph_breaks():
    from model import GPT, GPTConfig
    torch.manual_seed(new_seed())
    model = GPT(GPTConfig(**CFG, kernels="tk")).cuda()
    plan = model.plan_kernels(dtype=torch.bfloat16)
    assert plan.path("layer_norm") == "tk" and plan.path("attention") == "tk"
    idx = torch.randint(0, CFG["vocab_size"], (4, 64), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explained = torch._dynamo.explain(model)(idx, idx)
    assert explained.graph_break_count == 0, str(explained)
    assert any("add_layer_norm_fwd" in gr.code for gr in explained.graphs), "tk op not in the graph"
    torch._dynamo.reset()
    compiled = torch.compile(copy.deepcopy(model), fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        _, loss_c = compiled(idx, idx)
        _, loss_e = model(idx, idx)
    loss_c.backward()
    loss_e.backward()
    assert abs(loss_c.item() - loss_e.item()) < 1e-2
    for (n, p), q in zip(model.named_parameters(), compiled.parameters()):
        assert q.grad is not None and torch.isfinite(q.grad).all(), n
        assert rel_err(q.grad, p.grad) < 5e-2, n


def _train_losses(kernels, steps=50, seed=1234, attention_torch=False):
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
    # a learnable stream: token t+1 = token t + 7 (mod V), with 20% random tokens
    losses = []
    for _ in range(steps):
        start = torch.randint(0, CFG["vocab_size"], (8, 1), generator=g, device="cuda")
        seq = (start + 7 * torch.arange(65, device="cuda")) % CFG["vocab_size"]
        noise = torch.randint(0, CFG["vocab_size"], seq.shape, generator=g, device="cuda")
        seq = torch.where(torch.rand(seq.shape, generator=g, device="cuda") < 0.2, noise, seq)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = model(seq[:, :-1], seq[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("attention_torch", [True, False], ids=["ln-only", "all-tk"])
def test_training_losses_match_torch(attention_torch):
    kernels = "auto" if attention_torch else "tk"
    ours, ref = _train_losses(kernels, attention_torch=attention_torch), _train_losses("torch")
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
    print(f"[train {kernels} attention_torch={attention_torch}] first {ours[0]:.4f}/{ref[0]:.4f} "
          f"last {ours[-1]:.4f}/{ref[-1]:.4f} worst rel diff {worst:.2e}")
    assert ours[-1] < ours[0] - 0.5, "the model did not learn"
    assert worst < 1e-3, f"losses differ from kernels=torch by up to {worst:.2e} relative"
