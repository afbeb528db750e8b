#!/usr/bin/env bash
# Session 46 (~4 min, any card): where issue 11's C = 2048 MLP (1.02-1.03x the best torch against 1.08-1.13x at
# C = 768 / 1024) loses: the six GEMMs of an MLP step at C = 2048 and 1024, ours against cuBLAS (+ eager GELU), cold
# and after 1.5 s of load (dev/mlp_shapes.py), then bench_mlp's MLP table and per-kernel profile at C = 2048.
# Prep: none; carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
step shapes 150 python dev/mlp_shapes.py --C 2048 1024; grep -E "^C=" $O/shapes.log
step mlp2048 120 python bench/bench_mlp.py --skip-gemm --C 2048 --profile; grep -E "^\||ms  x|total" $O/mlp2048.log | head -30
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
