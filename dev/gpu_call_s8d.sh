#!/usr/bin/env bash
# Session 8's fourth GPU call (the last ~8 minutes of device time). 1. the qkv GPU tests (one test fixed);
# 2. the D = 64 backward with the plain loop (shipped for non-causal) vs the pipelined loop everywhere (a
# variant build from .variant/, hb_pipelined() = true, not committed): bench_attention.py tk / cuDNN at the D = 64
# shapes, both builds; 3. the shakespeare_char step under graphs with the per-kernel profile (the attention
# backward at (64,6,256,64): 0.508 ms per step before the frag64 staging; the eager bench there is host-bound);
# 4. GPT-2 medium (350M) under graphs, torch vs tk (issue 12's second size).
source dev/gpu_call_lib.sh
(cd .variant && python -m tk_kernels.build --family attention > $O/build_variant.log 2>&1); echo "variant build rc=$? at $((SECONDS - t0)) s"
step qkv_tests 80 python -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/attention/test_attention_qkv_gpu.py
echo "$(grep -E 'passed|failed' $O/qkv_tests.log | tail -1)"; grep -E "^FAILED|^ERROR" $O/qkv_tests.log | head
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
step attn_shipped 60 python bench/bench_attention.py --impls tk,cudnn --shapes "$S"
(cd .variant && timeout $(rem 60) python bench/bench_attention.py --impls tk,cudnn --shapes "$S" > $O/attn_variant.log 2>&1); echo "== variant rc=$?"
for f in attn_shipped attn_variant; do echo "-- $f"; grep -E "^\| \(" $O/$f.log; done
step char_profile 100 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 \
  --kernels torch,tk --profile --top 8 --out $O/char
sed -n '/^model /,$p' $O/char_profile.log | grep -v "^wrote" | head -40
step medium 170 python bench/bench_train.py --models gpt2-medium --compile graphs --kernels torch,tk --out $O/medium
grep -E "tok/s|vs torch|gpt2-medium " $O/medium.log | tail -5
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
