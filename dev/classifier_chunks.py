"""The Hopper classifier path at two chunk sizes, side by side (do_bench medians, fwd+bwd, N = 16384, V = 50304):
CHUNK_BYTES 256 MiB (1024 rows: logits + gradient buffers) and 512 MiB (2048 rows), and the portable path.

    python dev/classifier_chunks.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402
from tk_kernels.families.classifier import ops  # noqa: E402
from triton.testing import do_bench  # noqa: E402

N, V = 16384, 50304
for C in (768, 1024):
    x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(V, C, device="cuda") * C ** -0.5).to(torch.bfloat16).requires_grad_()
    t = torch.randint(0, V, (N,), device="cuda")

    def step():
        tk_kernels.linear_cross_entropy(x, w, t).backward()
        x.grad = w.grad = None
    for label, path, chunk in (("hopper 1024 rows", "hopper", 1 << 28), ("hopper 2048 rows", "hopper", 1 << 29),
                               ("portable 2048 rows", "portable", 1 << 28)):
        os.environ["TK_CLASSIFIER_PATH"] = path
        ops.CHUNK_BYTES = chunk
        step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - before) / 1e9
        ms = do_bench(step, warmup=25, rep=200, return_mode="median")
        print(f"C={C} {label}: {ms:.3f} ms, extra peak {peak:.2f} GB")
