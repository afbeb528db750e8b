#!/usr/bin/env bash
# Session 31's second call: the 16-bit weight copies (GPT.keep_weight16; tk_kernels.AdamW writes them in its update
# kernel; the MLP / linear / classifier ops read them instead of casting the fp32 weights; the classifier hands lm_head
# its fp32 gradient straight from its scaling kernel) in the working tree, beside .vbase (= HEAD, without them):
#   1. the new and touched GPU tests: tests/optim whole, tests/classifier whole, tests/mlp -k "copies or opcheck or
#      gpt_step or graph", tests/train/test_cuda_graphs_gpu.py (train.py keeps copies now, grad accumulation 2);
#   2. compute-sanitizer memcheck + racecheck on the optimizer's copy tests;
#   3. GPT-2's step A/B/A/B (train_abab .vbase), then GPT-2 medium's, then the new tk step profiled.
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_optim 60 python -m pytest -m gpu -q -p no:cacheprovider tests/optim; tail -1 $O/t_optim.log; grep "^FAILED" $O/t_optim.log | head
step t_cls 60 python -m pytest -m gpu -q -p no:cacheprovider tests/classifier; tail -1 $O/t_cls.log; grep "^FAILED" $O/t_cls.log | head
step t_mlp 60 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -k "copies or opcheck or gpt_step or graph"; tail -1 $O/t_mlp.log; grep "^FAILED" $O/t_mlp.log | head
step t_graphs 120 python -m pytest -m gpu -q -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py; tail -1 $O/t_graphs.log; grep "^FAILED" $O/t_graphs.log | head
sanitize . 60 python -m pytest -m gpu -q -p no:cacheprovider tests/optim/test_optim_gpu.py -k "16bit_copies"
train_abab .vbase
med() { step $1 100 python bench/bench_train.py --models gpt2-medium --kernels $2 --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -2; }
med med_a torch,tk; (cd .vbase && med med_b tk); med med_c tk; (cd .vbase && med med_d tk)
step prof 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --top 160 --out $O/prof
grep -E "tok/s|^\| tk" $O/prof.log | head -4
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? med_? prof 2>/dev/null) && rm -rf *.log train_? med_? prof)
echo "all done at $((SECONDS - t0)) s"
