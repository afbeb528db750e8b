#!/usr/bin/env bash
# Prepared in session 19: the flagship config (issues 9 / 12: best val loss <= 1.47, under 60 s from launch) on the
# tree gpu_call_s20b.sh picked, three seeds, one run at a time, alone on the GPU.
#   TREE (default .variant4): the tree to run; prep as in gpu_call_s20b.sh. Carry [".gpu_data", "$TREE"].
TREE=${TREE:-.variant4}
export MAX_JOBS=16
source dev/gpu_call_lib.sh
for seed in 1337 1 2; do
  (cd $TREE && step char_$seed 170 python dev/timeline.py -- python train.py config/train_shakespeare_char.py \
     --kernels=tk --seed=$seed --out_dir=$O/ck_$seed)
  echo "seed $seed: $(grep 'best val loss' $O/char_$seed.log | tail -1) | $(tail -1 $O/char_$seed.log)"
  rm -rf $O/ck_$seed
done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
