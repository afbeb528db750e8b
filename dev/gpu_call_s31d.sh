#!/usr/bin/env bash
# Session 31's last call (~7 min): after the 16-bit weight copies (34da9b4 + its header), the GPU test directories
# that s31b / s31c ran only in part (tests/mlp whole, tests/train whole: train.py now keeps copies), then, if the card
# is an H200 (issue 12's card), GPT-2's step A/B/A/B against .vbase (= 9d82fe6, before the copies).
# Prep: rm -rf .vbase && mkdir .vbase && git archive 9d82fe6 | tar -x -C .vbase. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
h200=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c H200)
if [ "$h200" = 1 ]; then train_abab .vbase; fi
for d in mlp train; do
  step t_$d 110 python -m pytest -m gpu -q -p no:cacheprovider tests/$d; tail -1 $O/t_$d.log; grep "^FAILED" $O/t_$d.log | head -5
done
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? 2>/dev/null) && rm -rf *.log train_?)
echo "all done at $((SECONDS - t0)) s"
