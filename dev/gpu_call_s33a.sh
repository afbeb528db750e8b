#!/usr/bin/env bash
# Session 33's first call. On an H200 (issue 12's card; none lent since s30c) it runs what only an H200 can answer
# (gpu_call_lib.sh's h200_items: the CTA-pair softmax beside main, GPT-2's step torch and tk profiled, bench_mlp),
# then GPT-2 medium torch vs tk. On an H100 it runs instead:
#   - issue 12's GPT-2 loss parity on config/train_gpt2.py's schedule (bench/loss_parity.py --schedule config, the
#     new default: the first 300 steps of a real GPT-2 run), torch vs tk, then torch vs torch as the control;
#   - dev/classifier_shapes_gemm.py (the MLP family's GEMM at the classifier's shapes beside cuBLAS; never run).
# Prep: rm -rf .vpair && mkdir .vpair && git archive HEAD | tar -x -C .vpair && (cd .vpair && patch -p1 <
#   ../dev/patches/softmax_xent_pair_helper.patch). Carry [".gpu_data", ".vpair"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  h200_items
  step med 150 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
  grep "tok/s" $O/med.log | head -2
else
  step parity_tk 240 python bench/loss_parity.py --runs gpt2 --kernels torch,tk --out $O/parity_tk
  grep -vE "^\s*$" $O/parity_tk.log | tail -14 | cut -c1-150
  step parity_tt 240 python bench/loss_parity.py --runs gpt2 --kernels torch,torch --out $O/parity_tt
  grep -vE "^\s*$" $O/parity_tt.log | tail -14 | cut -c1-150
  step cls_gemm 60 python dev/classifier_shapes_gemm.py; cat $O/cls_gemm.log | cut -c1-170
fi
(cd $O && tar -czf logs.tgz *.log $(ls *.json 2>/dev/null) $(ls -d prof med parity_* 2>/dev/null) && rm -rf *.log *.json prof med parity_*)
echo "all done at $((SECONDS - t0)) s"
