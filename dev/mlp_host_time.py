"""Is bench_mlp's MLP fwd+bwd host-bound at C = 768? For our op and eager PyTorch (bf16 activations, bf16 or fp32
parameters, N = 16384): the host time per step (20 steps issued without a synchronize, wall / 20: the launch queue
is deep enough that the host never waits), the GPU time per step (CUDA events around the same 20, queued
behind one long sleep kernel so the GPU never waits for the host), and the top CPU-side ops of one step
(torch.profiler, CPU self time).

    python dev/mlp_host_time.py --C 768 1024

Session 15: bench_mlp timed our op 1.006-1.329 ms at C = 768 in four runs while its kernels summed to 0.842 ms
(profile), eager a steady 0.94-0.95. s15e (before the autocast fix of the eager fp32-parameter case): tk host 0.974
/ GPU 0.837 ms per step (bf16 parameters), 1.094 / 0.826 (fp32); eager 0.706 / 0.891 (bf16): our op is host-bound
in eager mode at C = 768, eager PyTorch is not. Not shipped.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))


def mlp_inputs(N: int, C: int, pdt: torch.dtype):
    """x (N, C) bf16, the MLP's four parameters in pdt (the biases zero) and dy, on the GPU."""
    H = 4 * C
    x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    params = [(torch.randn(H, C, device="cuda") * C ** -0.5).to(pdt).requires_grad_(),
              torch.zeros(H, device="cuda", dtype=pdt, requires_grad=True),
              (torch.randn(C, H, device="cuda") * H ** -0.5).to(pdt).requires_grad_(),
              torch.zeros(C, device="cuda", dtype=pdt, requires_grad=True)]
    return x, params, torch.randn(N, C, device="cuda", dtype=torch.bfloat16)


def fwd_bwd_step(fn, x, params, dy):
    """One fwd+bwd of fn(x, *params) (under bf16 autocast when the parameters are not bf16), then the
    gradients dropped."""
    def step():
        with torch.autocast("cuda", torch.bfloat16, enabled=params[0].dtype != torch.bfloat16):
            y = fn(x, *params)
        y.backward(dy)
        x.grad = None
        for q in params:
            q.grad = None
    return step


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    p.add_argument("--N", type=int, default=16384)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    import tk_kernels
    from bench_mlp import reference_mlp
    from torch.profiler import ProfilerActivity, profile
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for C in a.C:
        for pdt in (torch.bfloat16, torch.float32):
            x, params, dy = mlp_inputs(a.N, C, pdt)
            for name, fn in (("tk", tk_kernels.mlp), ("eager", reference_mlp)):
                step = fwd_bwd_step(fn, x, params, dy)
                for _ in range(5):
                    step()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(20):
                    step()
                host = (time.perf_counter() - t0) / 20 * 1e3
                torch.cuda.synchronize()
                torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU work: the 20 steps queue up behind it
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(20):
                    step()
                e1.record()
                torch.cuda.synchronize()
                gpu = e0.elapsed_time(e1) / 20
                print(f"  C={C} params {str(pdt)[6:]:<8} {name:<5}: host {host:.3f} ms/step, GPU {gpu:.3f} ms/step",
                      flush=True)
                if C == a.C[0] and name == "tk":
                    with profile(activities=[ProfilerActivity.CPU]) as prof:
                        for _ in range(5):
                            step()
                        torch.cuda.synchronize()
                    ev = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:14]
                    for e in ev:
                        print(f"      {e.self_cpu_time_total / 5 / 1e3:7.3f} ms self  x{e.count // 5:<3} {e.key[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
