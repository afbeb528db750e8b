#!/usr/bin/env bash
# Session 35 (issues 8 / 12), asked for an H200 (the issues' card; it ran on the held H100), with little budget left: main (the register-operand
# patches merged) GPT-2's step torch and tk (bench_train --compile graphs), then bench_attention at the D = 64 shapes
# tk vs cuDNN. No prep; carry [".gpu_data"].
export LIMIT=${LIMIT:-330}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step train 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train
grep "tok/s" $O/train.log | head -2
step ba 60 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for p in fwd bwd; do echo "-- $p: $(grep '^| (' $O/ba.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train)
echo "all done at $((SECONDS - t0)) s"
