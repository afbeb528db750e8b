#!/usr/bin/env bash
# Session 31's third call: the 16-bit weight copies again, with the AdamW kernel's stores vectorized (s31b: storing the
# copy after the fp32 arrays had split every STG.E.128 into four STG.E, and the kernel took 2.72 ms instead of ~1.05;
# the arrays are __restrict__ pointers now: 8 STG.E.128 in the SASS), beside .vbase (= HEAD, without the copies):
#   1. tests/optim whole (the model test now allows lm_head's fp32 gradient: losses to 1e-5, parameters to 1e-3);
#   2. compute-sanitizer memcheck + racecheck on the optimizer's copy tests;
#   3. GPT-2's step A/B/A/B (train_abab .vbase), GPT-2 medium's, then the new tk step profiled.
# Prep: .vbase as in gpu_call_s31b.sh. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_optim 60 python -m pytest -m gpu -q -p no:cacheprovider tests/optim; tail -1 $O/t_optim.log; grep "^FAILED" $O/t_optim.log | head
sanitize . 60 python -m pytest -m gpu -q -p no:cacheprovider tests/optim/test_optim_gpu.py -k "16bit_copies"
train_abab .vbase
med() { step $1 100 python bench/bench_train.py --models gpt2-medium --kernels $2 --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -2; }
med med_a torch,tk; (cd .vbase && med med_b tk); med med_c tk; (cd .vbase && med med_d tk)
step prof 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --top 160 --out $O/prof
grep -E -A2 "GPU ms per step" $O/prof.log | head -4; grep -E "adamw|grad_sq|mul_scalar|Fill|copy" $O/prof.log | head
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? med_? prof 2>/dev/null) && rm -rf *.log train_? med_? prof)
echo "all done at $((SECONDS - t0)) s"
