#!/usr/bin/env bash
# Session 11, call 4 (~4 minutes), main after the session's changes: the attention dropout's overhead on Philox-10
# beside cuDNN and flash (issue 9's table, CUDA graphs), and GPT-2 medium (350M), torch vs tk under CUDA graphs
# (issue 8: tk must not be slower; issue 12: 1.2x).
source dev/gpu_call_lib.sh
step drop 90 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/dropout.json
sed -n '/^| shape/,$p' $O/drop.log | head -12
step medium 200 python bench/bench_train.py --models gpt2-medium --compile graphs --kernels torch,tk --out $O/medium
sed -n '/^model /,$p' $O/medium.log | head -4
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
