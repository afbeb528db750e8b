#!/usr/bin/env bash
# Session 32's fourth call: the fixed CUDA-graph capture test of the fused op (s32c: it called _EagerAttentionQKV
# without the new bias argument; now it also captures the bias gradient) and the new bias tests, then GPT-2's tk
# step in the working tree (c_attn's bias gradient from the attention's row passes) and in .vbase (= HEAD),
# alternated four times (s32c: -0.08 ms on average, inside the spread; the backward alone -18.6 us a layer).
# Prep: .vbase as in gpu_call_s32b.sh. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=10 VARIANTS=".vbase" VARIANT_JOBS=6 LIMIT=${LIMIT:-470}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_qkv 60 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_qkv_gpu.py -k "capture or bias or eager_gpt or compiled_gpt or opcheck"; tail -1 $O/t_qkv.log; grep "^FAILED" $O/t_qkv.log | head
run_tk() { step $1 $2 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -1; }
run_tk new_1 120; (cd .vbase && run_tk base_1 120)
for i in 2 3 4; do run_tk new_$i 60; (cd .vbase && run_tk base_$i 60); done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log new_? base_?)
echo "all done at $((SECONDS - t0)) s"
