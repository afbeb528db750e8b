#!/usr/bin/env bash
# Session 8's third GPU call (~9 minutes): the Hopper attention backward with dQ^T staged in the frag64
# layout (8 16-byte stores per thread instead of 32 scattered 4-byte ones and their ~100 address instructions)
# and dS^T stored with stmatrix: query-block loop 741 -> 584 SASS instructions at D = 64 causal.
# 1. compute-sanitizer memcheck on ragged shapes (D 64 / 128, causal or not); 2. the attention GPU tests (both
# paths' matrix, dropout, qkv op); 3. Nsight Compute instruction count at (16,12,1024,64) causal (was 90.1M,
# cuDNN 69.2M); 4. bench_attention.py tk / flash / cudnn at every shape; 5. the dropout overhead; 6. the GPT-2 and
# shakespeare_char train steps under CUDA graphs, torch vs tk.
source dev/gpu_call_lib.sh
for cfg in "2,3,300,64 1" "2,3,300,64 0" "1,5,200,128 1" "1,5,200,128 0"; do
  set -- $cfg
  timeout $(rem 40) compute-sanitizer --tool memcheck --error-exitcode 9 python dev/ncu_attention.py --shape $1 --causal $2 \
    --iters 2 > $O/memcheck_$1_$2.log 2>&1
  echo "== memcheck $1 causal=$2 rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$1_$2.log) at $((SECONDS - t0)) s"
done
step attn_tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/attention
echo "$(grep -E 'passed|failed' $O/attn_tests.log | tail -1)"; grep -E "^FAILED|^ERROR|Fatal" $O/attn_tests.log | head -10
timeout $(rem 60) ncu -k "regex:attention_bwd_hopper" --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section InstructionStats --section SchedulerStats --section WarpStateStats \
  python dev/ncu_attention.py --impl tk > $O/ncu_bwd.log 2>&1
grep -E "Duration|Executed Instructions  |Issue Slots Busy|No Eligible|Warp Cycles Per Issued" $O/ncu_bwd.log
step bench_attention 120 python bench/bench_attention.py --impls tk,flash,cudnn --json $O/bench_attention.json
tail -40 $O/bench_attention.log
step bench_dropout 60 python bench/bench_attention_dropout.py --json $O/bench_attention_dropout.json
tail -14 $O/bench_dropout.log
step bench_train 150 python bench/bench_train.py --models gpt2 --compile graphs --kernels torch,tk --out $O/train
grep -E "tok/s|vs torch|gpt2 " $O/bench_train.log | tail -6
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls
