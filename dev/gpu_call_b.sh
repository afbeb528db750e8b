#!/usr/bin/env bash
# The lead's last GPU call of the session: build, issue 9's three-seed shakespeare_char comparison
# (kernels=tk vs torch, dropout 0.2), then the whole-step benchmark if time is left. Logs under $OUT.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; tail -30 $O/build.log; }
echo "build $((SECONDS - t0)) s"
OUT=$O TRAIN_TIMEOUT=${TRAIN_TIMEOUT:-420} bash bench/gpu_session.sh train_seeds > $O/train_seeds.log 2>&1
echo "train_seeds $((SECONDS - t0)) s"; tail -45 $O/train_seeds.log
left=$(( ${BUDGET_S:-590} - (SECONDS - t0) ))
if [ $left -gt 100 ]; then
  timeout $((left - 10)) python bench/bench_train.py --models gpt2 --compile compile --iters 15 --out $O/train \
    > $O/bench_train.log 2>&1; echo "bench_train rc=$? $((SECONDS - t0)) s"; tail -12 $O/bench_train.log
fi
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_seeds/*.log train/*.json 2>/dev/null
