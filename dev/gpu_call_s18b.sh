#!/usr/bin/env bash
# Session 18, second GPU call (issues 8 and 12), prepared on the CPU machine.
#   main     = the working tree: the causal D = 128 forward on the dynamic walk from T = 2048 on (attention.h's
#              hopper_fwd_dynamic_walk; its kernel now always has producer 40 / consumers 232 registers: ptxas -v
#              0 spills in all 16 instantiations), a many-items causal forward test, and
#              config/train_shakespeare_char.py on CUDA graphs (compile_mode = 'reduce-overhead').
#   .variant = HEAD before these (4ba905f): the A/B baseline of the D = 128 benchmark.
# Prep (CPU machine): rm -rf .variant && mkdir .variant && git archive 4ba905f | tar -x -C .variant
# Carry [".gpu_data", ".variant"].
export MAX_JOBS=12 VARIANTS=".variant" VARIANT_JOBS=4
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
A="tests/attention/test_attention_gpu.py tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py"
step tests_main 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $A &
san() {  # tool heads seqlens
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 280) $cs --tool $1 --error-exitcode 9 python bench/sanitize_attention.py \
    --paths hopper --batch 1 --heads $2 --seqlens $3 --head-dims 128 --dtypes bf16 > $O/san_$1.log 2>&1
  echo "== $1 D=128 heads $2 T $3 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$1.log)"
}
san racecheck 10 2100 & san memcheck 24 300,2100 &
wait; echo "correctness done at $((SECONDS - t0)) s"
echo "tests_main: $(tail -1 $O/tests_main.log)"; grep -E "^FAILED|^ERROR" $O/tests_main.log | head -10
grep -E "many_items" $O/tests_main.log | head -4
S="8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128;16,12,1024,128"
b() { (cd $1 && step bench_$2 45 python bench/bench_attention.py --graphs --impls tk,cudnn --causal true --shapes "$S" --json $O/bench_$2.json); }
b . new; b .variant old; b . new2; b .variant old2
for n in new old new2 old2; do echo "-- $n"; grep -E "causal=" $O/bench_$n.log | head -5; done
# the flagship config as a user runs it (now on CUDA graphs), launch to exit, tk then torch
step char_tk 110 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk
tail -3 $O/char_tk.log
step char_torch 110 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=torch
tail -3 $O/char_torch.log
step train 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 30 --out $O/train
tail -40 $O/train.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
