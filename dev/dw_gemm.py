"""Weight gradients dW = a^T b (fp32 out, K = tokens) on our GEMM against cuBLAS (torch.mm with out_dtype=float32,
what tk_kernels.families.mlp.ops._weight_grad ships), cold and under sustained load (session 46).

GPT-2 medium's step spends 13.6 ms of its ~79 in cuBLAS weight gradients (bench/RESULTS.md session 43). Our GEMM's
fp32-output path (STORE_F32: both operands MN-major, K split to fill the GPU) last measured 0.89-0.93x cuBLAS (session
14), before the 16-bit GEMMs got cluster pairs (+19% at 8192^3, session 23); the fp32 path still runs one CTA a tile.
Run in two trees (main: one CTA; a tree whose gemm.cu gives store_f32 cluster pairs too), each against cuBLAS in the
same process.

    python dev/dw_gemm.py [--secs 2] [--models medium gpt2 c2048]

Per shape: rel-L2 of ours against cuBLAS and against float64 (first shape of each model), then kernel time a call
(torch.profiler, a CUDA graph of 8 calls, as dev/sustained_pairs.py) cold and after --secs s of back-to-back replays,
with ours' output zero-filled first when it splits K (the fill counted).
"""
import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tk_kernels.families.mlp import ops  # noqa: E402
from dev.sustained_pairs import cold_hot  # noqa: E402

# (M, N) of dW = a^T b, a (K, M), b (K, N): the four weights of a block (c_attn, c_proj, c_fc, mlp c_proj)
MODELS = {
    "medium": [(3072, 1024), (1024, 1024), (4096, 1024), (1024, 4096)],
    "gpt2": [(2304, 768), (768, 768), (3072, 768), (768, 3072)],
    "c2048": [(8192, 2048), (2048, 8192)],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=2.0)
    ap.add_argument("--K", type=int, default=16384)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--small", action="store_true", help="ragged shapes once each, checked (for compute-sanitizer)")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, "tree", ROOT, flush=True)
    ext = ops._ext()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(0)
    if args.small:  # odd 128-row tile counts (a pair's second tile below M), ragged N / K, split and not
        for M, N, K in ((1000, 264, 300), (136, 3072, 2048), (384, 776, 4096), (8, 64, 16)):
            a = torch.randn(K, M, device="cuda", generator=g).to(torch.bfloat16)
            b = torch.randn(K, N, device="cuda", generator=g).to(torch.bfloat16)
            for splits in (1, 0, 3):
                out = torch.zeros(M, N, device="cuda")
                ext.gemm_(a, True, b, True, out, ops.STORE_F32, splits=splits)
                exact = a.double().t() @ b.double()
                err = ((out.double() - exact).norm() / exact.norm()).item()
                print(f"small ({M},{N},{K}) splits={splits} (chosen {ext.splits(M, N, K, sms)}): rel-L2 vs float64 "
                      f"{err:.2e}", flush=True)
                assert err < 1e-5, err
        return
    K, calls = args.K, 8
    totals = {"ours": [0.0, 0.0], "cuBLAS": [0.0, 0.0]}
    for model in args.models:
        for idx, (M, N) in enumerate(MODELS[model]):
            a = torch.randn(K, M, device="cuda", generator=g).to(torch.bfloat16)
            b = torch.randn(K, N, device="cuda", generator=g).to(torch.bfloat16)
            splits = ext.splits(M, N, K, sms)
            out = torch.empty(M, N, device="cuda")

            def ours():
                if splits > 1:
                    out.zero_()
                ext.gemm_(a, True, b, True, out, ops.STORE_F32)

            ref = torch.empty(M, N, device="cuda")

            def cublas():
                torch.mm(a.t(), b, out=ref, out_dtype=torch.float32)

            out.fill_(float("nan"))
            ours()
            cublas()
            torch.cuda.synchronize()
            rel = lambda x, y: ((x.double() - y.double()).norm() / y.double().norm()).item()
            line = f"{model:6s} dW ({M},{N}) K={K} splits={splits}: ours vs cuBLAS rel-L2 {rel(out, ref):.2e}"
            if idx == 0:
                exact = a.double().t() @ b.double()
                line += f", vs float64 ours {rel(out, exact):.2e} cuBLAS {rel(ref, exact):.2e}"
                del exact
            assert torch.isfinite(out).all(), "unwritten output"
            print(line, flush=True)
            res = {}
            for name, fn in (("ours", ours), ("cuBLAS", cublas)):
                cold, hot = res[name] = cold_hot(fn, calls, args.secs, 10)
                totals[name][0] += cold
                totals[name][1] += hot
            tf = 2 * M * N * K / 1e6
            (oc, oh), (cc, ch) = res["ours"], res["cuBLAS"]
            print(f"    ours {oc:7.1f} -> {oh:7.1f} us ({tf / oc:5.0f} -> {tf / oh:5.0f} TFLOP/s), cuBLAS {cc:7.1f} -> "
                  f"{ch:7.1f} us ({tf / cc:5.0f} -> {tf / ch:5.0f}); cuBLAS / ours cold {cc / oc:.3f}, hot {ch / oh:.3f}",
                  flush=True)
    (oc, oh), (cc, ch) = totals["ours"], totals["cuBLAS"]
    print(f"all shapes: ours {oc:.1f} -> {oh:.1f} us, cuBLAS {cc:.1f} -> {ch:.1f}; cuBLAS / ours cold {cc / oc:.3f}, "
          f"hot {ch / oh:.3f}")


if __name__ == "__main__":
    main()
