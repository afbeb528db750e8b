#!/usr/bin/env bash
# Session 23, last call (~5 min of device time were left): the Hopper attention backward's prep kernel zeroes
# dq_accum itself (the separate fill gone): its GPU tests, then the GPT-2 step. Carry [".gpu_data"].
export MAX_JOBS=16 LIMIT=${LIMIT:-175}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name --format=csv,noheader
step tests_attn 90 python -m pytest -m gpu -q -x -p no:cacheprovider --tb=short -rf \
  tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_qkv_gpu.py \
  tests/attention/test_attention_gpu.py -k "hopper or qkv or forward_backward_vs_float64"
tail -1 $O/tests_attn.log; grep -E "^FAILED|^ERROR" $O/tests_attn.log | head
step train 80 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train
grep "tok/s" $O/train.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
