"""
Distribution of the attention accuracy test's error measures over many seeds, per path: for one shape,
the relative L2 and worst-row errors of o, dq, dk, dv (float64 reference) of our kernels and of SDPA,
over N fresh seeds, with the test's tolerances, so a failing seed can be told from a shifted
distribution (tests/attention/test_attention_gpu.py's check_close). Each path in its own process state
is set by TK_ATTENTION_PATH / TK_ATTENTION_BWD around the calls.

    python dev/attention_row_errors.py --shape 3,5,255,128 --full --seeds 24
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "attention")]

import test_attention_gpu as t  # noqa: E402
from gpu_test_utils import attention_reference_grads, rel_err  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="3,5,255,128")
ap.add_argument("--full", action="store_true", help="non-causal (default causal)")
ap.add_argument("--seeds", type=int, default=24)
ap.add_argument("--first-seed", type=int, default=2231031471)
args = ap.parse_args()
B, H, T, D = map(int, args.shape.split(","))
causal, dtype = not args.full, torch.bfloat16
paths = {"hopper": ("hopper", "hopper"), "portable": ("portable", "portable"), "hopper fwd + portable bwd": ("hopper", "portable")}
worst = {}
for i in range(args.seeds):
    seed = args.first_seed + i
    q, k, v = t.qkv_split(B, H, T, D, dtype, t.gen(seed))
    dout = t.randn((B, H, T, D), t.gen(seed + 1), dtype)
    sc = D ** -0.5
    o_ref, _, grads_ref = attention_reference_grads(q, k, v, dout, causal, sc)
    qs, ks, vs = (x.detach().requires_grad_() for x in (q, k, v))
    os_ = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
    sd = (os_, *torch.autograd.grad(os_, (qs, ks, vs), dout))
    refs = (o_ref, *grads_ref)
    for pname, (fp, bp) in paths.items():
        os.environ["TK_ATTENTION_PATH"], os.environ["TK_ATTENTION_BWD"] = fp, bp
        qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
        o = t.tka.attention(qq, kk, vv, causal=causal)
        ours = (o, *torch.autograd.grad(o, (qq, kk, vv), dout))
        for name, a, s, r in zip(("o", "dq", "dk", "dv"), ours, sd, refs):
            e, es, rw, rs = rel_err(a, r), rel_err(s, r), t.row_err(a, r), t.row_err(s, r)
            tol, rtol = max(2 * es, t.FLOOR[dtype]), max(2 * rs, t.ROW_FLOOR_FACTOR * t.FLOOR[dtype])
            w = worst.setdefault((pname, name), [0, 0, 0, 0, 0])
            w[0] = max(w[0], e / tol); w[1] = max(w[1], rw / rtol); w[2] += e; w[3] += rw; w[4] += rs
print(f"(B,H,T,D)=({B},{H},{T},{D}) causal={causal} bf16, {args.seeds} seeds from {args.first_seed}")
print(f"{'path':28s} {'grad':4s} {'max e/tol':>9s} {'max row/rtol':>12s} {'mean e':>9s} {'mean row':>9s} {'sdpa row':>9s}")
for (pname, name), w in worst.items():
    n = args.seeds
    print(f"{pname:28s} {name:4s} {w[0]:9.2f} {w[1]:12.2f} {w[2]/n:9.2e} {w[3]/n:9.2e} {w[4]/n:9.2e}")
