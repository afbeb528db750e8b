"""What train.py's optimizer step costs on the GPU, and what a fused one could save: GPT-2's real parameter list,
timed side by side in one process.

    python dev/optim_step.py                      # GPT-2 124M (the default), on a GPU
    python dev/optim_step.py --model gpt2-medium
    python dev/optim_step.py --device cpu --model tiny   # a smoke run of the code paths

The profile of the compiled GPT-2 124M step (bench/RESULTS.md) puts 2.5 ms of its ~33 ms of GPU time in the
"optimizer" family (fused AdamW, clip_grad_norm_'s norm and grad scaling), against ~0.9 ms for the bytes an
AdamW step with clipping must move at the copy bandwidth: read the grads once for the norm (4 B / param), then
read p, g, m, v and write p, m, v (28 B / param). Variants, each the whole step (clip at 1.0 + AdamW, lr 6e-4,
betas (0.9, 0.95), weight decay 0.1 on the >= 2-D params, nanoGPT's two groups):
  train.py    clip_grad_norm_ over the parameter list, then AdamW(fused=True).step() (what train.py does)
  foreach     the same with AdamW(foreach=True)
  clip-fused  the norm as clip_grad_norm_ computes it, then the fused AdamW with the clip factor passed as its
              grad_scale (the divisor it already applies for the GradScaler: no separate scaling pass)
  flat        the parameters, grads and moments as two flat fp32 tensors (decay / no decay): clip + fused AdamW
              over 2 tensors instead of one per parameter
  graphed     train.py's step (clip_grad_norm_ + fused AdamW with capturable=True) captured once in a CUDA
              graph and replayed: what the step costs without its host-side launches
  tk          tk_kernels.AdamW (the optim family): clip_grad_norm_(1.0) folded into its step, one norm kernel and
              one AdamW kernel over all parameters
  copy        a device copy of 28 B per parameter plus a 4 B read: the bandwidth floor
All variants start from the same parameters and grads; the updated parameters of clip-fused and flat are
checked against train.py's (max abs difference printed). Median ms of do_bench (CUDA) after warm-up.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from model import GPT, GPTConfig  # noqa: E402

MODELS = {"tiny": dict(n_layer=2, n_head=2, n_embd=64, block_size=64, vocab_size=512),
          "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304),
          "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, vocab_size=50304),
          "shakespeare_char": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65)}
HP = dict(lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
WD = 0.1


def param_groups(params):
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    return [{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}]


def clone_state(params, grads):
    ps = [p.detach().clone().requires_grad_() for p in params]
    for p, g in zip(ps, grads):
        p.grad = g.clone()
    return ps


def timer(device):
    if device.type == "cuda":
        from triton.testing import do_bench
        return lambda fn: do_bench(fn, warmup=10, rep=50, return_mode="median")

    def cpu_time(fn, reps=5):
        import time
        fn()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t) / reps * 1000
    return cpu_time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt2", choices=list(MODELS))
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA GPU: use --device cpu --model tiny for a smoke run")
        return 2
    torch.manual_seed(0)
    model = GPT(GPTConfig(**MODELS[args.model], dropout=0.0, bias=True)).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [torch.randn_like(p) * 1e-2 for p in params]
    n = sum(p.numel() for p in params)
    print(f"{args.model}: {len(params)} parameter tensors, {n / 1e6:.2f}M parameters, {torch.__version__}, "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}")
    fused = device.type == "cuda"
    bench = timer(device)
    results, finals = {}, {}

    def run(name, make):
        ps = clone_state(params, grads)
        step = make(ps)
        step()  # one step for the check, from the common start
        finals[name] = torch.cat([p.detach().flatten() for p in ps])
        results[name] = bench(step)

    def train_py(ps, **kw):
        opt = torch.optim.AdamW(param_groups(ps), **HP, **kw)

        def step():
            torch.nn.utils.clip_grad_norm_(ps, 1.0)
            opt.step()
        return step

    def clip_fused(ps):
        opt = torch.optim.AdamW(param_groups(ps), **HP, fused=fused)

        def step():
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in ps], 2.0)), 2.0)
            # the fused AdamW divides every grad by grad_scale (the GradScaler's protocol): 1 / clip_coef
            opt.grad_scale = (norm + 1e-6).clamp(min=1.0).to(torch.float32)
            opt.found_inf = torch.zeros((), device=device, dtype=torch.float32)
            opt.step()
        return step

    def flat(ps):
        groups = param_groups(ps)
        flats = []
        for g in groups:
            buf = torch.cat([p.detach().flatten() for p in g["params"]]).requires_grad_()
            buf.grad = torch.cat([p.grad.flatten() for p in g["params"]])
            flats.append((buf, g["params"]))
        opt = torch.optim.AdamW([{"params": [b], "weight_decay": g["weight_decay"]} for (b, _), g in
                                 zip(flats, groups)], **HP, fused=fused)
        bufs = [b for b, _ in flats]

        def step():
            torch.nn.utils.clip_grad_norm_(bufs, 1.0)
            opt.step()

        # the check compares the parameters: write the flat values back after each step (not timed: done once)
        def step_and_scatter():
            step()
            for b, plist in flats:
                off = 0
                for p in plist:
                    p.data.copy_(b.detach()[off:off + p.numel()].view_as(p))
                    off += p.numel()
        step_and_scatter.timed = step
        return step_and_scatter

    run("train.py", lambda ps: train_py(ps, fused=fused))
    run("foreach", lambda ps: train_py(ps, foreach=True))
    if fused:
        run("clip-fused", clip_fused)
    if fused:
        def graphed(ps):
            opt = torch.optim.AdamW(param_groups(ps), **HP, fused=True, capturable=True)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside the graph: state allocation, lazy init
                for _ in range(2):
                    torch.nn.utils.clip_grad_norm_(ps, 1.0)
                    opt.step()
            torch.cuda.current_stream().wait_stream(side)
            for p, p0 in zip(ps, clone_state(params, grads)):  # back to the common start for the check
                p.data.copy_(p0.data)
                p.grad.copy_(p0.grad)
            for st in opt.state.values():
                st["exp_avg"].zero_(), st["exp_avg_sq"].zero_(), st["step"].zero_()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                torch.nn.utils.clip_grad_norm_(ps, 1.0)
                opt.step()
            return graph.replay
        run("graphed", graphed)
    if fused:
        def tk(ps):  # tk_kernels.AdamW: the norm kernel, then the AdamW kernel scaling g in registers
            import tk_kernels
            opt = tk_kernels.AdamW(param_groups(ps), **HP)

            def step():
                opt.clip_grad_norm_(1.0)
                opt.step()
            return step
        run("tk", tk)
    ps = clone_state(params, grads)
    s = flat(ps)
    s()
    finals["flat"] = torch.cat([p.detach().flatten() for p in ps])
    results["flat"] = bench(s.timed)
    src = torch.empty(7 * n // 2, device=device)  # 14 B read + 14 B written per parameter, + g.sum's 4 B read
    dst = torch.empty_like(src)
    g = torch.empty(n, device=device)
    results["copy"] = bench(lambda: (dst.copy_(src), g.sum()))

    base = results["train.py"]
    print(f"\n{'variant':<12}{'ms':>10}{'vs train.py':>13}{'GB/s (32 B/param)':>20}{'max |dp| vs train.py':>24}")
    for name, ms in results.items():
        diff = (finals[name] - finals["train.py"]).abs().max().item() if name in finals else float("nan")
        print(f"{name:<12}{ms:>10.3f}{base / ms:>12.2f}x{32 * n / ms / 1e6:>20.0f}{diff:>24.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
