#!/usr/bin/env bash
# Session 33's fourth call (issues 9 and 12): the flagship config as a user runs it, on main (last measured in
# session 18, before sessions 19-32's kernel and step changes): config/train_shakespeare_char.py (dropout 0.2, 5000
# iterations, its evals, CUDA graphs), seeds 1337, 1, 2, alternating tk / torch, one run at a time, launch to exit
# (dev/timeline.py). The first run of each setting compiles with cold Inductor caches. Carry [".gpu_data"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
char_seeds
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
