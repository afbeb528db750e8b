#!/usr/bin/env bash
# Session 30's second call: dev/patches/layernorm_delta_bias.patch with its test fix (s30a: its one failure,
# test_delta_bias_public_api_autograd, compared delta_bias's gradient, the column sums of ddelta AS STORED in bf16,
# against float64 at the fp32 tolerance; the kernel's behaviour is the designed one, the test now checks it at
# delta's tolerance and against the stored ddelta's sums at 1e-5):
#   1. .vbias: pytest -m gpu tests/layernorm/test_layernorm_gpu.py (whole file);
#   2. GPT-2's step A/B/A/B again (train_abab), then GPT-2 medium's the same way (torch + tk here, tk in .vbias, ...);
#   3. .vbias's tk GPT-2 step profiled (--profile --top 160): where the step's time goes with the patch.
# Prep: rm -rf .vbias && mkdir .vbias && git archive HEAD | tar -x -C .vbias && (cd .vbias && patch -p1 <
#   ../dev/patches/layernorm_delta_bias.patch). Carry [".gpu_data", ".vbias"]. LIMIT (default 560 s).
export MAX_JOBS=8 VARIANTS=".vbias" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vbias && step ln_tests 120 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm/test_layernorm_gpu.py); tail -2 $O/ln_tests.log
train_abab .vbias
(cd $O && tar -czf train.tgz train_? && rm -rf train_?)
med() { step $1 100 python bench/bench_train.py --models gpt2-medium --kernels $2 --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -2; }
med med_a torch,tk; (cd .vbias && med med_b tk); med med_c tk; (cd .vbias && med med_d tk)
(cd $O && tar -czf med.tgz med_? && rm -rf med_?)
(cd .vbias && step prof 120 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --top 160 --out $O/prof)
grep -E "tok/s|^\| tk" $O/prof.log | head -4
(cd $O && tar -czf logs.tgz *.log prof && rm -rf *.log prof)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
