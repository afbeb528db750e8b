#!/usr/bin/env bash
# Session 25, second look at the projections on our GEMM (see gpu_call_s25b.sh; .vbase = main before them): the MLP
# GPU tests with the linear test's fix, the model-level GPU tests, GPT-2 medium tk A/B/A/B (s25b had one pair, new
# 0.4 ms slower), then both trees' GPT-2 tk step profiled (the in-step times of the column sums against Inductor's
# fused sums, and of the projection GEMMs). Carry [".gpu_data", ".vbase"]. ~7 min.
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step mlp_tests 120 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp
tail -2 $O/mlp_tests.log
med() { step $1 70 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -1; }
med med_a; (cd .vbase && med med_b); med med_c; (cd .vbase && med med_d)
prof() { step $1 70 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --top 60 --out $O/$1
         grep "tok/s" $O/$1.log | head -1; grep -E "colsum|sum_view|nvjet|gemm_kernel|splitK|reduce_kernel|_to_copy|bfloat16_copy" $O/$1.log | head -40; }
prof prof_new; (cd .vbase && prof prof_base)
echo "all done at $((SECONDS - t0)) s"
