#!/usr/bin/env bash
# Session 33's first call. On an H200 (issue 12's card; none lent since s30c) it runs what only an H200 can answer:
#   - the CTA-pair softmax (dev/patches/softmax_xent_pair_helper.patch, tree .vpair) beside main: its classifier GPU
#     tests, then dev/softmax_xent_ab.py alternated (session 29: no gain on the H100, where the kernel runs at DRAM's
#     rate; session 28's MUFU analysis says the H200 is where it can gain);
#   - GPT-2's step torch and tk profiled on the H200 (bench_train --profile --top 60): issue 12's figure with the
#     weight copies (s31) and c_attn's bias from the attention (s32), and where the H200 step goes;
#   - GPT-2 medium torch vs tk, and issue 11's MLP table (bench_mlp.py --skip-gemm).
# On any card: GPT-2 medium torch vs tk (not measured since s32's bias change).
# Prep: rm -rf .vpair && mkdir .vpair && git archive HEAD | tar -x -C .vpair && (cd .vpair && patch -p1 <
#   ../dev/patches/softmax_xent_pair_helper.patch). Carry [".gpu_data", ".vpair"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
h200_items
step med 150 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
grep "tok/s" $O/med.log | head -2
(cd $O && tar -czf logs.tgz *.log $(ls *.json 2>/dev/null) $(ls -d prof med 2>/dev/null) && rm -rf *.log *.json prof med)
echo "all done at $((SECONDS - t0)) s"
