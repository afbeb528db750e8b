#!/usr/bin/env bash
# Session 9, call F (~1.5 minutes, no kernel build: kernels=torch only): train.py's MFU beside bench_train.py's for
# shakespeare_char under CUDA graphs, now that bench_train.py builds that model without biases as train.py does.
set -o pipefail
export PYTHONUNBUFFERED=1 SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
O=${OUT:-out}; mkdir -p $O; t0=$SECONDS
python data/shakespeare_char/prepare.py --input "$SHAKESPEARE_INPUT" > /dev/null 2>&1
timeout 60 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 --kernels torch \
  --out $O/b > $O/mfu_bench.log 2>&1; echo "== bench rc=$? at $((SECONDS - t0)) s"
grep -E "^shakespeare_char " $O/mfu_bench.log
timeout 60 python train.py config/train_shakespeare_char.py --kernels=torch --compile=True --compile_mode=reduce-overhead \
  --max_iters=1000 --eval_interval=5000 --eval_iters=20 --out_dir=$O/t --overwrite=True > $O/mfu_train.log 2>&1
echo "== train.py rc=$? at $((SECONDS - t0)) s: $(grep -E '^iter (500|1000):' $O/mfu_train.log | tr '\n' ' ')"
rm -rf $O/t $O/b*; cd $O && tar czf logs.tgz --exclude logs.tgz *.log && rm -f *.log
