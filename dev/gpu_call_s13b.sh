#!/usr/bin/env bash
# Session 13, call 2: main with the Hopper classifier path removed (back to 22ba146's family):
# 1. classifier GPU tests; 2. dev/classifier_subchunks.py (the chunk loop with L2-sized sub-chunks beside the shipped
# loop); 3. where a GPT-2 124M step's time goes now: bench_train.py torch vs tk under CUDA graphs with the per-family
# profile and the top kernels, and tk with the attention family on PyTorch (TK_TORCH_FAMILIES=attention).
source dev/gpu_call_lib.sh
step tests_cls 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR" $O/tests_cls.log | head
step subchunks 150 python dev/classifier_subchunks.py
cat $O/subchunks.log | grep -v Warning
step train 200 python bench/bench_train.py --models gpt2 --compile graphs --kernels torch,tk --profile --top 25 --out $O/train
sed -n '/^model /,$p' $O/train.log | head -8
step train_noattn 120 env TK_TORCH_FAMILIES=attention python bench/bench_train.py --models gpt2 --compile graphs --kernels tk \
  --profile --out $O/train_noattn
sed -n '/^model /,$p' $O/train_noattn.log | head -4
cp $O/train/*.json $O/ 2>/dev/null; cp $O/train_noattn/bench_train.json $O/bench_train_noattn.json 2>/dev/null
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
