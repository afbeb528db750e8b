"""What one of train.py's evaluations costs at other batch sizes: the same eval_iters x batch_size samples, fed
to the compiled no-grad forward k batches at a time (k x batch_size rows per call, eval_iters / k calls).

    python dev/eval_batch.py                       # shakespeare_char's model, k = 1, 2, 4, 8, torch and tk
    python dev/eval_batch.py --ks 1,4 --kernels tk --mode default

The mean over the samples is the same number whatever k is (equal-sized batches; float rounding aside), so a
larger k changes only the speed: config/train_shakespeare_char.py's evaluations (200 batches of 64 x 256, twice,
21 times per run) took about 12 s of its 66 s under CUDA graphs in session 6. Each k is its own compiled graph;
the time is the wall time of one evaluation's calls on one split (warmed up), as train.py sees it.
"""
import argparse
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from model import GPT, GPTConfig  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--kernels", default="torch,tk")
    ap.add_argument("--mode", default="reduce-overhead", help="torch.compile mode (default reduce-overhead)")
    ap.add_argument("--eval_iters", type=int, default=200)
    ap.add_argument("--batch_size", type=int, default=64)
    args = ap.parse_args()
    device = torch.device("cuda")
    cfg = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65, dropout=0.2, bias=False)
    T = cfg["block_size"]
    print(f"eval_batch: torch {torch.__version__}, {torch.cuda.get_device_name()}, {args.eval_iters} batches of "
          f"{args.batch_size} x {T}, compile mode {args.mode}")
    print(f"{'kernels':<8}{'k':>4}{'calls':>7}{'ms per eval split':>19}{'vs k=1':>9}{'mean loss':>11}")
    for kernels in args.kernels.split(","):
        torch.manual_seed(0)
        model = GPT(GPTConfig(**cfg, kernels=kernels)).to(device).eval()
        model.plan_kernels(device, torch.bfloat16, dropout_p=0.0, warn=False)
        compiled = torch.compile(model, mode=args.mode, dynamic=False)
        data = torch.randint(cfg["vocab_size"], (args.eval_iters * args.batch_size, T + 1), device=device)
        base = None
        for k in [int(v) for v in args.ks.split(",")]:
            if args.eval_iters % k:
                print(f"{kernels:<8}{k:>4}  skipped: does not divide eval_iters")
                continue
            rows = k * args.batch_size
            calls = args.eval_iters // k

            def one_eval():
                losses = torch.zeros(calls, device=device)
                for i in range(calls):
                    xy = data[i * rows:(i + 1) * rows]
                    if args.mode == "reduce-overhead":
                        torch.compiler.cudagraph_mark_step_begin()
                    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                        _, loss = compiled(xy[:, :-1], xy[:, 1:])
                    losses[i] = loss
                return losses.mean().item()

            for _ in range(3):  # compile, record, warm
                one_eval()
            torch.cuda.synchronize()
            reps = 5
            t = time.perf_counter()
            for _ in range(reps):
                mean = one_eval()
            ms = (time.perf_counter() - t) / reps * 1000
            base = base or ms
            print(f"{kernels:<8}{k:>4}{calls:>7}{ms:>19.1f}{base / ms:>8.2f}x{mean:>11.5f}", flush=True)
        del model, compiled
        torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
