#!/usr/bin/env bash
# Prepared in session 15 (issues 11 / 12): the MLP family is on since session 15, measured under CUDA graphs only
# (+2.2% gpt2, +2.3% shakespeare_char, +0.8% gpt2-medium). train.py's default compile mode (no graphs), where the
# host still launches every kernel, is checked here: the family off vs on in one process, gpt2 and shakespeare_char
# (dropout 0.2). Then the full shakespeare_char run with kernels=tk under CUDA graphs (issue 12: best val <= 1.47 in
# under 60 s from launch) with the family on.
source dev/gpu_call_lib.sh
step ab_gpt2 220 python dev/bench_train_ab.py mlp --model gpt2 --compile compile --rounds 2
grep -v -i warn $O/ab_gpt2.log | tail -3
step ab_char 130 python dev/bench_train_ab.py mlp --model shakespeare_char --compile compile --rounds 2 --dropout 0.2
grep -v -i warn $O/ab_char.log | tail -3
step char_run 150 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk \
  --compile=True --compile_mode=reduce-overhead --out_dir=/tmp/char_tk
grep -v -i warn $O/char_run.log | tail -12
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
