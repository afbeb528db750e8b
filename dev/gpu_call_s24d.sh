#!/usr/bin/env bash
# Session 24: where GPT-2 medium's (350M) step time goes now, torch and tk side by side (issue 12 asks 1.2x at
# 350M too; its last measurement, session 15, was 1.05x, before sessions 16-23's kernels). Carry [".gpu_data"]. ~5 min.
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step medium 420 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --profile --top 60 --out $O/medium
grep "tok/s" $O/medium.log | head -2
grep -A4 "op family" $O/medium.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log medium 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
