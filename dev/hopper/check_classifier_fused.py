"""Build dev/hopper/classifier_fused.cu, check it against float64 and against the family's op, and time it beside
the family's chunk loop and torch.compile:

    python dev/hopper/check_classifier_fused.py            # on an sm_90 GPU
    python dev/hopper/check_classifier_fused.py --build    # build only (any machine with nvcc): then read its SASS

The fused forward returns what tk::linear_cross_entropy_fwd returns (the loss, the unscaled dx and the chunk-averaged
dw, the (2,) scales), so both are compared on the same terms: relative L2 errors of loss, dx = G W and dw = G^T x /
n_chunks against float64 references built from the bf16 / fp16-rounded logits (the precision the reference op has),
and the ratio of the fused error to the family op's error. Timing: fwd (which computes the gradients) of the fused
chunk loop, the family's op and a compiled F.cross_entropy(F.linear(...)) fwd + bwd, at N = 16384, V = 50304,
C = 768 and 1024, and per launch of one 2048-row chunk (stages 1, 2, 3, 5 of ext.chunk, differences).
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

BLOCK = 128  # the statistics' column block (the logits GEMM's tile width)


def build():
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
    t0 = time.time()
    ext = cpp_extension.load(
        name="tk_dev_classifier_fused", sources=[os.path.join(ROOT, "dev", "hopper", "classifier_fused.cu")],
        extra_include_paths=[os.path.join(ROOT, "tk_kernels", "include")],
        extra_cuda_cflags=["-std=c++20", "-O3", "-Xptxas", "-v"], verbose=False)
    print(f"built in {time.time() - t0:.0f}s")
    return ext


def chunk_rows(n_rows, vocab):
    from tk_kernels.families.classifier.ops import chunk_rows as family_chunk_rows
    return family_chunk_rows(n_rows, vocab)


class Scratch:
    """The per-forward buffers of the fused loop, for chunks of up to `rows` rows."""

    def __init__(self, rows, V, C, dtype, device):
        lde = (V + 7) // 8 * 8
        tiles = (V + BLOCK - 1) // BLOCK
        lds = (rows + 63) // 64 * 64
        f32 = dict(device=device, dtype=torch.float32)
        self.E = torch.empty(rows, lde, device=device, dtype=dtype)
        self.stats = torch.empty(tiles, lds, 2, **f32)
        self.s = torch.zeros(tiles, lds, **f32)
        self.target_logit = torch.empty(rows, **f32)
        self.c = torch.empty(rows, **f32)
        self.ws = torch.empty(rows, C, **f32)


def fused_forward(ext, x, w, targets, ignore_index=-1, rows=None, stage=5, options=0):
    """(loss, dx, dw, scales) like torch.ops.tk.linear_cross_entropy_fwd, on the fused chunk kernels."""
    N, C = x.shape
    V = w.shape[0]
    rows = rows or chunk_rows(N, V)
    n_chunks = max(1, (N + rows - 1) // rows)
    sc = Scratch(rows, V, C, x.dtype, x.device)
    dx = torch.empty_like(x)
    dw = torch.empty_like(w)
    row_loss = torch.empty(N, device=x.device, dtype=torch.float32)
    count = (targets != ignore_index).sum(dtype=torch.float32)
    for i, (xc, tc, lc, dxc) in enumerate(zip(x.split(rows), targets.split(rows), row_loss.split(rows), dx.split(rows))):
        r = xc.shape[0]
        ext.chunk(xc, w, tc, ignore_index, sc.E, sc.stats, sc.target_logit, sc.s, sc.c, sc.ws[:r], lc, dxc, dw,
                  1.0 / n_chunks, i > 0, stage, options)
    scales = torch.stack([1.0 / count, n_chunks / count])
    return row_loss.sum() / count, dx, dw, scales, n_chunks


def reference(x, w, targets, ignore_index, n_chunks):
    """float64: loss, dx = G W, dw = G^T x / n_chunks with G = softmax(logits rounded to x's dtype) - onehot."""
    logits = (x.double() @ w.double().t()).to(x.dtype).double()
    keep = targets != ignore_index
    lse = torch.logsumexp(logits, dim=1)
    t = targets.clamp(0, w.shape[0] - 1)
    lt = logits.gather(1, t[:, None])[:, 0]
    loss = ((lse - lt) * keep).sum() / keep.sum()
    G = torch.softmax(logits, dim=1)
    G[torch.arange(len(t), device=x.device), t] -= 1.0
    G *= keep[:, None]
    return loss, G @ w.double(), G.t() @ x.double() / n_chunks


def emulate(x, w, targets, ignore_index, dtype):
    """The kernels' arithmetic in float64 on the CPU, rounding where they round (E, s and the products s E to
    dtype; the target's gradient c to dtype in dW's A, fp32 in dx): (loss, dx, dw) for one chunk (n_chunks = 1)."""
    rnd = lambda t: t.to(dtype).double()  # noqa: E731
    N, V = x.shape[0], w.shape[0]
    L = rnd(x.double() @ w.double().t())
    tiles = (V + BLOCK - 1) // BLOCK
    Lp = torch.full((N, tiles * BLOCK), float("-inf"), dtype=torch.float64)
    Lp[:, :V] = L
    Lb = Lp.view(N, tiles, BLOCK)
    m = Lb.max(dim=2).values                                    # (N, tiles)
    E = torch.exp(Lb - m[:, :, None])                            # fp32 in the kernel
    sums = E.sum(dim=2)
    M = m.max(dim=1).values
    lse = M + torch.log((sums * torch.exp(m - M[:, None])).sum(dim=1))
    keep = targets != ignore_index
    t = targets.clamp(0, V - 1)
    lt = L[torch.arange(N), t]
    loss = ((lse - lt) * keep).sum() / keep.sum()
    s = torch.exp(m - lse[:, None]) * keep[:, None]              # (N, tiles)
    c = (torch.exp(lt - lse) - 1.0) * keep
    E = E.reshape(N, -1)[:, :V].clone()
    E[torch.arange(N), t] = 0.0                                  # the epilogue stores 0 at the target
    E = rnd(E)
    s_cols = rnd(s).repeat_interleave(BLOCK, dim=1)[:, :V]
    A = rnd(s_cols * E)                                          # the scaled fragments (dx: per row, dW: per token)
    dx = (A @ w.double() + c[:, None] * w.double()[t] * keep[:, None])
    A_dw = A.clone()
    A_dw[torch.arange(N)[keep], t[keep]] = rnd(c[keep])
    dw = A_dw.t() @ x.double()
    return loss, dx, dw


def rel(a, b):
    return ((a.double() - b).norm() / b.norm().clamp_min(1e-30)).item()


def check(ext, small=False):
    import tk_kernels  # noqa: F401  (registers torch.ops.tk)
    import tk_kernels.families.classifier.ops  # noqa: F401
    torch.manual_seed(0)
    worst = {}
    cases = [(1, 64, 65, None), (7, 64, 65, None), (300, 128, 1000, None), (1000, 768, 50257, None),
             (2048 + 777, 256, 5003, 1024), (4096, 768, 50304, 2048), (1000, 1600, 50257, None)]
    if small:  # compute-sanitizer: a few small cases, one with several chunks
        cases = [(7, 64, 65, None), (300, 128, 1000, None), (700, 64, 515, 256)]
    for dtype in (torch.bfloat16, torch.float16):
        for case, (N, C, V, rows) in enumerate(cases):
            x = torch.randn(N, C, device="cuda", dtype=dtype)
            w = (torch.randn(V, C, device="cuda") * C ** -0.5 * 2).to(dtype)
            targets = torch.randint(0, V, (N,), device="cuda")
            targets[torch.rand(N, device="cuda") < 0.1] = -1
            if N > 8:
                targets[: N // 8] = 3  # a frequent token: many targets in one vocabulary row
            # the experiment options change the order and timing of the logits epilogue, not its results: the cases
            # cycle through them (1: the epilogue right after its tile, 2: tiles n-fastest, 3: both)
            options = case % 4
            loss, dx, dw, scales, n_chunks = fused_forward(ext, x, w, targets, -1, rows, options=options)
            torch.cuda.synchronize()
            rl, rdx, rdw = reference(x, w, targets, -1, n_chunks)
            errs = dict(loss=abs(loss.item() - rl.item()) / abs(rl.item()), dx=rel(dx, rdx), dw=rel(dw, rdw))
            line = f"  {str(dtype)[6:]:8s} N={N} C={C} V={V} chunks={n_chunks} options={options}: " + "  ".join(
                f"{k} {v:.2e}" for k, v in errs.items())
            if rows is None:  # the family op chunks the same way: its errors beside ours
                fl, fdx, fdw, _ = torch.ops.tk.linear_cross_entropy_fwd(x, w, targets, -1)
                fam = dict(loss=abs(fl.item() - rl.item()) / abs(rl.item()), dx=rel(fdx, rdx), dw=rel(fdw, rdw))
                line += "   (family op: " + "  ".join(f"{k} {v:.2e}" for k, v in fam.items()) + ")"
            print(line, flush=True)
            for k, v in errs.items():
                worst[k] = max(worst.get(k, 0.0), v)
            assert errs["loss"] < 1e-3 and errs["dx"] < 2e-2 and errs["dw"] < 2e-2, errs
    print("all checks passed; worst " + "  ".join(f"{k} {v:.2e}" for k, v in worst.items()))


def timing(ext):
    import tk_kernels  # noqa: F401
    import tk_kernels.families.classifier.ops  # noqa: F401
    from triton.testing import do_bench
    for C in (768, 1024):
        N, V = 16384, 50304
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(V, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
        targets = torch.randint(0, V, (N,), device="cuda")
        t_fused = do_bench(lambda: fused_forward(ext, x, w, targets), return_mode="median")
        t_family = do_bench(lambda: torch.ops.tk.linear_cross_entropy_fwd(x, w, targets, -1), return_mode="median")
        xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
        ref = torch.compile(lambda a, b: F.cross_entropy(F.linear(a, b).float(), targets, ignore_index=-1))

        def compiled():
            ref(xr, wr).backward()
        t_compile = do_bench(compiled, return_mode="median")
        print(f"(N={N}, C={C}, V={V}) fwd+grads ms: fused {t_fused:.3f}  family {t_family:.3f}  compile fwd+bwd "
              f"{t_compile:.3f}   family / fused {t_family / t_fused:.3f}x  compile / fused {t_compile / t_fused:.3f}x",
              flush=True)
        # one chunk, stage by stage (stage k runs launches 1 .. k)
        rows = chunk_rows(N, V)
        sc = Scratch(rows, V, C, x.dtype, x.device)
        xc, tc = x[:rows], targets[:rows]
        lc = torch.empty(rows, device="cuda")
        dxc = torch.empty_like(xc)
        dw = torch.empty_like(w)
        t = {}
        for stage in (1, 2, 3, 5):  # stage 3 runs dx's two launches, stage 5 adds dW
            t[stage] = do_bench(lambda: ext.chunk(xc, w, tc, -1, sc.E, sc.stats, sc.target_logit, sc.s, sc.c, sc.ws, lc,
                                                  dxc, dw, 0.125, True, stage, 0), return_mode="median")
        t_opt = {o: do_bench(lambda: ext.chunk(xc, w, tc, -1, sc.E, sc.stats, sc.target_logit, sc.s, sc.c, sc.ws, lc,
                                               dxc, dw, 0.125, True, 1, o), return_mode="median") for o in (1, 2, 3)}
        names = ["logits+E", "rows", "dx+finish", "dW"]
        parts = [t[1], t[2] - t[1], t[3] - t[2], t[5] - t[3]]
        lg = torch.empty(rows, V, device="cuda", dtype=torch.bfloat16)
        t_mm = do_bench(lambda: torch.mm(xc, w.t(), out=lg), return_mode="median")
        t_dx = do_bench(lambda: torch.mm(lg, w), return_mode="median")
        t_dw = do_bench(lambda: dw.addmm_(lg.t(), xc, beta=1.0, alpha=0.125), return_mode="median")
        family = tk_kernels.families.classifier.ops._ext()
        t_sm = do_bench(lambda: family.softmax_xent_grad_(lg, tc, lc, -1), return_mode="median")
        print(f"   one {rows}-row chunk, ms: " + "  ".join(f"{n} {p:.3f}" for n, p in zip(names, parts)) +
              f" (sum {t[5]:.3f})   | family: cuBLAS logits {t_mm:.3f}  softmax {t_sm:.3f}  cuBLAS dx {t_dx:.3f}  "
              f"dW {t_dw:.3f} (sum {t_mm + t_sm + t_dx + t_dw:.3f})", flush=True)
        flop = 2 * rows * C * V
        print(f"   logits+E TFLOP/s: deferred m-fastest {flop / t[1] / 1e9:.0f}, immediate {flop / t_opt[1] / 1e9:.0f}, "
              f"n-fastest {flop / t_opt[2] / 1e9:.0f}, both {flop / t_opt[3] / 1e9:.0f}; cuBLAS logits {flop / t_mm / 1e9:.0f}; "
              f"dx+finish {flop / parts[2] / 1e9:.0f} (cuBLAS {flop / t_dx / 1e9:.0f}), dW {flop / parts[3] / 1e9:.0f} "
              f"(cuBLAS addmm {flop / t_dw / 1e9:.0f})", flush=True)


def check_emulation():
    """CPU, no kernels: the decomposition G = s_j E (off the target) + c (at it), with the kernels' roundings, against
    float64, beside the family kernel's single rounding of G (softmax - onehot computed in fp32, rounded once)."""
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        for N, C, V in [(7, 64, 65), (300, 128, 1000), (256, 64, 5003)]:
            x = torch.randn(N, C).to(dtype)
            w = (torch.randn(V, C) * C ** -0.5 * 2).to(dtype)
            targets = torch.randint(0, V, (N,))
            targets[torch.rand(N) < 0.1] = -1
            rl, rdx, rdw = reference(x, w, targets, -1, 1)
            el, edx, edw = emulate(x, w, targets, -1, dtype)
            logits = (x.double() @ w.double().t()).to(dtype).float()
            G = torch.softmax(logits, dim=1)
            keep = targets != -1
            G[torch.arange(N)[keep], targets[keep]] -= 1.0
            G = (G * keep[:, None]).to(dtype).double()
            fdx, fdw = G @ w.double(), G.t() @ x.double()
            print(f"  emulated {str(dtype)[6:]:8s} N={N} C={C} V={V}: loss {abs(el - rl).item() / abs(rl).item():.1e}  "
                  f"dx {rel(edx, rdx):.2e} (family's rounding {rel(fdx, rdx):.2e})  dw {rel(edw, rdw):.2e} "
                  f"(family's {rel(fdw, rdw):.2e})")
            assert abs(el - rl).item() < 1e-6 * abs(rl).item() and rel(edx, rdx) < 1e-2 and rel(edw, rdw) < 1e-2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="store_true", help="build only")
    ap.add_argument("--emulate", action="store_true", help="only the CPU emulation of the kernels' arithmetic")
    ap.add_argument("--small", action="store_true", help="only the small checks, no timing (compute-sanitizer)")
    args = ap.parse_args()
    if args.emulate:
        return check_emulation()
    ext = build()
    if args.build:
        return
    print(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
    check(ext, small=args.small)
    if not args.small:
        timing(ext)


if __name__ == "__main__":
    sys.exit(main())
