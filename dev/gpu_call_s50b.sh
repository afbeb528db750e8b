#!/usr/bin/env bash
# Session 50, second call (~8 min, an H200 wanted; on a warm machine after s50a the build is already there):
#   1. bench_train gpt2-medium and gpt2, torch / tk with CUDA graphs, profiled (issue 12: medium 1.155x on the H200
#      in s47g, 1.2x asked; the op families and largest kernels say where tk still loses)
#   2. bench_attention --graphs (issue 8 on this card) and bench_attention_dropout --graphs (issue 9), if time is left
#   carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS=" " LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
prof 350 gpt2-medium 200 60
prof 124 gpt2 120 40
ba . h200
step drop 60 python bench/bench_attention_dropout.py --graphs; grep -E "^\|" $O/drop.log | head -12
(cd $O && tar -czf logs.tgz *.log prof_* 2>/dev/null && rm -rf *.log prof_*)
echo "all done at $((SECONDS - t0)) s"
