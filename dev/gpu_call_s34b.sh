#!/usr/bin/env bash
# Session 34's second call: GPT-2's step with the D = 64 dQ^T halves (tree .vdq, see gpu_call_s34a.sh) beside main,
# A/B/A/B (train_abab), and GPT-2 medium's tk step in both trees. Prep as in gpu_call_s34a.sh. Carry [".gpu_data", ".vdq"].
export MAX_JOBS=10 VARIANTS=".vdq" VARIANT_JOBS=6 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
train_abab .vdq
for tree_tag in ".:med_main" ".vdq:med_dq"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  (cd $tree && step $tag 100 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/$tag)
  grep "tok/s" $O/$tag.log | head -1
done
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? med_* 2>/dev/null) && rm -rf *.log train_? med_*)
echo "all done at $((SECONDS - t0)) s"
