#!/usr/bin/env bash
# Session 15: s15c's bench_mlp had the MLP op 0.43 ms slower at C = 768 than session 14 (not at 1024 / 2048).
# Is it the new bias gradient (ones-row GEMM), or the first shape of the process? A/B of the bias gradient, then
# bench_mlp with 768 measured again after 1024, and the per-kernel profile of the 768 step.
BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
step ab 120 python dev/mlp_bias_grad_ab.py --C 768 1024
cat $O/ab.log | grep -v -i warn | tail -6
step mlp 150 python bench/bench_mlp.py --C 1024 768 768 --skip-gemm
grep -v -i warn $O/mlp.log | tail -5
step prof 90 python bench/bench_mlp.py --C 768 --skip-gemm --profile
grep -A24 "per-kernel" $O/prof.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
