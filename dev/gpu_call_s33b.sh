#!/usr/bin/env bash
# Session 33's second call: issue 12's shakespeare_char loss parity on main (torch vs tk, then torch vs torch as the
# control; dropout 0.2, so the two kernels settings draw different masks), then GPT-2 medium torch vs tk (not
# measured since session 32's bias change). Carry [".gpu_data"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step parity_ctk 200 python bench/loss_parity.py --runs shakespeare_char --kernels torch,tk --out $O/parity_ctk
grep -vE "^\s*$" $O/parity_ctk.log | tail -11 | cut -c1-150
step parity_ctt 200 python bench/loss_parity.py --runs shakespeare_char --kernels torch,torch --out $O/parity_ctt
grep -vE "^\s*$" $O/parity_ctt.log | tail -11 | cut -c1-150
step med 150 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
grep "tok/s" $O/med.log | head -2
(cd $O && tar -czf logs.tgz *.log $(ls -d med parity_* 2>/dev/null) && rm -rf *.log med parity_*)
echo "all done at $((SECONDS - t0)) s"
