#!/usr/bin/env bash
# Session 14, issue 11 / 12: the MLP family on vs as shipped (off) in ONE process, ABAB (dev/bench_train_ab.py),
# GPT-2 124M under CUDA graphs, after the weight gradients moved to cuBLAS (s14c).
source dev/gpu_call_lib.sh
step ab 300 python dev/bench_train_ab.py mlp --model gpt2 --compile graphs --rounds 2
grep -v -i warn $O/ab.log | tail -9
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
