#!/usr/bin/env bash
# Session 15: the MLP family, now on, in the two other benchmark models' steps (gpt2 measured in s15c: +2.2%):
# shakespeare_char (C = 384, dropout 0.2 as its config) and GPT-2 medium (C = 1024), family off vs on, one process
# each, alternated.
source dev/gpu_call_lib.sh
step char 140 python dev/bench_train_ab.py mlp --model shakespeare_char --compile graphs --rounds 2 --dropout 0.2
grep -v -i warn $O/char.log | tail -3
step medium 200 python dev/bench_train_ab.py mlp --model gpt2-medium --compile graphs --rounds 1
grep -v -i warn $O/medium.log | tail -3
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
