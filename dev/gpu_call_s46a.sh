#!/usr/bin/env bash
# Session 46 (~9 min, any card): weight gradients on our GEMM with cluster pairs (.vdw). GPT-2 medium's step spends
# 13.6 ms in cuBLAS's fp32-output weight gradients; our store_f32 path last measured 0.89-0.93x cuBLAS (session 14),
# before the 16-bit GEMMs got cluster pairs (+19% at 8192^3). .vdw: gemm.cu's store_f32 also runs as pairs of CTAs
# sharing (multicasting) the B tile, gemm_splits counts pairs, and ops._weight_grad uses it (TK_DW=cublas: cuBLAS).
#   1. .vdw: the MLP GPU tests (its dW now ours), dev/dw_gemm.py --small (ragged shapes against float64), and
#      compute-sanitizer memcheck / racecheck on it.
#   2. dev/dw_gemm.py: ours against cuBLAS at medium's, GPT-2's and C = 2048's dW shapes, cold and after 1.5 s of load;
#      main (one CTA a tile) at medium's shapes, .vdw at all.
# (Ran once, s46a: no shape gained, so the medium step A/B planned after it was not run; bench/RESULTS.md session 46.)
# Prep: rm -rf .vdw; mkdir .vdw; git archive HEAD | tar -x -C .vdw;
#   (cd .vdw && patch -p1 < ../dev/patches/mlp_dw_cluster_pairs.patch); carry [".gpu_data", ".vdw"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vdw" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-580}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
(cd .vdw && step t_mlp 150 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -x); tail -1 $O/t_mlp.log
grep -E "^FAILED|^ERROR" $O/t_mlp.log | head -5
(cd .vdw && step small 40 python dev/dw_gemm.py --small); grep -E "small|Error" $O/small.log | head -14
sanitize .vdw 60 python dev/dw_gemm.py --small
step dw_main 60 python dev/dw_gemm.py --secs 1.5 --models medium; grep -E "dW|ours|all" $O/dw_main.log
(cd .vdw && step dw_vdw 140 python dev/dw_gemm.py --secs 1.5); grep -E "dW|ours|all" $O/dw_vdw.log
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
