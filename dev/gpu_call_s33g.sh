#!/usr/bin/env bash
# Session 33's last call (issue 8): the attention table with --rounds 3 (each case timed three times, the
# implementations' order rotated, medians), after s33f found the single-pass table's (1,16,16384,128) non-causal
# backward ratio (0.858x) not reproducible alone (1.00-1.01x twice). Carry [".gpu_data"].
export MAX_JOBS=12 LIMIT=${LIMIT:-200} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step attn3 160 python bench/bench_attention.py --graphs --rounds 3 --impls tk,cudnn,flash --json $O/attention_r3.json
grep "^| (" $O/attn3.log
(cd $O && tar -czf logs.tgz *.log *.json && rm -f *.log *.json)
echo "all done at $((SECONDS - t0)) s"
