#!/usr/bin/env bash
# Session 32's last call (~4 min of device time left): the GPU tests that train a GPT through model.py, whose
# c_attn now hands its bias gradient to the attention (0a99067): tests/train whole, tests/classifier, tests/mlp.
export MAX_JOBS=16 LIMIT=${LIMIT:-230}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for d in mlp classifier train; do
  step t_$d 110 python -m pytest -m gpu -q -p no:cacheprovider tests/$d
  grep -E "passed|failed|error" $O/t_$d.log | tail -1; grep "^FAILED" $O/t_$d.log | head -5
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
