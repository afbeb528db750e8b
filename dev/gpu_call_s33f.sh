#!/usr/bin/env bash
# Session 33: dev/attention_bwd_long.py (the non-causal D = 128 backward kernel by kernel at T = 8192 / 16384, ours
# and cuDNN's, boost clocks), then bench_attention.py at the two shapes only, twice. Carry [".gpu_data"].
export MAX_JOBS=12 LIMIT=${LIMIT:-240} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step long 90 python dev/attention_bwd_long.py; grep "^(" $O/long.log | cut -c1-230
for r in 1 2; do
  step ba$r 60 python bench/bench_attention.py --graphs --impls tk,cudnn --causal false --shapes "2,16,8192,128;1,16,16384,128"
  grep "^| (" $O/ba$r.log
done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
