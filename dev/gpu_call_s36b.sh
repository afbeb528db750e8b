#!/usr/bin/env bash
# Session 36, for an H200 (the issues' card; none lent since session 30): every open target of issues 8-12 measured
# on main in one call, ~9 min. On another card it says so and runs the same (ratios only within the call).
#   1. GPT-2's train step torch vs tk (bench_train --compile graphs; issue 12's 1.2x: s30c's 1.159x is the latest
#      H200 number) and GPT-2 medium; 2. bench_attention --graphs --rounds 2 --impls tk,cudnn at every shape
#      (issue 8: >= cuDNN at each); 3. bench_attention_dropout --graphs (issue 9); 4. bench_classifier (issue 10:
#      1.2x compile) and bench_mlp --skip-gemm (issue 11: 1.1x the best of eager / compile).
# No prep; carry [".gpu_data"].
export MAX_JOBS=16 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || echo "NOT AN H200: ratios hold within this call only"
step train 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train
grep "tok/s" $O/train.log | head -2
step ba 150 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --json $O/ba.json
for p in fwd bwd; do echo "-- $p: $(grep '^| (' $O/ba.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
step drop 40 python bench/bench_attention_dropout.py --graphs; grep -E "^[0-9]+x" $O/drop.log | grep -E " tk |cudnn"
step cls 60 python bench/bench_classifier.py --json $O/cls.json; grep -E "^ *[0-9]+ +[0-9]+ +[0-9]+ \|" $O/cls.log
step mlp 90 python bench/bench_mlp.py --skip-gemm --json $O/mlp.json; grep -E "^ *[0-9]+ +[0-9]+ \|" $O/mlp.log
step med 120 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
grep "tok/s" $O/med.log | head -2
(cd $O && tar -czf logs.tgz *.log *.json && rm -rf *.log *.json train med)
echo "all done at $((SECONDS - t0)) s"
