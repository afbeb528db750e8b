#!/usr/bin/env bash
# Session 43, second call (~5 min, any card; on a warm machine after s43a): where GPT-2 medium's tk step still loses
# to torch (issue 12: 1.177x on the H100 in session 42, 1.2x asked). bench_train --profile --top 60 for gpt2-medium,
# torch and tk (per op family and the 60 largest kernels), then the same for GPT-2 124M, and bench_mlp at the
# model's widths (issue 11: 1.123 / 1.086 / 1.025x in session 42).
#   carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS=" " LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
prof 350 gpt2-medium 200 60
prof 124 gpt2 120 60
step mlp 90 python bench/bench_mlp.py --skip-gemm --profile; grep -E "^ +[0-9]+ +[0-9]+ \|" $O/mlp.log | head -4
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log prof_*)
echo "all done at $((SECONDS - t0)) s"
