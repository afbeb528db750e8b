#!/usr/bin/env bash
# Session 33's third call. On an H200 (issue 12's card): gpu_call_lib.sh's h200_items (the CTA-pair softmax beside
# main, GPT-2's step torch and tk profiled, bench_mlp), then issue 8's attention table. On an H100: issue 8's and
# issue 9's tables on main (the last full ones: s24f, H100). Prep (H200 items): the .vpair tree as in gpu_call_s33a.sh.
# Carry [".gpu_data", ".vpair"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
h200_items
step attn 300 python bench/bench_attention.py --graphs --impls tk,cudnn,flash --json $O/attention.json
tail -40 $O/attn.log | grep -E "^\||TFLOP|ours" | head -45
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  step drop 120 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/dropout.json
  tail -12 $O/drop.log
fi
(cd $O && tar -czf logs.tgz *.log $(ls *.json 2>/dev/null) $(ls -d prof 2>/dev/null) && rm -rf *.log *.json prof)
echo "all done at $((SECONDS - t0)) s"
