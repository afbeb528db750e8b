#!/usr/bin/env bash
# Prepared in session 9 for the next one (~9 minutes): dev/patches/fwd_dropout_producer_draws.patch, the Hopper
# forward's dropout keep bits drawn by the PRODUCER warpgroup (a new `fill` hook of include/pipeline/
# producer_consumer.cuh) into a side buffer of each ring slot, instead of by the consumers on their softmax's
# critical path (issue 9: the dropout overhead, +36.4% fwd+bwd at (16,12,1024,64) under graphs in session 9, target
# <= 10%). CPU-checked in session 9: the tile-bits CPU test (the fill as the consumers read it, equal to
# dropout_keep; a swapped word fails it), ptxas no spills (producer 64 / consumers 224 registers), the p = 0
# forward's, the backward's and the MLP GEMM's SASS unchanged. Not run on a GPU.
# Run from main's root with the patch NOT applied (this script applies it to the device's copy), carry
# [".gpu_data", ".variant"] after `rm -rf .variant && mkdir .variant && git archive HEAD tk_kernels bench | tar -x -C .variant`.
# Merge (git apply + commit) only if the tests pass and the overhead drops.
# `bash dev/gpu_call_s10b.sh both` also applies bwd_dropout_producer_draws.patch (the same for the D = 64 Hopper
# backward, on top of the forward's: its fill hook).
patches="fwd_dropout_producer_draws"; [ "$1" = both ] && patches="$patches bwd_dropout_producer_draws"
for pt in $patches; do
  git apply dev/patches/$pt.patch 2>/dev/null || patch -p1 < dev/patches/$pt.patch || { echo "PATCH $pt FAILED"; exit 1; }
  echo "applied $pt"
done
source dev/gpu_call_lib.sh
(cd .variant && python -m tk_kernels.build --family attention > $O/build_variant.log 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
for sc in "2,3,300,64 1" "1,5,200,128 0"; do
  set -- $sc
  timeout $(rem 40) compute-sanitizer --tool memcheck --error-exitcode 9 python - $1 $2 > $O/memcheck_$1_$2.log 2>&1 <<'PY'
import sys, torch, tk_kernels
B, H, T, D = map(int, sys.argv[1].split(",")); causal = sys.argv[2] == "1"
q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
for _ in range(2):
    o = tk_kernels.attention(q, k, v, causal=causal, dropout_p=0.2)
    o.sum().backward()
torch.cuda.synchronize(); print("ok")
PY
  echo "== memcheck dropout $1 causal=$2 rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$1_$2.log)"
done
step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_dropout_gpu.py \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py
timeout $(rem 60) python -m pytest -q -p no:cacheprovider tests/attention/test_attention_dropout_cpu.py > $O/tests_cpu.log 2>&1
echo "== cpu tile-bits tests rc=$? $(tail -1 $O/tests_cpu.log)"
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
step drop_new 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn
(cd .variant && timeout $(rem 60) python bench/bench_attention_dropout.py --graphs --impls tk,cudnn > $O/drop_main.log 2>&1); echo "== main rc=$?"
for f in drop_new drop_main; do echo "-- $f"; grep -E "^[0-9]+x|overhead" $O/$f.log; done
step char 120 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 --kernels torch,tk --out $O/char
grep -E "^shakespeare_char " $O/char.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null && ls | grep -v logs.tgz | xargs rm -rf
