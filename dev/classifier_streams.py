"""Can the classifier's softmax pass hide under its GEMMs? The family's chunk loop (ops._chunked) runs per chunk the
logits GEMM, our softmax pass, the dx GEMM and the dW GEMM one after another on one stream (H100, C = 768, a 2048-row
chunk, session 27: 0.241 + 0.156 + 0.237 + 0.254 ms). The pass is DRAM-bound and the GEMMs compute-bound, so run
the pass of chunk i on a side stream while the main stream runs the GEMMs of chunks i - 1 and i + 1 (two logits
buffers):

    main:  L0  L1  [wait P0] D0 W0  L2  [wait P1] D1 W1  L3 ...        side:  [wait L_i] P_i
    python dev/classifier_streams.py [--C 768 1024] [--rows 2048 1024]

Prints, per C and chunk size, do_bench medians (ms) of the serial loop and the two-stream loop (same kernels, same
order of the dW sums: outputs bitwise equal, checked), and the extra memory of each. No SM partitioning: whichever
kernel is resident first keeps its SMs, so this only says whether the hardware's own interleaving already pays;
if it does not, the next step is cuBLASLt's SM-count target with a persistent pass on the SMs left over.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.classifier import ops  # noqa: E402


def serial(x, w, t, rows, row_loss, dx, dw, bufs):
    ext, n = ops._ext(), (x.shape[0] + rows - 1) // rows
    for i, (xc, tc, lc, dxc) in enumerate(zip(x.split(rows), t.split(rows), row_loss.split(rows), dx.split(rows))):
        lg = bufs[0][:xc.shape[0]]
        torch.mm(xc, w.t(), out=lg)
        ext.softmax_xent_grad_(lg, tc, lc, -1)
        torch.mm(lg, w, out=dxc)
        dw.addmm_(lg.t(), xc, beta=0.0 if i == 0 else 1.0, alpha=1.0 / n)


def streamed(x, w, t, rows, row_loss, dx, dw, bufs, side):
    ext, main = ops._ext(), torch.cuda.current_stream()
    xs, ts, ls, dxs = x.split(rows), t.split(rows), row_loss.split(rows), dx.split(rows)
    n = len(xs)
    side.wait_stream(main)
    done_l = [torch.cuda.Event() for _ in range(n)]
    done_p = [torch.cuda.Event() for _ in range(n)]

    def logits(i):
        lg = bufs[i % 2][:xs[i].shape[0]]
        torch.mm(xs[i], w.t(), out=lg)
        done_l[i].record(main)
        with torch.cuda.stream(side):
            side.wait_event(done_l[i])
            ext.softmax_xent_grad_(lg, ts[i], ls[i], -1)
            done_p[i].record(side)
        return lg

    lgs = [logits(0)]
    for i in range(n):
        if i + 1 < n:
            lgs.append(logits(i + 1))
        main.wait_event(done_p[i])
        torch.mm(lgs[i], w, out=dxs[i])
        dw.addmm_(lgs[i].t(), xs[i], beta=0.0 if i == 0 else 1.0, alpha=1.0 / n)
    main.wait_stream(side)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    ap.add_argument("--rows", type=int, nargs="+", default=[2048, 1024])
    args = ap.parse_args()
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    N, V, side = 16384, 50304, torch.cuda.Stream()
    for C in args.C:
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(V, C, device="cuda") * C ** -0.5).bfloat16()
        t = torch.randint(0, V, (N,), device="cuda")
        for rows in args.rows:
            res = {}
            for name in ("serial", "streamed"):
                bufs = [torch.empty(rows, V, device="cuda", dtype=torch.bfloat16) for _ in range(1 if name == "serial" else 2)]
                row_loss = torch.empty(N, device="cuda")
                dx, dw = torch.empty_like(x), torch.empty_like(w)
                f = (lambda: serial(x, w, t, rows, row_loss, dx, dw, bufs)) if name == "serial" else \
                    (lambda: streamed(x, w, t, rows, row_loss, dx, dw, bufs, side))
                f()
                torch.cuda.synchronize()
                out = (row_loss.clone(), dx.clone(), dw.clone())
                ms = do_bench(f, warmup=25, rep=200)
                res[name] = (ms, out, sum(b.numel() * 2 for b in bufs) / 1e9)
            same = all(torch.equal(a, b) for a, b in zip(res["serial"][1], res["streamed"][1]))
            s, st = res["serial"][0], res["streamed"][0]
            print(f"C={C} rows={rows}: serial {s:.3f} ms ({res['serial'][2]:.2f} GB logits), two streams {st:.3f} ms "
                  f"({res['streamed'][2]:.2f} GB): {s / st:.3f}x; outputs bitwise equal: {same}", flush=True)


if __name__ == "__main__":
    main()
