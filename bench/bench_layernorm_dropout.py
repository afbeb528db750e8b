"""
The residual dropout folded into our fused add + LayerNorm: a correctness check against float64 and the
forward + backward timed side by side with the unfused path it replaces, in one command.

    python bench/bench_layernorm_dropout.py                           # (16384, 384) and (16384, 768), p = 0.2
    python bench/bench_layernorm_dropout.py --shapes 16384,1024 --p 0.1 --json out.json

The op is one of the model's fused adds under autocast training: s = x + dropout(delta) with x the fp32
residual stream and delta the bf16 sublayer output, y = LayerNorm(s) in bf16; the backward takes dy (bf16)
and ds (fp32) and gives dx, ddelta (bf16, masked), dweight, dbias. Implementations (fwd + bwd):

    fused          dispatch.add_layer_norm(plan, x, delta, w, b, dropout_p=p): our kernels with the dropout
                   inside (the eager model's call, autograd in C++)
    fused_compile  the same under torch.compile (the custom ops; what the compiled model runs now)
    unfused        F.dropout(delta, p), then dispatch.add_layer_norm(plan, x, dropped, w, b): PyTorch's dropout
                   kernels in front of ours (the eager model before)
    unfused_compile  the same under torch.compile (Inductor's dropout kernel + ours: the compiled model before)
    eager          x + F.dropout(delta, p); F.layer_norm(s).to(bf16): PyTorch alone
    compile        torch.compile of eager
    fused_p0       our kernels without dropout (what the dropout costs on top)

Timing: triton.testing.do_bench medians (L2 flushed between runs), once as eager calls (host time included)
and once as CUDA-graph replays of each fwd + bwd (GPU time only: what a step under
--compile_mode=reduce-overhead sees). TB/s: over the bytes the fused op must move, N C 28 + 16 N (as
bench_layernorm.py: the mask is never stored). The check first: for each shape, s bitwise equal to
x + F.dropout(delta)'s value for the kernels' mask (ops.dropout_mask), y, dx, ddelta, dweight, dbias
against float64 with that mask, the kept fraction within 4 sigma of 1 - p, and p = 0 bitwise the op
without dropout with no generator draw. Exits 1 if a check fails.
End to end: python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 --kernels torch,tk
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (REPO_ROOT, os.path.join(REPO_ROOT, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench_layernorm import bytes_moved, fwd_bwd_ms  # noqa: E402

DEFAULT_SHAPES = [(16384, 384), (16384, 768)]
X_DT, D_DT = torch.float32, torch.bfloat16
IMPLS = ("fused", "fused_compile", "unfused", "unfused_compile", "eager", "compile", "fused_p0")
TOL = {"y": 8e-3, "dx": 2e-4, "ddelta": 8e-3, "dw": 2e-4, "db": 2e-4}


def make_plan(C):
    from tk_kernels import dispatch
    with dispatch.override("attention", tk=None), dispatch.override("mlp", tk=None), \
            dispatch.override("classifier", tk=None), dispatch.override("layer_norm", not_used=None):
        return dispatch.plan("tk", "cuda", D_DT, 64, dropout_p=0.2, n_embd=C)  # the model's plan under bf16 autocast


def inputs(N, C, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(N, C, device="cuda", generator=g) + 0.3).requires_grad_()
    d = (0.5 * torch.randn(N, C, device="cuda", generator=g)).to(D_DT).requires_grad_()
    w = (1 + 0.2 * torch.randn(C, device="cuda", generator=g)).requires_grad_()
    b = (0.1 * torch.randn(C, device="cuda", generator=g)).requires_grad_()
    dy = torch.randn(N, C, device="cuda", generator=g).to(D_DT)
    ds = 0.5 * torch.randn(N, C, device="cuda", generator=g)
    return x, d, w, b, dy, ds


def rel_err(x, ref) -> float:
    ref = ref.double()
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check_shape(N, C, p) -> dict:
    """The correctness checks of one shape: {name: (value, ok)}."""
    from tk_kernels.families.layernorm import ops
    x, d, w, b, dy, ds = (t.detach() for t in inputs(N, C, seed=N + C))
    out = {}
    y, s, mean, rstd, rng = torch.ops.tk.dropout_add_layer_norm_fwd(x, d, w, b, 1e-5, D_DT, p)
    dx, ddelta, dw, db, _ = torch.ops.tk.dropout_add_layer_norm_bwd(dy, ds, s, mean, rstd, w, True, D_DT, p, rng)
    keep = ops.dropout_mask(rng, N, C, p).bool()
    kept = keep.double().mean().item()
    sigma = math.sqrt(p * (1 - p) / keep.numel())
    out["kept-1+p (sigma)"] = ((kept - (1 - p)) / sigma, abs(kept - (1 - p)) < 4 * sigma)
    s_ref = x + (d.float() * keep * ops.keep_scale(p)).to(D_DT)
    out["s bitwise"] = (float(torch.equal(s, s_ref)), torch.equal(s, s_ref))
    s64, w64, b64 = (t.double().requires_grad_() for t in (s_ref, w, b))
    y64 = F.layer_norm(s64, (C,), w64, b64, 1e-5)
    gs64, gw64, gb64 = torch.autograd.grad(y64, [s64, w64, b64], dy.double())
    dx64 = gs64 + ds.double()
    for name, ours, ref in (("y", y, y64.detach()), ("dx", dx, dx64), ("ddelta", ddelta, dx64 * keep * ops.keep_scale(p)),
                            ("dw", dw, gw64), ("db", db, gb64)):
        e = rel_err(ours, ref)
        out[name] = (e, e <= TOL[name])
    out["ddelta 0 where dropped"] = (float(not ddelta[~keep].any()), not ddelta[~keep].any())
    # p = 0: the op without dropout, bitwise, and nothing drawn from the generator
    state = torch.cuda.get_rng_state()
    s0, y0 = ops.add_layer_norm_op(x, d, w, b, 1e-5, D_DT, 0.0)
    y1, s1, _, _ = torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, D_DT)
    same = torch.equal(s0, s1) and torch.equal(y0, y1) and torch.equal(torch.cuda.get_rng_state(), state)
    out["p=0 is the op without dropout"] = (float(same), same)
    return out


def run_shape(N, C, p, graphs, impls):
    from tk_kernels import dispatch
    plan = make_plan(C)
    x, d, w, b, dy, ds = inputs(N, C)

    def fused(x, d, w, b):
        return dispatch.add_layer_norm(plan, x, d, w, b, dropout_p=p)

    def unfused(x, d, w, b):
        return dispatch.add_layer_norm(plan, x, F.dropout(d, p), w, b)

    def eager(x, d, w, b):
        s = x + F.dropout(d, p)
        return s, F.layer_norm(s, (C,), w, b, 1e-5).to(D_DT)

    def fused_p0(x, d, w, b):
        return dispatch.add_layer_norm(plan, x, d, w, b)

    torch._dynamo.reset()
    fns = {"fused": fused, "fused_compile": torch.compile(fused), "unfused": unfused,
           "unfused_compile": torch.compile(unfused), "eager": eager, "compile": torch.compile(eager),
           "fused_p0": fused_p0}
    row = {"N": N, "C": C, "p": p, "graphs": graphs, "bytes": bytes_moved(N, C)}
    for name in impls:
        row[name] = fwd_bwd_ms(fns[name], x, d, w, b, dy, ds, graphs, f"{name} at ({N}, {C})")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=None, help="rows,width pairs (default: %s)" %
                    " ".join(f"{n},{c}" for n, c in DEFAULT_SHAPES))
    ap.add_argument("--p", type=float, default=0.2, help="dropout probability (default 0.2)")
    ap.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of " + ",".join(IMPLS))
    ap.add_argument("--modes", default="eager,graphs", help="eager (calls, host time included) and/or graphs "
                    "(CUDA-graph replays, GPU time only)")
    ap.add_argument("--json", help="write the results to this JSON file")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_layernorm_dropout: needs a CUDA GPU", file=sys.stderr)
        return 1
    try:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else DEFAULT_SHAPES
        assert all(len(s) == 2 for s in shapes)
    except (ValueError, AssertionError):
        ap.error("--shapes takes rows,width pairs such as 16384,768")
    if not 0.0 < args.p < 1.0:
        ap.error("--p must be in (0, 1)")
    impls = [i for i in args.impls.split(",") if i]
    modes = [m for m in args.modes.split(",") if m]
    if set(impls) - set(IMPLS) or set(modes) - {"eager", "graphs"}:
        ap.error(f"--impls takes a subset of {','.join(IMPLS)}, --modes of eager,graphs")
    from tk_kernels.families.layernorm import ops
    reason = ops.environment_reason(torch.device("cuda", torch.cuda.current_device()))
    if reason is not None:
        print(f"bench_layernorm_dropout: the layernorm kernels cannot run: {reason}", file=sys.stderr)
        return 1
    print(f"device={torch.cuda.get_device_name()} torch={torch.__version__} x={X_DT} delta/y={D_DT} p={args.p}",
          flush=True)
    t0 = time.time()
    failed = []
    checks = {}
    print("check (float64 reference with the kernels' mask; relative L2 errors):")
    for N, C in shapes:
        res = check_shape(N, C, args.p)
        checks[f"{N},{C}"] = {k: v[0] for k, v in res.items()}
        bad = [k for k, (_, ok) in res.items() if not ok]
        failed += [f"({N}, {C}) {k}" for k in bad]
        print(f"  ({N}, {C}) {'PASS' if not bad else 'FAIL ' + ', '.join(bad)}: "
              + " ".join(f"{k}={v:.3g}" for k, (v, _) in res.items()), flush=True)
    results = []
    for mode in modes:
        print(f"\ntiming ({'CUDA-graph replays, GPU time only' if mode == 'graphs' else 'eager calls, host time included'}"
              f"; ms per fwd+bwd, TB/s over N*C*28 + 16*N bytes):")
        print(f"{'N':>6} {'C':>5} " + " ".join(f"{i:>16}" for i in impls) + "   fused vs unfused / best torch")
        for N, C in shapes:
            r = run_shape(N, C, args.p, mode == "graphs", impls)
            results.append(r)
            cells = [f"{r[i]:8.4f} {r['bytes'] / (r[i] * 1e-3) / 1e12:4.2f}TB" if r.get(i) else f"{'n/a':>16}"
                     for i in impls]
            unf = r.get("unfused_compile" if mode == "graphs" else "unfused")
            best = min([r[i] for i in ("eager", "compile") if r.get(i)] or [float("nan")])
            fu = r.get("fused_compile" if mode == "graphs" else "fused")
            r["fused_vs_unfused"] = unf / fu if unf and fu else None
            r["fused_vs_best_torch"] = best / fu if fu else None
            print(f"{N:>6} {C:>5} " + " ".join(cells) + f"   {r['fused_vs_unfused'] or float('nan'):.2f}x / "
                  f"{r['fused_vs_best_torch'] or float('nan'):.2f}x", flush=True)
    print(f"\n({time.time() - t0:.1f}s) {'ALL CHECKS PASS' if not failed else 'FAILED: ' + '; '.join(failed)}")
    print("(graphs: fused_compile vs unfused_compile is the model's step under torch.compile before / after)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "p": args.p,
                       "checks": checks, "failed": failed, "results": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
