"""Session 9's repro of bench_attention.py --graphs failing at its first shape: capturing autograd.grad of our
attention backward, (16,12,1024,64) causal, raised "operation failed due to a previous error during capture"
while every later shape captured fine. Runs bench_attention's sequence for one shape and impl in a fresh process
(eager forward + backward, then graphed(autograd.grad)) and prints the full error, then tries the same capture again
and with capture_error_mode="relaxed" (which accepts potentially unsafe API calls) to narrow the cause.

    python dev/capture_first_bwd.py --impl tk --shape 16,12,1024,64 --causal 1 [--order fwd-first|bwd-only]
"""
import argparse
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench.bench_attention import make_impl, on_side_stream  # noqa: E402
from bench.bench_layernorm import graphed  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--impl", default="tk")
ap.add_argument("--shape", default="16,12,1024,64")
ap.add_argument("--causal", type=int, default=1)
ap.add_argument("--order", default="fwd-first", choices=("fwd-first", "bwd-only"))
ap.add_argument("--fwd-stream", action="store_true",
                help="run the eager forward on a side stream (bench_attention.py's fix since session 9)")
args = ap.parse_args()
B, H, T, D = map(int, args.shape.split(","))
causal = bool(args.causal)
fn = make_impl(args.impl)
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v, do = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))


def capture(step, mode="global"):
    """bench_attention.py --graphs's capture (bench_layernorm.graphed), replayed once."""
    graphed(step, mode)()
    torch.cuda.synchronize()


if args.order == "fwd-first":
    with torch.no_grad():
        capture(lambda: fn(q, k, v, causal))
    print("forward capture ok", flush=True)
qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
o = on_side_stream(lambda: fn(qg, kg, vg, causal)) if args.fwd_stream else fn(qg, kg, vg, causal)
ref = torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
torch.cuda.synchronize()
for attempt, mode in (("first", "global"), ("second", "global"), ("relaxed", "relaxed")):
    try:
        capture(lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True), mode)
        print(f"backward capture {attempt} ({mode}): ok", flush=True)
    except Exception:
        print(f"backward capture {attempt} ({mode}): FAILED", flush=True)
        traceback.print_exc()
        torch.cuda.synchronize()
