"""Is our attention forward's in-step slowness a power / clock effect? (session 44)

s44a (H100): in GPT-2 medium's step (bench_train --profile --trace) our forward takes 124-141 us a call, uniform
across the layers of a step and moving from step to step (125 in one, 136 in the next), cuDNN's 108-119 in torch's
step; in short bursts of graph replays (dev/attention_in_step.py: alone, after c_attn's GEMM, inside a block's
GEMMs) both take 103-106 us. This replays the same block (c_attn GEMM, attention forward, c_proj and the MLP GEMMs;
`--what alone`: eight attention forwards) for --secs seconds without a pause, then profiles --reps more replays:
if ours slows to its in-step time under sustained load and cuDNN does not, the cause is how our kernel fares at
the clocks the power limit sets. Run `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100`
beside it to see the clocks; each phase prints its wall time.

    python dev/attention_sustained.py [--heads 16 12] [--secs 3] [--rounds 2] [--what layer alone]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.bench_layernorm import graphed  # noqa: E402
from dev.attention_in_step import block_cases, kernel_stats  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, nargs="+", default=[16, 12])
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--what", nargs="+", default=["layer", "alone"])
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, "cuDNN", torch.backends.cudnn.version())
    for H in args.heads:
        cases = block_cases(H)
        graphs = {}
        for name, (match, fns) in cases.items():
            def eight(alone=fns["alone"]):  # --what alone: eight forwards a replay
                for _ in range(8):
                    y = alone()
                return y
            for what in args.what:
                graphs[(name, what)] = (graphed(fns["layer"] if what == "layer" else eight), match)
        for r in range(args.rounds):
            for what in args.what:
                for name in cases:
                    replay, match = graphs[(name, what)]
                    short = kernel_stats(replay, args.reps, match)
                    t0 = time.time()
                    n = 0
                    while time.time() - t0 < args.secs:
                        for _ in range(20):
                            replay()
                        torch.cuda.synchronize()
                        n += 20
                    hot = kernel_stats(replay, args.reps, match)
                    print(f"{time.strftime('%H:%M:%S')} H={H:2d} round {r} {what:5s} {name:5s}: attention forward "
                          f"{short[0]:6.1f} us cold -> {hot[0]:6.1f} us after {n} replays in {args.secs:g} s "
                          f"(min {hot[1]:.1f}, max {hot[2]:.1f})", flush=True)
                    time.sleep(1.0)  # let the clocks come back
        del graphs, cases
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
