"""
LayerNorm kernel variants side by side on one GPU: each variant is the shipped source of
tk_kernels/families/layernorm/csrc with a few text substitutions (launch bounds, chunks per thread),
built into its own extension, checked against float64 and timed at the benchmark shapes.

    python dev/layernorm_variants.py                       # every variant below
    python dev/layernorm_variants.py --variants shipped,bwd_k2

Per variant and width: worst error / tolerance over a few shapes and dtypes (must be < 1), then the
forward and backward kernels alone (ext.forward / ext.backward, the backward with its dw/db reduce),
do_bench medians with an L2 flush, at N = 16384 rows, fp32 x, bf16 delta and y; TB/s over the bytes
bench/bench_layernorm.py counts (28 N C + 16 N for forward + backward). Not shipped; the winners'
settings go into the shipped kernels and their header comments.
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tk_kernels import build as tkbuild  # noqa: E402
from dev.variant_pkg import variant_pkg  # noqa: E402

BWD_LB = "__launch_bounds__(CTA_THREADS, K >= 4 ? 1 : 2) backward_kernel"
FWD_LB = "__launch_bounds__(CTA_THREADS, K >= 4 ? 3 : 4) forward_kernel"
BWD_K2 = ("backward.cu", "constexpr int BWD_MAX_K = 3;", "constexpr int BWD_MAX_K = 2;")
# name -> [(file, old, new)]; ptxas (sm_90a) says which spill
VARIANTS = {
    "shipped": [],
    # forward: 3 CTAs per SM at every K (ptxas then uses 70-80 registers at K = 3, no spills)
    "fwd_3cta": [("forward.cu", FWD_LB, FWD_LB.replace("K >= 4 ? 3 : 4", "3"))],
    # forward with at most 3 chunks per thread: C = 1024..2048 on 2..4 warps per row, K = 2, 4 CTAs
    "fwd_k3": [("forward.cu", "constexpr int FWD_MAX_K = 4;", "constexpr int FWD_MAX_K = 3;")],
    # backward with at most 2 chunks per thread: C = 768 on 2 warps per row (K = 2), 2 CTAs per SM
    "bwd_k2": [BWD_K2],
    # the same under a cap of 80 registers: 3 CTAs per SM, spills 16 B at K = 2
    "bwd_k2_3cta": [BWD_K2, ("backward.cu", BWD_LB, BWD_LB.replace("1 : 2", "1 : 3"))],
}
WIDTHS = [768, 1024, 1600, 2048]
F32, BF16 = torch.float32, torch.bfloat16
TOL = {F32: 2e-4, BF16: 8e-3}


def build_variant(name: str, subs, tmp: Path):
    module, _ = tkbuild.build("layernorm", pkg_dir=variant_pkg("layernorm", name, subs, tmp), quiet=True)
    return module


def rel(a, ref) -> float:
    ref = ref.double()
    return ((a.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(ext) -> float:
    """Worst error / tolerance over shapes and dtypes, forward and backward, against float64."""
    worst = 0.0
    g = torch.Generator(device="cuda").manual_seed(0)
    for rows, C in [(1000, 768), (513, 2048), (7, 200), (64, 64), (300, 1600), (100, 8192)]:
        for x_dt, d_dt, y_dt in [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F32, F32)]:
            x = (torch.randn(rows, C, generator=g, device="cuda") + 0.3).to(x_dt)
            d = (0.5 * torch.randn(rows, C, generator=g, device="cuda")).to(d_dt)
            w = 1 + 0.2 * torch.randn(C, generator=g, device="cuda")
            b = 0.1 * torch.randn(C, generator=g, device="cuda")
            y, s, mean, rstd = ext.forward(x, d, w, b, 1e-5, y_dt)
            assert torch.equal(s, x + d)
            s64 = s.double().requires_grad_()
            w64, b64 = w.double().requires_grad_(), b.double().requires_grad_()
            y64 = F.layer_norm(s64, (C,), w64, b64, 1e-5)
            dy = torch.randn(rows, C, generator=g, device="cuda").to(y_dt)
            ds = (0.5 * torch.randn(rows, C, generator=g, device="cuda")).to(x_dt)
            split = d_dt != x_dt
            dx, dd, dw, db = ext.backward(dy, ds, s, mean, rstd, w, True, d_dt if split else None)
            gs, gw, gb = torch.autograd.grad(y64, [s64, w64, b64], dy.double())
            dx_ref = gs + ds.double()
            errs = [(rel(y, y64), TOL[y_dt]), (rel(dx, dx_ref), TOL[x_dt]), (rel(dw, gw), TOL[F32]),
                    (rel(db, gb), TOL[F32])]
            if split:
                errs.append((rel(dd, dx_ref), TOL[d_dt]))
            worst = max([worst] + [e / t if e == e else float("inf") for e, t in errs])
    return worst


def time_ms(fn) -> float:
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rows", type=int, default=16384)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("layernorm_variants: needs a CUDA GPU", file=sys.stderr)
        return 1
    names = [n for n in args.variants.split(",") if n]
    for n in names:
        if n not in VARIANTS:
            ap.error(f"unknown variant {n!r} (have {', '.join(VARIANTS)})")
    N = args.rows
    print(f"device={torch.cuda.get_device_name()} rows={N} x=fp32 delta/y=bf16; bytes = 28 N C + 16 N", flush=True)
    print(f"{'variant':>12} {'C':>5} {'err/tol':>8} {'fwd ms':>8} {'bwd ms':>8} {'sum ms':>8} {'TB/s':>6}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="ln_variants_"))
    try:
        for name in names:
            try:
                ext = build_variant(name, VARIANTS[name], tmp)
            except Exception as e:
                print(f"{name:>12} build failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                continue
            worst = check(ext)
            for C in WIDTHS:
                g = torch.Generator(device="cuda").manual_seed(1)
                x = torch.randn(N, C, generator=g, device="cuda")
                d = torch.randn(N, C, generator=g, device="cuda").to(BF16)
                w = 1 + 0.1 * torch.randn(C, generator=g, device="cuda")
                b = 0.1 * torch.randn(C, generator=g, device="cuda")
                dy = torch.randn(N, C, generator=g, device="cuda").to(BF16)
                ds = torch.randn(N, C, generator=g, device="cuda")
                y, s, mean, rstd = ext.forward(x, d, w, b, 1e-5, BF16)
                t_f = time_ms(lambda: ext.forward(x, d, w, b, 1e-5, BF16))
                t_b = time_ms(lambda: ext.backward(dy, ds, s, mean, rstd, w, True, BF16))
                nbytes = 28 * N * C + 16 * N
                extra = ""
                if name == "shipped":  # the whole op as bench/bench_layernorm.py times it (host path included)
                    import tk_kernels
                    leaves = [t.requires_grad_() for t in (x, d, w, b)]

                    def step():
                        s_, y_ = tk_kernels.add_layer_norm(*leaves, out_dtype=BF16)
                        torch.autograd.backward([s_, y_], [ds, dy])
                    step()
                    from triton.testing import do_bench
                    t_op = float(do_bench(step, warmup=25, rep=100, grad_to_none=leaves,
                                          quantiles=[0.5, 0.2, 0.8])[0])
                    tbs = nbytes / (t_op * 1e-3) / 1e12
                    extra = f"   full op (autograd, as the bench): {t_op:.4f} ms {tbs:.2f} TB/s"
                print(f"{name:>12} {C:>5} {worst:8.3f} {t_f:8.4f} {t_b:8.4f} {t_f + t_b:8.4f} "
                      f"{nbytes / ((t_f + t_b) * 1e-3) / 1e12:6.2f}{extra}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
