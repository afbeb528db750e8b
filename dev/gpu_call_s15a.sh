#!/usr/bin/env bash
# Prepared in session 14 (issues 11 / 12): the MLP family switched on in the model, checked before it is merged.
# Before the call (CPU machine; the working tree travels to the GPU):  git apply dev/patches/mlp_on.patch
# 1. loss parity, both runs (bench/loss_parity.py: GPT-2 124M and shakespeare_char, 300 steps, tk vs torch within
#    1% at every eval), in the background; 2. the GPU tests of every family and of the model / train.py with it on.
# Merge the patch if both pass (session 14 measured the step +1.8% with the family: bench/RESULTS.md).
source dev/gpu_call_lib.sh
( step lp_gpt2 330 python bench/loss_parity.py --runs gpt2 --out $O/lp_gpt2 ) &
( step lp_char 330 python bench/loss_parity.py --runs shakespeare_char --out $O/lp_char ) &
step tests 420 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/classifier tests/layernorm \
  tests/train tests/model tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
step overheads 60 python dev/mlp_overheads.py
grep -v -i warn $O/overheads.log | tail -9
wait
for r in lp_gpt2 lp_char; do grep -E "max|worst|PASS|FAIL|differ" $O/$r.log | tail -3; done
cp $O/lp_gpt2/loss_parity.json $O/lp_gpt2.json 2>/dev/null; cp $O/lp_char/loss_parity.json $O/lp_char.json 2>/dev/null
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
