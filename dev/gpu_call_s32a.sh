#!/usr/bin/env bash
# Session 32's first call: the GPU tests of what session 31's last commit (42a062d, the review of the weight copies:
# AdamW's templated store_group, _copy_reason, the copies list) changed without a GPU run: tests/optim, tests/mlp,
# tests/classifier, tests/train. Then the gaps between kernels inside GPT-2's tk step (dev/trace_gaps.py over a
# --profile --trace Chrome trace): how much programmatic dependent launch could hide.
# On an H200 it first runs the H200-only items of gpu_call_s31a.sh (the CTA-pair softmax beside main, the H200
# profile of torch and tk, bench_mlp) and GPT-2 medium's torch vs tk.
# Prep: as gpu_call_s31a.sh (.vpair). Carry [".gpu_data", ".vpair"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
h200=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c H200)
if [ "$h200" = 1 ] && [ -d .vpair ]; then
  (cd .vpair && MAX_JOBS=8 python -m tk_kernels.build --family classifier > $O/build.vpair.log 2>&1); tail -n1 $O/build.vpair.log
  (cd .vpair && step cls_pair 60 python -m pytest -m gpu -q -p no:cacheprovider tests/classifier/test_classifier_gpu.py); tail -1 $O/cls_pair.log
  sx() { (cd $1 && step sx_$2 30 python dev/softmax_xent_ab.py); echo "-- $2"; grep -E "^kernel rows=2048|^op" $O/sx_$2.log; }
  sx . base1; sx .vpair pair1; sx . base2; sx .vpair pair2
  step prof 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 60 --out $O/prof
  grep -A4 "GPU ms per step" $O/prof.log
  step med 120 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
  grep "tok/s" $O/med.log | head -2
fi
for d in optim classifier mlp train; do
  step t_$d 110 python -m pytest -m gpu -q -p no:cacheprovider --durations=3 tests/$d
  grep -E "passed|failed|error" $O/t_$d.log | tail -1; grep "^FAILED" $O/t_$d.log | head -5
done
step gaps 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --trace $O/trace --out $O/gaps
grep "tok/s" $O/gaps.log | head -1
python dev/trace_gaps.py $O/trace/*tk_graphs*.json > $O/trace_gaps.log 2>&1; head -40 $O/trace_gaps.log
rm -rf $O/trace
(cd $O && tar -czf logs.tgz *.log $(ls *.json 2>/dev/null) $(ls -d prof med gaps 2>/dev/null) && rm -rf *.log *.json prof med gaps)
echo "all done at $((SECONDS - t0)) s"
