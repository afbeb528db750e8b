"""
One kernel family on and off in the same process: bench/bench_train.py's run_mode for kernels=torch, then tk with
the family switched off (its registry entry's not_used set) and on (not_used cleared), whatever it ships as,
all three alternated round by round so that drift between runs (the GPU's clocks, the process's host time)
shows up as a spread instead of a difference:

    python dev/bench_train_ab.py mlp --model gpt2 --compile graphs --rounds 2

dev/bench_train_using.py times a family on against torch; whether to turn it on is this comparison (session 14:
the tk step with the MLP family on and as shipped differed by less than the spread of separate processes).
"""
import argparse
import dataclasses
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_train  # noqa: E402
from tk_kernels import dispatch  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("family", choices=sorted(dispatch.FAMILIES))
    p.add_argument("--model", default="gpt2")
    p.add_argument("--compile", default="graphs", choices=bench_train.COMPILE_MODES)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--dropout", type=float, default=0.0)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    args = argparse.Namespace(dropout=a.dropout, iters=a.iters, warmup=a.warmup, profile=False, top=0, trace=None,
                              verbose=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device, ptdtype = torch.device("cuda"), torch.bfloat16
    spec = bench_train.model_specs(False)[a.model]
    shipped = dispatch.FAMILIES[a.family]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {a.model}, {a.compile}, "
          f"{a.family}: shipped not_used = {shipped.not_used!r}")
    runs = {"torch": [], f"tk {a.family} off": [], f"tk {a.family} on": []}
    # torch in every round too: in train.py's default compile mode (host-bound at shakespeare_char's size) every run
    # of a process was slower than the one before it (s16b / s16c), which a single first torch run hides
    order = ["torch", f"tk {a.family} off", f"tk {a.family} on"] * a.rounds
    for label in order:
        dispatch.FAMILIES[a.family] = dataclasses.replace(
            shipped, not_used=None if label.endswith(" on") else "switched off by dev/bench_train_ab.py")
        r = bench_train.run_mode(a.model, dict(spec), "torch" if label == "torch" else "tk", a.compile, args, device,
                                 ptdtype)
        dispatch.FAMILIES[a.family] = shipped
        if "error" in r:
            print(f"  {label}: {r['error']}")
            return 1
        runs[label].append(r["tokens_per_s"])
        print(f"  {label:<16} {r['tokens_per_s']:>10,.0f} tok/s  {r['ms_per_iter']:.2f} ms/iter", flush=True)
    base = statistics.median(runs["torch"])
    for label, v in runs.items():
        print(f"{label:<16} median {statistics.median(v):>10,.0f} tok/s ({statistics.median(v) / base:.3f}x torch), "
              f"runs {', '.join(f'{x:,.0f}' for x in v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
