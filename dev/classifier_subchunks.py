"""The classifier's chunk loop with L2-sized sub-chunks, beside the shipped loop (ops._chunked), one process:

    python dev/classifier_subchunks.py [--C 768 1024]

Hypothesis (issue 10): the shipped loop writes a 2048-row chunk of logits (206 MB at V = 50304, four times the
50 MB L2), so our softmax kernel reads it back from DRAM and writes it there again, and the dx GEMM reads it
from DRAM once more; the softmax kernel is 1.1 of the 6.4 ms. Here the logits GEMM, the softmax kernel and the
dx GEMM run per sub-chunk of S rows (S V 2 bytes: 26 MB at S = 256), each on what the step before just wrote,
while the dW GEMM still runs once per R-row chunk (a GEMM with K = S rows would be mostly prologue and re-read
dW per sub-chunk). The cost: the logits GEMM reads all of W (77 MB) once per sub-chunk instead of once per
chunk. Variants (R, S, dx per sub-chunk or per chunk) are timed as do_bench medians of the loop alone (the
op's forward does all of the work: loss, dx, dW), checked against the shipped loop's outputs.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.classifier import ops  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def subchunked(x, w, t, row_loss, dx, dw, R, S, dx_per_sub, ignore_index=-1):
    """ops._chunked's results with chunks of R rows for dW and sub-chunks of S rows for the rest."""
    ext = ops._ext()
    N, V = x.shape[0], w.shape[0]
    n_chunks = (N + R - 1) // R
    logits = x.new_empty((R, V))
    w_t = w.t()
    for i, r0 in enumerate(range(0, N, R)):
        r1 = min(N, r0 + R)
        for s0 in range(r0, r1, S):
            s1 = min(r1, s0 + S)
            lg = logits[s0 - r0:s1 - r0]
            torch.mm(x[s0:s1], w_t, out=lg)
            ext.softmax_xent_grad_(lg, t[s0:s1], row_loss[s0:s1], ignore_index)
            if dx_per_sub:
                torch.mm(lg, w, out=dx[s0:s1])
        lg = logits[:r1 - r0]
        if not dx_per_sub:
            torch.mm(lg, w, out=dx[r0:r1])
        dw.addmm_(lg.t(), x[r0:r1], beta=0.0 if i == 0 else 1.0, alpha=1.0 / n_chunks)
    return n_chunks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--V", type=int, default=50304)
    ap.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    args = ap.parse_args()
    N, V = args.N, args.V
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, N={N} V={V}, bf16; loop alone, do_bench median ms")
    for C in args.C:
        torch.manual_seed(0)
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(V, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
        t = torch.randint(0, V, (N,), device="cuda")
        outs = lambda: (torch.empty(N, device="cuda"), torch.empty_like(x), torch.empty_like(w))  # noqa: E731
        ref_loss, ref_dx, ref_dw = outs()
        ref_n = ops._chunked(x, w, t, -1, ref_loss, ref_dx, ref_dw)
        loss, dx, dw = outs()
        ms = do_bench(lambda: ops._chunked(x, w, t, -1, loss, dx, dw), warmup=25, rep=200, return_mode="median")
        print(f"C={C} shipped (R=2048, one pass per chunk): {ms:.3f}")
        for R in (2048, 3072):
            for S in (256, 512, 1024):
                for per_sub in (True, False):
                    loss, dx, dw = outs()
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                    n = subchunked(x, w, t, loss, dx, dw, R, S, per_sub)
                    peak = (torch.cuda.max_memory_allocated() - before) / 1e9
                    same_loss = torch.equal(loss, ref_loss)
                    e_dx = ((dx.float() - ref_dx.float()).norm() / ref_dx.float().norm()).item()
                    e_dw = ((dw.float() * n - ref_dw.float() * ref_n).norm() / (ref_dw.float() * ref_n).norm()).item()
                    ms = do_bench(lambda: subchunked(x, w, t, loss, dx, dw, R, S, per_sub), warmup=25, rep=200,
                                  return_mode="median")
                    print(f"C={C} R={R} S={S} dx per {'sub-chunk' if per_sub else 'chunk    '}: {ms:.3f} ms "
                          f"(buffers {peak:.2f} GB; loss bitwise {same_loss}, dx rel {e_dx:.1e}, dw rel {e_dw:.1e})")
        del x, w, t, loss, dx, dw, ref_loss, ref_dx, ref_dw
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
