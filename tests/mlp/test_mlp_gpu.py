"""GPU tests of the MLP family (python -m pytest -m gpu tests/mlp; skipped without an sm_90 GPU).

Accuracy: every GEMM layout and epilogue, the MLP's output and every gradient (dx, dW_fc, db_fc,
dW_proj, db_proj) against float64 references computed from the same 16-bit inputs, as relative L2
errors. PyTorch's own 16-bit path (F.linear / F.gelu in the input dtype, cuBLAS) against the same
reference sets the scale: ours <= max(2 x PyTorch's error, a dtype floor). Fresh random inputs from an
os.urandom seed (printed with -s). Outputs are poisoned before each launch: the allocator's free
memory is filled with NaN, so an element the kernels fail to write fails the test.
"""

import os

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.gpu

if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("the tk mlp kernels need a Hopper GPU (compute capability 9.0)", allow_module_level=True)

import tk_kernels  # noqa: E402
from tk_kernels.families.mlp import ops  # noqa: E402
from gpu_test_utils import capture, new_seed, poison_free_memory  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
FLOOR = {torch.bfloat16: 6e-3, torch.float16: 1e-3}


@pytest.fixture(scope="module", autouse=True)
def _built():
    reason = ops.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    assert reason is None, reason


def poison():
    """Fill the allocator's free blocks with NaN (0xFF bytes) so that unwritten outputs show up."""
    poison_free_memory(6, 512 << 20)


def rel(x, ref):
    x, ref = x.double(), ref.double()
    assert torch.isfinite(x).all(), "non-finite values (an unwritten output?)"
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(name, ours, torch_16, ref, dtype):
    e, e_torch = rel(ours, ref), rel(torch_16, ref)
    tol = max(2 * e_torch, FLOOR[dtype])
    print(f"  {name}: ours {e:.2e}  torch {e_torch:.2e}  tol {tol:.2e}")
    assert e <= tol, f"{name}: relative error {e:.3e} > {tol:.3e} (torch's own: {e_torch:.3e})"


def randn(shape, g, dtype, scale=1.0):
    return (torch.randn(shape, generator=g, device="cuda") * scale).to(dtype)


# -----------------------------------------------------------------------------
# the GEMM alone: every layout x epilogue the family uses, ragged M, N and K

@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("M,N,K", [(1, 64, 64), (7, 256, 128), (1000, 768, 3072), (300, 1600, 200),
                                   (129, 2056, 264), (4096, 3072, 768)])
