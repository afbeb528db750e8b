#!/usr/bin/env bash
# Session 18, fourth GPU call (issues 9 and 12): the flagship config as a user runs it, now on CUDA graphs
# (config/train_shakespeare_char.py: compile_mode = 'reduce-overhead'), three seeds of each kernels setting, one
# run at a time, alone on the GPU, launch to exit (dev/timeline.py), alternating tk / torch.
# (s18c was a warm follow-up on s18b's machine, run from the command line: two of these runs.)
# Carry [".gpu_data"].
export MAX_JOBS=16
source dev/gpu_call_lib.sh
char_seeds
step train_char 60 python bench/bench_train.py --models shakespeare_char --kernels torch,tk --compile graphs --dropout 0.2 --out $O/train_char
tail -4 $O/train_char.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_char 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
