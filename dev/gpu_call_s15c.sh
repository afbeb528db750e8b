#!/usr/bin/env bash
# Session 15 (issues 11 / 12), after s15b: the GPT-2 124M step with the MLP family off and on in one process,
# alternated (its op's overheads cut), bench_mlp at the three widths, and the overheads' micro-timings.
source dev/gpu_call_lib.sh
step ab 300 python dev/bench_train_ab.py mlp --model gpt2 --compile graphs --rounds 2
grep -v -i warn $O/ab.log | tail -4
step mlp 200 python bench/bench_mlp.py --skip-gemm
grep -v -i warn $O/mlp.log | tail -8
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