def test_gemm_layouts(M, N, K, dtype):
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    print(f"\n[gemm M={M} N={N} K={K} {dtype} seed={seed}]")
    x = randn((M, K), g, dtype)
    w = randn((N, K), g, dtype, K ** -0.5)
    bias = torch.randn(N, generator=g, device="cuda")
    ext = ops._ext()
    ref = x.double() @ w.double().T + bias.double()
    # forward: x W^T + b (both K-major)
    poison()
    y = torch.empty((M, N), device="cuda", dtype=dtype)
    ext.gemm_(x, False, w, False, y, ops.STORE, bias)
    check("x W^T + b", y, (F.linear(x, w, bias.to(dtype))), ref, dtype)
    # a bias in the operands' dtype is read as it is, widened exactly: bitwise the result of its fp32 cast
    b16 = bias.to(dtype)
    poison()
    y16, y32 = torch.empty_like(y), torch.empty_like(y)
    ext.gemm_(x, False, w, False, y16, ops.STORE, b16)
    ext.gemm_(x, False, w, False, y32, ops.STORE, b16.float())
    assert torch.equal(y16, y32), "16-bit bias: store differs from its fp32 cast's"
    # forward with GELU: gelu(pre) and gelu'(pre)
    def gelu_grad(pre, approx):
        p = pre.detach().requires_grad_()
        return torch.autograd.grad(F.gelu(p, approximate=approx).sum(), p)[0]

    for approx in ("none", "tanh"):
        poison()
        d, act = torch.empty((M, N), device="cuda", dtype=dtype), torch.empty((M, N), device="cuda", dtype=dtype)
        ext.gemm_(x, False, w, False, act, ops.GELU, bias, d, approx == "tanh")
        pre16 = F.linear(x, w, bias.to(dtype))
        check(f"gelu[{approx}]", act, F.gelu(pre16, approximate=approx), F.gelu(ref, approximate=approx), dtype)
        check(f"gelu'[{approx}]", d, gelu_grad(pre16.float(), approx).to(dtype), gelu_grad(ref, approx), dtype)
        poison()
        d16, act16 = torch.empty_like(d), torch.empty_like(act)
        d32, act32 = torch.empty_like(d), torch.empty_like(act)
        ext.gemm_(x, False, w, False, act16, ops.GELU, b16, d16, approx == "tanh")
        ext.gemm_(x, False, w, False, act32, ops.GELU, b16.float(), d32, approx == "tanh")
        assert torch.equal(act16, act32) and torch.equal(d16, d32), f"16-bit bias: gelu[{approx}] differs"
    # backward data: dy W (B MN-major) and the GELU' epilogue
    dy = randn((M, N), g, dtype)
    poison()
    dx = torch.empty((M, K), device="cuda", dtype=dtype)
    ext.gemm_(dy, False, w, True, dx, ops.STORE)
    check("dy W", dx, dy @ w, dy.double() @ w.double(), dtype)
    # ... summing dy's columns per 64-row block as it reads dy (a_colsum: the linear op's bias gradient): the same
    # dx bitwise (an instantiation of its own), every block sum written, each within fp32 rounding of float64's
    dy_blocks = F.pad(dy.double(), (0, 0, 0, (-M) % 64)).view(-1, 64, N).sum(1)
    dy_scale = dy.double().abs().sum(0).max().item() + 1e-30

    def check_a_sums(name, a_sums):
        assert torch.isfinite(a_sums).all(), f"{name}: unwritten column sums of dy"
        err = (a_sums.double() - dy_blocks).abs().max().item() / dy_scale
        print(f"  {name} a_colsum: max error {err:.2e} of the largest column's |dy| sum")
        assert err < 1e-5, err

    poison()
    dx2, a_sums = torch.empty_like(dx), torch.empty(((M + 63) // 64, N), device="cuda")
    ext.gemm_(dy, False, w, True, dx2, ops.STORE, a_colsum=a_sums)
    assert torch.equal(dx2, dx), "dy W with dy's column sums differs from dy W"
    check_a_sums("dy W", a_sums)
    # the GELU' epilogue multiplies by the forward's gelu'(pre), rounded: the reference takes that rounded factor,
    # PyTorch's own backward (one rounding fewer) sets the tolerance
    pre16 = randn((M, K), g, dtype)
    for approx in ("none", "tanh"):
        d16 = gelu_grad(pre16.float(), approx).to(dtype)
        first = None
        # the column sums per 64-row block of dh (the MLP's db_fc) and of dy (its db_proj) are optional
        for with_sums, with_a_sums in ((False, False), (True, False), (False, True), (True, True)):
            poison()
            dh = torch.empty((M, K), device="cuda", dtype=dtype)
            sums = torch.empty(((M + 63) // 64, K), device="cuda") if with_sums else None
            a_sums = torch.empty(((M + 63) // 64, N), device="cuda") if with_a_sums else None
            ext.gemm_(dy, False, w, True, dh, ops.DGELU, None, d16, False, 0, sums, a_sums)
            if first is None:
                first = dh
                p16 = pre16.detach().requires_grad_()
                torch_dh, = torch.autograd.grad(F.gelu(p16, approximate=approx), p16, (dy @ w))
                check(f"dy W * gelu'[{approx}]", dh, torch_dh, (dy.double() @ w.double()) * d16.double(), dtype)
            else:  # the sums change nothing else
                assert torch.equal(dh, first), f"dy W * gelu'[{approx}] differs with sums {with_sums, with_a_sums}"
            if with_a_sums:
                check_a_sums(f"dy W * gelu'[{approx}]", a_sums)
            if with_sums:  # the sums of our own rounded dh, up to fp32 summation order
                assert torch.isfinite(sums).all(), "unwritten column sums"
                blocks = F.pad(dh.float(), (0, 0, 0, (-M) % 64)).view(-1, 64, K).sum(1)
                scale = dh.float().abs().view(-1, K).sum(0).max().item() + 1e-30
                err = (sums - blocks).abs().max().item() / scale
                print(f"  column sums[{approx}]: max error {err:.2e} of the largest column's |dh| sum")
                assert err < 1e-5, err
    # weight gradient: dy^T x (both MN-major), fp32 out, K = M split to fill the GPU
    for splits in (1, 0, 3):
        poison()
        dw = torch.zeros((N, K), device="cuda", dtype=torch.float32)
        ext.gemm_(dy, True, x, True, dw, ops.STORE_F32, splits=splits)
        check(f"dy^T x (splits={splits})", dw, (dy.T @ x), dy.double().T @ x.double(), dtype)


BAD_SHAPES = r"""
import pytest, torch
from tk_kernels.families.mlp import ops
ext = ops._ext()
y = torch.empty(16, 64, device="cuda", dtype=torch.bfloat16)
x = torch.randn(16, 60, device="cuda", dtype=torch.bfloat16)  # K = 60: rows of 120 bytes
w = torch.randn(64, 60, device="cuda", dtype=torch.bfloat16)
print("case 1: row stride", flush=True)
with pytest.raises(RuntimeError, match="multiple of 16 bytes"):
    ext.gemm_(x, False, w, False, y, ops.STORE)
a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
b = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
print("case 2: c's shape", flush=True)
with pytest.raises(RuntimeError, match=r"c must be \(16, 32\), got \(16, 64\)"):
    ext.gemm_(a, False, b, False, y, ops.STORE)
print("case 3: column sums' shape", flush=True)
dh, d = torch.empty(16, 256, device="cuda", dtype=torch.bfloat16), torch.zeros(16, 256, device="cuda", dtype=torch.bfloat16)
wp = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
with pytest.raises(RuntimeError, match="colsum must be"):
    ext.gemm_(a, False, wp, True, dh, ops.DGELU, None, d, False, 0, torch.empty(2, 256, device="cuda"))
print("case 3b: a's column sums: shape, epilogue", flush=True)
with pytest.raises(RuntimeError, match=r"a_colsum must be a contiguous, 8-byte aligned float32 \(1, 64\)"):
    ext.gemm_(a, False, wp, True, dh, ops.DGELU, None, d, False, 0, None, torch.empty(2, 64, device="cuda"))
with pytest.raises(RuntimeError, match="only the store and dgelu epilogues with a K-major a and an MN-major b"):
    ext.gemm_(a, False, b, False, y[:, :32], ops.STORE, a_colsum=torch.empty(1, 64, device="cuda"))
print("case 4: bias dtype and alignment", flush=True)
y32 = torch.empty(16, 32, device="cuda", dtype=torch.bfloat16)
with pytest.raises(RuntimeError, match="bias must be a contiguous float32 or BFloat16"):
    ext.gemm_(a, False, b, False, y32, ops.STORE, torch.zeros(32, device="cuda", dtype=torch.float16))
with pytest.raises(RuntimeError, match="aligned to two elements"):
    ext.gemm_(a, False, b, False, y32, ops.STORE, torch.zeros(33, device="cuda")[1:])
print("ok")
"""


def test_gemm_rejects_bad_shapes():
    """Bad shapes are one clear RuntimeError each. Run in a child process: on two H200 runs the second
    case crashed the interpreter (SIGSEGV, not reproduced on torch 2.14 with fake CUDA tensors, where both
    messages come out); its message was the only one that streamed a c10::IntArrayRef (c.sizes()), which
    the binding no longer does. A crash must fail this test (the child prints which case it reached),
    not end the whole GPU suite."""
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", BAD_SHAPES], cwd=repo, capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, PYTHONPATH=repo))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout[-2000:], r.stderr[-4000:])


# -----------------------------------------------------------------------------
# the column sums (csrc/colsum.cu): the bias gradients

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("rows,cols,ld", [(0, 64, 64), (1, 8, 8), (7, 72, 72), (9, 264, 272), (1000, 768, 768),
                                          (256, 3072, 3072), (16384, 768, 768), (4099, 1600, 1608), (333, 2056, 2056),
                                          (512, 1024, 1032), (513, 1024, 1032)])
def test_column_sums(rows, cols, ld, dtype):
    """ext.column_sums against a float64 sum of the same values: ragged row counts (chunks of unequal length,
    fewer rows than warps), widths that leave a partial 256-column tile, row strides wider than the row
    (a column slice), fp32 matrices on both sides of the 512 rows up to which the finish kernel sums them alone
    (the GEMMs' block sums); bitwise the same on a second call (a fixed summation order)."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    base = (torch.randn((rows, ld), generator=g, device="cuda") + 0.5).to(dtype)  # a mean: cancellation-free scale
    x = base[:, :cols]
    poison()
    out = ops._ext().column_sums(x)
    assert out.dtype == torch.float32 and out.shape == (cols,)
    ref = x.double().sum(0)
    assert torch.isfinite(out).all()
    if rows == 0:
        assert (out == 0).all()
        return
    err = ((out.double() - ref).norm() / ref.norm()).item()
    print(f"  seed {seed}: relative error {err:.2e}")
    assert err < 1e-6, err
    assert torch.equal(out, ops._ext().column_sums(x)), "two calls differ"
    for out_dtype in (torch.float32, torch.bfloat16, torch.float16):  # a bias's own dtype: rounded once, as a cast
        poison()
        cast = ops._ext().column_sums(x, out_dtype)
        assert cast.dtype == out_dtype and cast.shape == (cols,)
        assert torch.equal(cast, out.to(out_dtype)), out_dtype


@pytest.mark.parametrize("rows,cols_a,cols_b,ld_b", [(1, 8, 8, 8), (7, 72, 24, 32), (256, 3072, 768, 768),
                                                    (512, 4096, 1024, 1032), (33, 264, 2056, 2056)])
def test_column_sums_pair(rows, cols_a, cols_b, ld_b):
    """ext.column_sums_pair (the MLP backward's db_fc and db_proj in one launch) is bitwise two column_sums calls, in
    every output dtype: widths that leave partial 32-column CTAs on both sides of the split, a row stride wider than
    the row."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((rows, cols_a), generator=g, device="cuda") + 0.5
    b = (torch.randn((rows, ld_b), generator=g, device="cuda") + 0.5)[:, :cols_b]
    ext = ops._ext()
    ref = a.double().sum(0)
    for out_dtype in (torch.float32, torch.bfloat16, torch.float16):
        poison()
        sa, sb = ext.column_sums_pair(a, b, out_dtype)
        assert sa.dtype == sb.dtype == out_dtype and sa.shape == (cols_a,) and sb.shape == (cols_b,)
        assert torch.equal(sa, ext.column_sums(a, out_dtype)), out_dtype
        assert torch.equal(sb, ext.column_sums(b, out_dtype)), out_dtype
    err = ((ext.column_sums_pair(a, b, torch.float32)[0].double() - ref).norm() / ref.norm()).item()
    assert err < 1e-6, err
    with pytest.raises(RuntimeError, match="same rows, at most 512"):
        ext.column_sums_pair(a, b[:-1] if rows > 1 else torch.zeros(2, 8, device="cuda"), torch.float32)
    with pytest.raises(RuntimeError, match="must be float32"):
        ext.column_sums_pair(a, b.to(torch.bfloat16), torch.float32)


def test_column_sums_rejects_bad_inputs():
    ext = ops._ext()
    with pytest.raises(RuntimeError, match="multiple of 8"):
        ext.column_sums(torch.zeros(4, 12, device="cuda"))
    with pytest.raises(RuntimeError, match="float32, bfloat16 or float16"):
        ext.column_sums(torch.zeros(4, 8, device="cuda", dtype=torch.float64))
    with pytest.raises(RuntimeError, match="contiguous rows"):
        ext.column_sums(torch.zeros(8, 16, device="cuda").t())
    with pytest.raises(RuntimeError, match="out_dtype must be float32, bfloat16 or float16"):
        ext.column_sums(torch.zeros(4, 8, device="cuda"), torch.float64)


# -----------------------------------------------------------------------------
# the MLP op: output and every gradient

def reference_mlp(x, w_fc, b_fc, w_proj, b_proj, approximate):
    return F.linear(F.gelu(F.linear(x, w_fc, b_fc), approximate=approximate), w_proj, b_proj)


@pytest.mark.parametrize("params16", [False, True], ids=["fp32params", "16bitparams"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("N,C", [(1, 768), (7, 1024), (1000, 1600), (16384, 768), (333, 2048), (64, 64)])
def test_mlp_forward_backward(N, C, dtype, bias, approximate, params16):
    if approximate == "tanh" and (N, C) not in ((7, 1024), (1000, 1600)):
        pytest.skip("the tanh form is checked at two shapes")
    if params16 and (approximate == "tanh" or (N, C) not in ((7, 1024), (1000, 1600))):
        pytest.skip("parameters in the activations' dtype (nothing to cast) are checked at two shapes")
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    print(f"\n[mlp N={N} C={C} {dtype} bias={bias} {approximate} seed={seed}]")
    H = 4 * C
    x = randn((N, C), g, dtype)
    params = [torch.randn((H, C), generator=g, device="cuda") * C ** -0.5,
              torch.randn(H, generator=g, device="cuda") * 0.1 if bias else None,
              torch.randn((C, H), generator=g, device="cuda") * H ** -0.5,
              torch.randn(C, generator=g, device="cuda") * 0.1 if bias else None]
    dy = randn((N, C), g, dtype)
    # ours: fp32 parameters as in autocast training (or params16: in the activations' dtype), 16-bit activations
    pdt = dtype if params16 else torch.float32
    ps = [p.clone().to(pdt).requires_grad_() if p is not None else None for p in params]
    xs = x.clone().requires_grad_()
    poison()
    y = tk_kernels.mlp(xs, *ps, approximate=approximate)
    assert y.dtype == dtype and y.shape == (N, C)
    poison()
    y.backward(dy)
    # float64 reference on the 16-bit inputs (weights rounded to the dtype, as the op casts them)
    p64 = [p.to(dtype).double().requires_grad_() if p is not None else None for p in params]
    x64 = x.double().requires_grad_()
    y64 = reference_mlp(x64, *p64, approximate)
    y64.backward(dy.double())
    # PyTorch's 16-bit path
    p16 = [p.to(dtype).requires_grad_() if p is not None else None for p in params]
    x16 = x.clone().requires_grad_()
    y16 = reference_mlp(x16, *p16, approximate)
    y16.backward(dy)
    check("y", y, y16, y64, dtype)
    check("dx", xs.grad, x16.grad, x64.grad, dtype)
    for name, a, b, c in zip(("dw_fc", "db_fc", "dw_proj", "db_proj"), ps, p16, p64):
        if a is None:
            continue
        assert a.grad.dtype == pdt  # in the parameters' dtype, no bf16 round trip for fp32 ones
        check(name, a.grad, b.grad, c.grad, dtype)


@pytest.mark.parametrize("path", ["eager", "custom_op"])
@pytest.mark.parametrize("params16", [False, True], ids=["fp32params", "16bitparams"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("N,K,M", [(1000, 768, 2304), (16384, 768, 768), (1, 1024, 3072), (7, 384, 1152),
                                   (333, 1600, 4800), (4099, 64, 200)])
def test_linear_forward_backward(N, K, M, dtype, bias, params16, path):
    """tk_kernels.linear (the model's attention projections under kernels=tk) against float64 and PyTorch's 16-bit
    F.linear, forward and every gradient: GPT-2's c_attn / c_proj shapes, ragged rows and widths that are no multiple
    of the tiles, fp32 parameters (cast by the op, gradients in fp32) or 16-bit ones, in eager mode (_EagerLinear)
    and through the custom ops torch.compile traces."""
    if (params16 or path == "custom_op") and (N, K, M) not in ((1000, 768, 2304), (7, 384, 1152)):
        pytest.skip("16-bit parameters and the custom-op path are checked at two shapes")
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    print(f"\n[linear N={N} K={K} M={M} {dtype} bias={bias} params16={params16} {path} seed={seed}]")
    x = randn((N, K), g, dtype)
    w = torch.randn((M, K), generator=g, device="cuda") * K ** -0.5
    b = torch.randn(M, generator=g, device="cuda") * 0.1 if bias else None
    dy = randn((N, M), g, dtype)
    pdt = dtype if params16 else torch.float32
    xs = x.clone().requires_grad_()
    ws = w.to(pdt).clone().requires_grad_()  # (a copy: w.to(float32) would be w itself)
    bs = b.to(pdt).clone().requires_grad_() if bias else None
    poison()
    if path == "eager":
        y = tk_kernels.linear(xs, ws, bs)
    else:
        y, _ = torch.ops.tk.linear_fwd(xs, ws, bs)
    assert y.dtype == dtype and y.shape == (N, M)
    poison()
    y.backward(dy)
    x64, w64 = x.double().requires_grad_(), w.to(dtype).double().requires_grad_()
    b64 = b.to(dtype).double().requires_grad_() if bias else None
    y64 = F.linear(x64, w64, b64)
    y64.backward(dy.double())
    x16, w16 = x.clone().requires_grad_(), w.to(dtype).requires_grad_()
    b16 = b.to(dtype).requires_grad_() if bias else None
    y16 = F.linear(x16, w16, b16)
    y16.backward(dy)
    check("y", y, y16, y64, dtype)
    check("dx", xs.grad, x16.grad, x64.grad, dtype)
    assert ws.grad.dtype == pdt
    check("dw", ws.grad, w16.grad, w64.grad, dtype)
    if bias:
        assert bs.grad.dtype == pdt
        check("db", bs.grad, b16.grad, b64.grad, dtype)


def test_opcheck():
    g = torch.Generator(device="cuda").manual_seed(new_seed())
    x = randn((40, 64), g, torch.bfloat16).requires_grad_()
    args = (x, torch.randn(256, 64, device="cuda", requires_grad=True), torch.randn(256, device="cuda", requires_grad=True),
            torch.randn(64, 256, device="cuda", requires_grad=True), torch.randn(64, device="cuda", requires_grad=True),
            "none")
    torch.library.opcheck(torch.ops.tk.mlp_fwd, args)
    # bf16 weights: no casts to save (the op's extra outputs are empty)
    args16 = tuple(a.detach().bfloat16().requires_grad_() if isinstance(a, torch.Tensor) and a is not x else a
                   for a in args)
    torch.library.opcheck(torch.ops.tk.mlp_fwd, args16)
    torch.library.opcheck(torch.ops.tk.linear_fwd, (x, torch.randn(128, 64, device="cuda", requires_grad=True), None))
    torch.library.opcheck(torch.ops.tk.linear_fwd, (x, torch.randn(128, 64, device="cuda", requires_grad=True),
                                                    torch.randn(128, device="cuda", requires_grad=True)))
    w16 = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)  # nothing to cast: empty w16
    torch.library.opcheck(torch.ops.tk.linear_fwd, (x, w16, None))
    # fp32 weights with their 16-bit copies (GPT.keep_weight16): nothing cast, gradients to the fp32 weights
    w32 = torch.randn(128, 64, device="cuda", requires_grad=True)
    torch.library.opcheck(torch.ops.tk.linear_fwd, (x, w32, None, w32.detach().bfloat16()))
    torch.library.opcheck(torch.ops.tk.mlp_fwd, args + (args[1].detach().bfloat16(), args[3].detach().bfloat16()))


@pytest.mark.parametrize("path", ["eager", "custom_op"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_weight_copies_give_what_the_casts_give(dtype, path):
    """The ops with 16-bit copies of fp32 weights (copy_fc / copy_proj / copy: GPT.keep_weight16's, which
    tk_kernels.AdamW writes) read the copies instead of casting: output and every gradient bitwise those of the
    op that casts (the copies are those casts), the weights' gradients still fp32 and on the weights, none on
    the copies; a copy of the wrong dtype or shape is a clear error."""
    seed = new_seed()
    g = torch.Generator(device="cuda").manual_seed(seed)
    print(f"\n[copies {dtype} {path} seed={seed}]")
    N, C = 333, 768
    x = randn((N, C), g, dtype)
    w_fc = torch.randn((4 * C, C), generator=g, device="cuda") * C ** -0.5
    w_proj = torch.randn((C, 4 * C), generator=g, device="cuda") * (4 * C) ** -0.5
    b_fc, b_proj = (torch.randn(n, generator=g, device="cuda") * 0.1 for n in (4 * C, C))
    dy = randn((N, C), g, dtype)
    w_lin = torch.randn((3 * C, C), generator=g, device="cuda") * C ** -0.5  # c_attn's shape
    b_lin = torch.randn(3 * C, generator=g, device="cuda") * 0.1
    dz = randn((N, 3 * C), g, dtype)

    def run(with_copies):
        leaves = [t.clone().requires_grad_() for t in (x, w_fc, b_fc, w_proj, b_proj, w_lin, b_lin)]
        xs, wf, bf, wp, bp, wl, bl = leaves
        cf, cp, cl = (w.to(dtype) if with_copies else None for w in (w_fc, w_proj, w_lin))
        poison()
        if path == "eager":
            y = tk_kernels.mlp(xs, wf, bf, wp, bp, copy_fc=cf, copy_proj=cp)
            z = tk_kernels.linear(xs, wl, bl, copy=cl)
        else:
            y = torch.ops.tk.mlp_fwd(xs, wf, bf, wp, bp, "none", cf, cp)[0]
            z = torch.ops.tk.linear_fwd(xs, wl, bl, cl)[0]
        poison()
        torch.autograd.backward([y, z], [dy, dz])
        return [y.detach(), z.detach()] + [t.grad for t in leaves]

    with_cast, with_copies = run(False), run(True)
    names = ["y", "z", "dx", "dw_fc", "db_fc", "dw_proj", "db_proj", "dw_lin", "db_lin"]
    for name, a, b in zip(names, with_cast, with_copies):
        assert b.dtype == a.dtype and torch.equal(a, b), name
    assert with_copies[3].dtype == with_copies[5].dtype == with_copies[7].dtype == torch.float32
    bad = torch.zeros(4 * C, C, device="cuda", dtype=torch.float16 if dtype == torch.bfloat16 else torch.bfloat16)
    with pytest.raises(ValueError, match="16-bit copy"):
        tk_kernels.mlp(x, w_fc, b_fc, w_proj, b_proj, copy_fc=bad)
    with pytest.raises(ValueError, match="16-bit copy"):
        tk_kernels.linear(x, w_fc, None, copy=w_fc.to(dtype)[:8])


def test_unsupported_inputs_give_clear_errors():
    x = torch.randn(4, 60, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiples of 8"):
        tk_kernels.mlp(x, torch.randn(240, 60, device="cuda"), None, torch.randn(60, 240, device="cuda"), None)
    with pytest.raises(ValueError, match="bfloat16 and float16"):
        tk_kernels.mlp(x.float(), torch.randn(240, 60, device="cuda"), None, torch.randn(60, 240, device="cuda"), None)
    with pytest.raises(ValueError, match="approximate"):
        tk_kernels.mlp(x, torch.randn(240, 60, device="cuda"), None, torch.randn(60, 240, device="cuda"), None, "fast")


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_cuda_graph_capture_replays_with_new_inputs(bias):
    """The MLP and the linear op (the attention's projections), forward and backward, captured in one CUDA graph and
    replayed with new inputs: bitwise the eager results; with biases their column sums (csrc/colsum.cu) run in the
    graph too."""
    g = torch.Generator(device="cuda").manual_seed(new_seed())
    C = 256
    x = randn((512, C), g, torch.bfloat16).requires_grad_()
    w_fc = (torch.randn(4 * C, C, generator=g, device="cuda") * C ** -0.5).requires_grad_()
    w_proj = (torch.randn(C, 4 * C, generator=g, device="cuda") * (4 * C) ** -0.5).requires_grad_()
    b_fc = (torch.randn(4 * C, generator=g, device="cuda") * 0.1).requires_grad_() if bias else None
    b_proj = (torch.randn(C, generator=g, device="cuda") * 0.1).requires_grad_() if bias else None
    w_lin = (torch.randn(3 * C, C, generator=g, device="cuda") * C ** -0.5).requires_grad_()
    b_lin = (torch.randn(3 * C, generator=g, device="cuda") * 0.1).requires_grad_() if bias else None
    dy = randn((512, C), g, torch.bfloat16)
    dq = randn((512, 3 * C), g, torch.bfloat16)
    params = [p for p in (x, w_fc, b_fc, w_proj, b_proj, w_lin, b_lin) if p is not None]

    def step():
        y = tk_kernels.mlp(x, w_fc, b_fc, w_proj, b_proj)
        q = tk_kernels.linear(x, w_lin, b_lin)
        return (y, q) + torch.autograd.grad((y, q), params, (dy, dq))

    graph, outs = capture(step)
    for _ in range(2):
        with torch.no_grad():
            x.copy_(randn((512, C), g, torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        expect = step()
        for a, b in zip(outs, expect):
            torch.testing.assert_close(a, b, rtol=0, atol=0)  # the same kernels on the same inputs


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_gpt_step_matches_the_family_off(compiled):
    """A kernels=tk GPT step with the MLP family on (its MLP op and, for the attention's projections, its linear op:
    the eager run counts the projections' calls) against the same model with the family off: the loss and every
    gradient. Compiled with fullgraph=True: no graph breaks."""
    from model import GPT, GPTConfig
    from tk_kernels import dispatch
    torch.manual_seed(0)
    cfg = GPTConfig(block_size=64, vocab_size=128, n_layer=2, n_head=2, n_embd=128, dropout=0.0, bias=True,
                    kernels="tk")
    calls = []

    def counted(x, w, b):
        calls.append(tuple(w.shape))
        return ops.linear_op(x, w, b)
    with dispatch.override("mlp", not_used=None, tk_linear=ops.linear_op if compiled else counted):
        m = GPT(cfg).cuda()
        plan = m.plan_kernels(torch.device("cuda"), torch.bfloat16)
        assert plan.path("mlp", training=True) == "tk", plan.describe()
        idx = torch.randint(0, 128, (4, 64), device="cuda")
        torch._dynamo.reset()
        run = torch.compile(m, fullgraph=True) if compiled else m
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = run(idx, idx)
        loss.backward()
        if not compiled:
            assert calls == [(384, 128), (128, 128)] * 2, calls  # c_attn and c_proj of both layers
        grads = {n: p.grad.clone() for n, p in m.named_parameters()}
        m.zero_grad(set_to_none=True)
        ref = GPT(cfg).cuda()
        ref.load_state_dict(m.state_dict())
        with dispatch.override("mlp", tk=None):
            assert ref.plan_kernels(torch.device("cuda"), torch.bfloat16).path("mlp") == "torch"
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, ref_loss = ref(idx, idx)
        ref_loss.backward()
    print(f"[gpt step, {'compiled' if compiled else 'eager'}] loss tk {loss.item():.5f} torch {ref_loss.item():.5f}")
    assert abs(loss.item() - ref_loss.item()) < 2e-2 * abs(ref_loss.item())
    for n, p in ref.named_parameters():
        err = rel(grads[n], p.grad)
        assert err < 5e-2, (n, err)


def test_mlp_on_a_fresh_thread():
    """The MLP forward as the first CUDA work of a new thread (its backward then runs on the autograd
    worker thread), bf16 weights (so no cast kernel runs first): its TMA tensor maps need the thread's CUDA context bound (tk::host::bind_context;
    before it, check_mlp_dw.py's backward failed on the autograd worker thread with CUresult 201)."""
    import threading
    g = torch.Generator(device="cuda").manual_seed(new_seed())
    N, C = 1000, 200
    bf16 = torch.bfloat16
    x, dy = randn((N, C), g, bf16), randn((N, C), g, bf16)
    ws = [randn((4 * C, C), g, bf16, C ** -0.5), randn((4 * C,), g, bf16),
          randn((C, 4 * C), g, bf16, (4 * C) ** -0.5), randn((C,), g, bf16)]
    out = {}
    xr = x.clone().requires_grad_()  # made here: a copy kernel on the new thread would bind its context
    wr = [w.clone().requires_grad_() for w in ws]

    def work():
        try:
            y = tk_kernels.mlp(xr, *wr)
            y.backward(dy)
            torch.cuda.synchronize()
            out["grads"] = [y.detach(), xr.grad] + [w.grad for w in wr]
        except Exception as e:  # reported below, on the test's thread
            out["error"] = e

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert "error" not in out, f"{type(out['error']).__name__}: {out['error']}"
    xm = x.clone().requires_grad_()
    wm = [w.clone().requires_grad_() for w in ws]
    y = tk_kernels.mlp(xm, *wm)
    y.backward(dy)
    for a, b in zip(out["grads"], [y.detach(), xm.grad] + [w.grad for w in wm]):
        assert rel(a, b) < 1e-2
