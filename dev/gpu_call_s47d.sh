#!/usr/bin/env bash
# Session 47, fourth call (~5 min, any card): clusters of 4 CTAs for the MLP family's 16-bit GEMMs. s47b / s47c (H100):
# the GELU' GEMM's consumers wait on the ring's full barriers (Nsight Compute long_sb 44% against 21% for the plain
# store), pairs are worth 12% to it (without them 1115-1119 us against 997-1014 at C = 2048), and neither the B layout
# (a K-major copy: level) nor the pair's box split (uneven: level or slower) matters: the L2 -> SM operand traffic a
# FLOP does (128 x 192 tiles: 28 KB a CTA a slice with pairs, 22 KB with four CTAs sharing B). Tree (prep below):
#   .vcl4 = main + dev/patches/mlp_cluster4.patch: the 16-bit epilogues run as clusters of 4 CTAs on the tiles
#           (4m .. 4m + 3, n), each loading a quarter of the common B tile into all four (pipeline CLUSTER = 4)
#   1. tests/mlp GPU op tests in .vcl4 (not the GPT-step test: only the MLP family is built)
#   2. dev/mlp_epilogue_ncu.py --C 768 / 1024 / 2048 in main and .vcl4, alternated twice
#   3. bench_mlp --skip-gemm --C 1024 2048 in .vcl4, then main
# Prep: rm -rf .vcl4 && mkdir .vcl4 && git archive HEAD | tar -x -C .vcl4 && (cd .vcl4 && patch -p1 <
#   ../dev/patches/mlp_cluster4.patch); carry [".gpu_data", ".vcl4"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vcl4" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vcl4 && step t_cl4 120 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step"); tail -1 $O/t_cl4.log; grep -E "^FAILED|Error" $O/t_cl4.log | head -5
for r in 1 2; do for C in 2048 1024 768; do epi . main${r}_$C $C 45; epi .vcl4 cl4${r}_$C $C 45; done; done
(cd .vcl4 && step mlp_cl4 90 python bench/bench_mlp.py --skip-gemm --C 1024 2048); echo "-- cl4"; grep -E "^\|" $O/mlp_cl4.log | head -8
step mlp_main 90 python bench/bench_mlp.py --skip-gemm --C 1024 2048; echo "-- main"; grep -E "^\|" $O/mlp_main.log | head -8
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
