#!/usr/bin/env bash
# Session 4, a short last GPU call: the train step with torch.compile(mode="reduce-overhead") (CUDA graphs),
# kernels=torch vs tk, GPT-2 124M then 350M: in call 3 (default compile) the tk step had less GPU time than
# the torch step but more wall time (host-bound), which CUDA graphs remove. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-270}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
for m in gpt2 gpt2-medium; do
  timeout -s SIGABRT $(rem 150) python bench/bench_train.py --models $m --kernels torch,tk --compile graphs \
    --warmup 3 --iters 15 --out $O/train_$m > $O/bench_train_$m.log 2>&1
  echo "bench_train $m rc=$? $((SECONDS - t0)) s"; grep -E "tok/s|rror|x$" $O/bench_train_$m.log | head -8
done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null
