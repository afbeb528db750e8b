#!/usr/bin/env bash
# Session 21, last call (~4 min of device time left): bench/bench_mlp.py at HEAD (the GEMM table, 8192^3 included,
# and the MLP fwd+bwd against eager and torch.compile), the issue 11 figures after the retire-before-piece change.
export LIMIT=${LIMIT:-190} MAX_JOBS=16 BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step mlp $(rem 180) python bench/bench_mlp.py --json $O/bench_mlp.json
cat $O/mlp.log | grep -v "^$" | tail -40
echo "all done at $((SECONDS - t0)) s"
