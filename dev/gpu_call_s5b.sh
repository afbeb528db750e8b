#!/usr/bin/env bash
# Session 5, GPU call 2 (the lead's; right after call 1, on the warm machine with its build): the
# benchmarks of main after the merges: bench/bench_attention.py (every issue shape, tk vs flash / cuDNN,
# fwd and bwd), the train step GPT-2 124M torch vs tk, compile and graphs, with torch.profiler Chrome
# traces (to find the GPU idle time of the default-mode tk step), the stream-K dW check, the LayerNorm
# host breakdown. Logs, JSON and traces tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout -s SIGABRT $(rem 150) python bench/bench_attention.py --impls tk,flash,cudnn --json $O/attention.json > $O/bench_attention.log 2>&1
echo "bench_attention rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$|Warning|warn" $O/bench_attention.log | tail -40
timeout -s SIGABRT $(rem 250) python bench/bench_train.py --models gpt2 --kernels torch,tk --compile compile,graphs \
  --warmup 3 --iters 15 --profile --trace $O/traces --out $O/train > $O/bench_train.log 2>&1
echo "bench_train rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$|Warning|_warn_once|wrote" $O/bench_train.log | tail -22
timeout -s SIGABRT $(rem 50) python dev/hopper/check_mlp_dw.py > $O/check_mlp_dw.log 2>&1; echo "check_mlp_dw rc=$? $((SECONDS - t0)) s"; tail -22 $O/check_mlp_dw.log
timeout $(rem 30) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; echo "layernorm_host rc=$?"; tail -11 $O/layernorm_host.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train traces 2>/dev/null
