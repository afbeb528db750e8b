#!/usr/bin/env bash
# Session 32's second call: c_attn's bias gradient summed by the attention's Hopper backward (the prep kernel's column
# sums of dO = d b_v, the dQ convert's of dq = d b_q, d b_k = 0; csrc/qkv_bias_grad.cuh) instead of c_attn's
# backward summing qkv's whole gradient (28 us a GPT-2 layer on an H100), working tree beside .vbase (= HEAD):
#   1. tests/attention whole (the prep / convert kernels changed; the new bias tests), tests/mlp -k "linear or
#      gpt_step or graph or opcheck" (the linear op skips a detached bias's sums), the CUDA-graph training tests;
#   2. compute-sanitizer memcheck + racecheck on dev/qkv_bias_check.py (small cases);
#   3. dev/qkv_bias_check.py --time (GPT-2's layer: the backward + column sums vs the backward summing the bias);
#   4. GPT-2's step A/B/A/B (train_abab .vbase).
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=10 VARIANTS=".vbase" VARIANT_JOBS=6 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_attn 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention; tail -1 $O/t_attn.log; grep "^FAILED" $O/t_attn.log | head
step t_mlp 60 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -k "linear or gpt_step or graph or opcheck"; tail -1 $O/t_mlp.log; grep "^FAILED" $O/t_mlp.log | head
step chk 30 python dev/qkv_bias_check.py; tail -1 $O/chk.log
sanitize . 50 python dev/qkv_bias_check.py
step tm 40 python dev/qkv_bias_check.py --time; tail -5 $O/tm.log
train_abab .vbase
step t_graphs 120 python -m pytest -m gpu -q -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py; tail -1 $O/t_graphs.log; grep "^FAILED" $O/t_graphs.log | head
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? 2>/dev/null) && rm -rf *.log train_?)
echo "all done at $((SECONDS - t0)) s"
