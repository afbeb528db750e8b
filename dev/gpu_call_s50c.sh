#!/usr/bin/env bash
# Session 50, third call (~6 min; an H200 wanted for the issue figures, any card for the sanitizers): main 7af27dd
# (the column-sum pair merged).
#   1. compute-sanitizer memcheck + racecheck on the column sums' GPU tests (the finish kernel now takes two matrices)
#   2. bench_mlp, GEMM table included (issue 11)
#   3. bench_train gpt2-medium,gpt2 torch / tk with CUDA graphs, no profiler (issue 12's figures)
#   carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS=" " LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
sanitize . 100 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "column_sums"
step mlp 120 python bench/bench_mlp.py --json $O/bench_mlp.json --png $O/bench_mlp.png; grep -E "^ +[0-9]+ +[0-9]+ " $O/mlp.log | head -30
step train 200 python bench/bench_train.py --models gpt2-medium,gpt2 --kernels torch,tk --compile graphs --out $O/train
grep -A6 "^model " $O/train.log
(cd $O && tar -czf logs.tgz *.log train 2>/dev/null && rm -rf *.log train)
echo "all done at $((SECONDS - t0)) s"
