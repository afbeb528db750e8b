"""The LayerNorm kernels with a delta_bias (a GEMM's bias added in the fused add, its gradient from the backward's
column sums), for compute-sanitizer and a timing, in the tree this runs from:

    compute-sanitizer --tool memcheck python dev/ln_delta_bias_check.py      # small shapes, every dtype / option
    compute-sanitizer --tool racecheck python dev/ln_delta_bias_check.py     # (the forward's shared-memory staging)
    python dev/ln_delta_bias_check.py --time                                 # fwd + bwd at GPT-2's shape

--time: do_bench medians (L2 flushed) of the op's forward + backward at (16384, 768) and (16384, 1024), fp32 x /
bf16 delta / bf16 y, without and with delta_bias (and, for the same result, without delta_bias followed by a
column sum of ddelta: what the GEMM's backward did before), p = 0 and p = 0.1.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.layernorm import ops as ln  # noqa: E402

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


def run(rows, C, x_dt, d_dt, y_dt, p, delta_bias):
    g = torch.Generator(device="cuda").manual_seed(rows * 7 + C)
    x = torch.randn(rows, C, device="cuda", generator=g).to(x_dt).requires_grad_()
    d = torch.randn(rows, C, device="cuda", generator=g).to(d_dt).requires_grad_()
    w = torch.randn(C, device="cuda", generator=g).requires_grad_()
    b = torch.randn(C, device="cuda", generator=g).requires_grad_()
    db = torch.randn(C, device="cuda", generator=g).requires_grad_() if delta_bias else None
    s, y = ln.add_layer_norm_op(x, d, w, b, 1e-5, y_dt, p, db)
    torch.autograd.backward([y, s], [torch.ones_like(y), torch.ones_like(s)])
    torch.cuda.synchronize()
    return x.grad.float().sum().item()


def check():
    n = 0
    for rows, C in ((1, 64), (7, 200), (33, 768), (5, 2048), (3, 8192)):
        for x_dt, d_dt, y_dt in ((F32, BF16, BF16), (BF16, BF16, BF16), (F32, F16, F16), (F32, F32, F32)):
            for p in (0.0, 0.2):
                for delta_bias in (False, True):
                    run(rows, C, x_dt, d_dt, y_dt, p, delta_bias)
                    n += 1
    print(f"ran {n} cases")


def time_it():
    from triton.testing import do_bench
    for C in (384, 768, 1024):
        rows = 16384
        for p in (0.0, 0.2):
            g = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(rows, C, device="cuda", generator=g, requires_grad=True)
            d = torch.randn(rows, C, device="cuda", generator=g).to(BF16).requires_grad_()
            w = torch.randn(C, device="cuda", generator=g, requires_grad=True)
            b = torch.randn(C, device="cuda", generator=g, requires_grad=True)
            db = torch.randn(C, device="cuda", generator=g, requires_grad=True)
            gy, gs = torch.randn(rows, C, device="cuda").to(BF16), torch.randn(rows, C, device="cuda")

            def step(delta_bias, colsum=False):
                s, y = ln.add_layer_norm_op(x, d, w, b, 1e-5, BF16, p, db if delta_bias else None)
                grads = torch.autograd.grad([y, s], [x, d, w, b] + ([db] if delta_bias else []), [gy, gs])
                if colsum:
                    grads[1].float().sum(0)
            def fwd(delta_bias):
                with torch.no_grad():
                    ln.add_layer_norm_op(x, d, w, b, 1e-5, BF16, p, db if delta_bias else None)
            ms = {name: do_bench(lambda: step(*a), warmup=25, rep=200)
                  for name, a in (("plain", (False,)), ("delta_bias", (True,)), ("plain+colsum", (False, True)))}
            ms["fwd plain"] = do_bench(lambda: fwd(False), warmup=25, rep=200)
            ms["fwd delta_bias"] = do_bench(lambda: fwd(True), warmup=25, rep=200)
            print(f"C={C} p={p}: " + ", ".join(f"{k} {v * 1e3:.1f} us" for k, v in ms.items()))


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__)
    time_it() if "--time" in sys.argv else check()
