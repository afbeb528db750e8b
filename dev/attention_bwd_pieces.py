"""The Hopper attention backward's small kernels (prep: Delta and lse2; dQ convert) timed inside the
backward, and the backward's outputs saved / compared bitwise between two trees.

    python dev/attention_bwd_pieces.py --save /tmp/a.pt      # in tree A
    python dev/attention_bwd_pieces.py --compare /tmp/a.pt   # in tree B: dK, dV bitwise, dQ to rounding?
    python dev/attention_bwd_pieces.py --time                # per-kernel us (torch.profiler, 20 backward calls)
    (--small: only the small ragged cases, for compute-sanitizer; --many: only those with more key blocks than
    SMs; --save / --compare then pair runs of the same flags)

Why (session 30): in the GPT-2 step (H100) the prep kernel took 26 us a layer for 50 MB (1.9 TB/s) and
the dQ convert 29 us for 75 MB (2.6 TB/s), against 15 us for the 50 MB dq_accum fill beside them. The rewrite
it measured (dev/patches/attention_prep_convert_vec.patch: loads first, vector frag64 reads) was 0.5-1.6 us
slower than main's kernels (bench/RESULTS.md, session 30): they were not latency-bound.
The cases: the model's layout (tk::attention_qkv_bwd on strided views of a (B, T, 3C) tensor), causal and
not, D = 64 and 128, ragged T (odd, not a multiple of 64 or 128), bf16 and fp16, dropout on and off.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401

CASES = [  # B, H, T, D, causal, dtype, dropout_p
    (16, 12, 1024, 64, True, torch.bfloat16, 0.0),
    (16, 16, 1024, 64, True, torch.bfloat16, 0.0),
    (16, 12, 1024, 64, False, torch.bfloat16, 0.0),
    (8, 16, 2048, 128, True, torch.bfloat16, 0.0),
    (3, 5, 1000, 64, True, torch.float16, 0.0),
    (1, 7, 77, 64, False, torch.bfloat16, 0.0),
    (2, 3, 255, 128, False, torch.float16, 0.0),
    (5, 3, 129, 128, True, torch.bfloat16, 0.0),
    (4, 6, 333, 64, True, torch.bfloat16, 0.2),
    (1, 1, 1, 64, True, torch.bfloat16, 0.0),
    (2, 2, 17, 128, False, torch.bfloat16, 0.0),
    (3, 23, 257, 128, False, torch.bfloat16, 0.0),  # 207 key blocks: several per CTA of a persistent grid
    (2, 23, 380, 128, False, torch.float16, 0.2),
    (3, 23, 257, 64, False, torch.bfloat16, 0.0),
]


def run(case, seed):
    B, H, T, D, causal, dt, p = case
    g = torch.Generator(device="cuda").manual_seed(seed)
    qkv = (torch.randn(B, T, 3 * H * D, device="cuda", generator=g) * 0.5).to(dt)
    scale = D ** -0.5
    torch.manual_seed(seed)
    o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, causal, scale, p)
    dout = (torch.randn(o.shape, device="cuda", generator=g)).to(dt)
    return torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, scale, False, p, rng)[0], qkv, o, lse, dout, rng


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--save")
    ap.add_argument("--compare")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--small", action="store_true", help="only the small ragged cases (for compute-sanitizer)")
    ap.add_argument("--many", action="store_true",
                    help="only the cases with more key blocks than an H100 / H200 has SMs (several items per CTA)")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.small or c[0] * c[1] * c[2] <= 20000]
    cases = [c for c in cases if not args.many or c[0] * c[1] * -(-c[2] // 128) > 132]
    print(torch.cuda.get_device_name(), torch.__version__)
    if args.save or args.compare:
        outs = {}
        for i, case in enumerate(cases):
            outs[i] = run(case, 1000 + i)[0].cpu()
        torch.cuda.synchronize()
        if args.save:
            torch.save(outs, args.save)
            print(f"saved {len(outs)} cases")
        else:
            ref = torch.load(args.compare)
            bad = 0
            for i, case in enumerate(cases):
                # dK, dV bitwise; dQ (fp32 bulk reductions in a run-dependent order) to float rounding
                C = case[1] * case[3]
                a, r = outs[i].float(), ref[i].float()
                same = torch.equal(ref[i][..., C:], outs[i][..., C:])
                dq_err = ((a[..., :C] - r[..., :C]).norm() / r[..., :C].norm().clamp_min(1e-30)).item()
                nan = torch.isnan(a).any().item()
                bad += (not same) or nan or dq_err > 1e-3
                print(f"{case[:5]} {str(case[5])[6:]} p={case[6]}: dK, dV bitwise {'equal' if same else 'DIFFERENT'},"
                      f" dQ rel-L2 {dq_err:.2e}{', NaN' if nan else ''}")
            print(f"compare: {len(cases) - bad} of {len(cases)} cases with dK, dV bitwise equal and dQ within 1e-3")
            sys.exit(1 if bad else 0)
    if args.time:
        from torch.profiler import profile, ProfilerActivity
        for case in CASES[:4]:
            res, qkv, o, lse, dout, rng = run(case, 1)
            B, H, T, D, causal, dt, p = case

            def bwd():
                return torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, D ** -0.5, False, p, rng)
            for _ in range(5):
                bwd()
            torch.cuda.synchronize()
            n = 20
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    bwd()
                torch.cuda.synchronize()
            tot = {}
            for e in prof.key_averages():
                t = getattr(e, "self_device_time_total", None)
                t = e.self_cuda_time_total if t is None else t
                if t <= 0:
                    continue
                name = e.key
                key = ("prep" if "prep" in name else "convert" if "convert" in name else
                       "main" if "bwd_hopper" in name else "fill" if "Fill" in name else name[:40])
                tot[key] = tot.get(key, 0.0) + t
            line = ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(tot.items(), key=lambda kv: -kv[1]))
            print(f"time (B,H,T,D)=({B},{H},{T},{D}) causal={causal}: us per backward: {line}")


if __name__ == "__main__":
    main()
