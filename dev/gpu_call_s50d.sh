#!/usr/bin/env bash
# Session 50, the short fallback of s50c (~2.5 min, any card; little device time was left): the MLP family only,
# compute-sanitizer memcheck + racecheck on the column-sum pair's GPU tests (the finish kernel now takes two
# matrices), then bench_mlp --skip-gemm (on an H200: issue 11's figure).
#   carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-200}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
sanitize . 60 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "column_sums_pair"
step mlp 45 python bench/bench_mlp.py --skip-gemm; grep -E "^ +[0-9]+ +[0-9]+ " $O/mlp.log
echo "all done at $((SECONDS - t0)) s"
