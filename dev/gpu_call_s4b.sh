#!/usr/bin/env bash
# Session 4, second GPU call (the lead's): build (families in parallel), the Hopper forward with the
# in-warpgroup overlap (accuracy + TFLOP/s), the Hopper backward (dev/hopper/check_attention_bwd.py, its GPU tests), the LayerNorm host-time breakdown, the train step with
# kernels=tk (eager then compile; a traceback after 170 s if it hangs), then the helpers' checks.
# Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
rem() { local r=$((575 - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }  # a step's limit within the call's
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout $(rem 120) python dev/hopper/check_attention.py --quick > $O/check_attention.log 2>&1; echo "check_attention rc=$? $((SECONDS - t0)) s"
grep -E "CHECKS|WRONG" $O/check_attention.log | head; grep -A8 "^forward TFLOP" $O/check_attention.log
timeout $(rem 170) python dev/hopper/check_attention_bwd.py > $O/check_attention_bwd.log 2>&1; echo "check_attention_bwd rc=$? $((SECONDS - t0)) s"
grep -E "CHECKS|WRONG|FAIL|hang|rror" $O/check_attention_bwd.log | head -20; tail -30 $O/check_attention_bwd.log
TK_ATTENTION_BWD=hopper timeout $(rem 90) python -m pytest -m gpu -q -x tests/attention/test_attention_hopper_bwd_gpu.py > $O/hopper_bwd_tests.log 2>&1; echo "hopper bwd tests: $(tail -1 $O/hopper_bwd_tests.log) $((SECONDS - t0)) s"
grep -h "^FAILED\|^E  " $O/hopper_bwd_tests.log | head -10
timeout $(rem 40) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; cat $O/layernorm_host.log | tail -12
timeout -s SIGABRT $(rem 170) python bench/bench_train.py --models gpt2 --kernels tk --compile eager,compile --warmup 3 --iters 10 --out $O/train > $O/bench_train_tk.log 2>&1
echo "bench_train tk rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$" $O/bench_train_tk.log | tail -40
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train 2>/dev/null
