"""
The train step of bench/bench_train.py with the model's attention on the fused projection (tk::attention_qkv_fwd /
_bwd: dqkv written in place by the backward kernels) beside the q, k, v op on its views (tk::attention_fwd / _bwd,
whose dq, dk, dv autograd concatenates into c_attn's (B, T, 3C) gradient), in one process, alternating, with
kernels=torch as the baseline. The views variant is the registry's attention entry with tk_qkv=None: exactly
model.py's path before the fused op.

    python dev/bench_train_qkv.py                                  # gpt2, torch.compile, 2 rounds
    python dev/bench_train_qkv.py --compile eager,compile,graphs --profile --top 12

With --profile: GPU ms per step by op family of each variant, and the kernels whose time differs most between
the two tk variants (the concatenation's copy kernel should be the one that is gone).
"""
import argparse
import os
import sys
from types import SimpleNamespace

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_train  # noqa: E402
from tk_kernels import dispatch  # noqa: E402

VARIANTS = ("torch", "tk views", "tk fused")


def run(variant: str, name: str, spec: dict, compile_mode: str, args, device, ptdtype) -> dict:
    kernels = "torch" if variant == "torch" else "tk"
    if variant == "tk views":
        with dispatch.override("attention", tk_qkv=None):
            return bench_train.run_mode(name, spec, kernels, compile_mode, args, device, ptdtype)
    return bench_train.run_mode(name, spec, kernels, compile_mode, args, device, ptdtype)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--models", default="gpt2", help="comma-separated models of bench_train.py (default gpt2)")
    p.add_argument("--compile", default="compile", help="comma-separated eager, compile, graphs (default compile)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of the variants (default 2)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--profile", action="store_true", help="GPU time per op family (torch.profiler), last round")
    p.add_argument("--top", type=int, default=12, help="with --profile: kernels that differ most between tk variants")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 1
    device, ptdtype = torch.device("cuda", torch.cuda.current_device()), torch.bfloat16
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    specs = bench_train.model_specs(False)
    print(f"bench_train_qkv: torch {torch.__version__}, {torch.cuda.get_device_name(device)}, bf16, "
          f"warm-up {a.warmup}, timed {a.iters} steps, {a.rounds} rounds")
    for name in a.models.split(","):
        for c in a.compile.split(","):
            runs: dict[str, list] = {v: [] for v in VARIANTS}
            for rnd in range(a.rounds):
                profile = a.profile and rnd == a.rounds - 1
                args = SimpleNamespace(warmup=a.warmup, iters=a.iters, profile=profile, trace=None,
                                       top=1000 if profile else 0, verbose=True)
                for variant in (VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]):
                    r = run(variant, name, specs[name], c, args, device, ptdtype)
                    if "error" in r:
                        print(f"  {name} {variant}/{c}: error: {r['error']}", flush=True)
                        continue
                    print(f"  {name} {variant}/{c} round {rnd}: {r['ms_per_iter']:.2f} ms/iter, "
                          f"{r['tokens_per_s']:,.0f} tok/s, {r.get('max_mem_GiB')} GiB", flush=True)
                    runs[variant].append(r)
            # the fastest round's time of each variant; the profile of its profiled (last) round
            best = {v: {**min(rs, key=lambda r: r["ms_per_iter"]),
                        **{k: rs[-1][k] for k in ("profile_ms", "profile_top") if k in rs[-1]}}
                    for v, rs in runs.items() if rs}
            if len(best) < len(VARIANTS):
                continue
            base = best["torch"]["ms_per_iter"]
            print(f"\n{name} / {c}: best of {a.rounds} rounds")
            print(f"{'variant':<12}{'ms/iter':>10}{'tok/s':>12}{'vs torch':>10}{'GiB':>8}")
            for v in VARIANTS:
                r = best[v]
                print(f"{v:<12}{r['ms_per_iter']:>10.2f}{r['tokens_per_s']:>12,.0f}{base / r['ms_per_iter']:>9.3f}x"
                      f"{r.get('max_mem_GiB') or 0:>8.2f}")
            fused, views = best["tk fused"]["ms_per_iter"], best["tk views"]["ms_per_iter"]
            print(f"fused vs views: {views - fused:+.3f} ms per step ({views / fused:.4f}x)")
            if a.profile and all("profile_ms" in best[v] for v in VARIANTS):
                fams = list(best["torch"]["profile_ms"])
                print(f"\nGPU ms per step by family: {'':<0}" + "".join(f"{f:>11}" for f in fams))
                for v in VARIANTS:
                    print(f"  {v:<12}" + "".join(f"{best[v]['profile_ms'][f]:>11.3f}" for f in fams)
                          + f"   total {sum(best[v]['profile_ms'].values()):.3f}")
                rows = {}
                for v in ("tk views", "tk fused"):
                    for kname, fam, ms, calls in best[v].get("profile_top") or []:
                        rows.setdefault(kname, {"family": fam})[v] = (ms, calls)
                diff = sorted(rows.items(), key=lambda kv: -abs(kv[1].get("tk views", (0, 0))[0]
                                                               - kv[1].get("tk fused", (0, 0))[0]))[:a.top]
                print("\nkernels that differ most (ms per step, calls per step): views -> fused")
                for kname, row in diff:
                    (mv, cv), (mf, cf) = row.get("tk views", (0.0, 0)), row.get("tk fused", (0.0, 0))
                    print(f"  {mv:8.3f} ({cv:5.1f}) -> {mf:8.3f} ({cf:5.1f})  [{row['family']}] {kname[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
