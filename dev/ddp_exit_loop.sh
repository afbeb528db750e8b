#!/usr/bin/env bash
# The DDP-exit check of issue 14: runs test_train.py's 2-process gloo command N times in a row and
# counts the runs that did not exit 0 (before the fix at the end of train.py, about 1 in 3 aborted
# with "terminate called without an active exception"). Add load with e.g.
#   python -c "while True: pass" &   (one per core)
#
#   bash dev/ddp_exit_loop.sh 50 DATA_DIR      # DATA_DIR: prepared shakespeare_char (train.bin, val.bin)
set -u
N=${1:-50}; DATA=${2:?prepared shakespeare_char directory}
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK=$(mktemp -d); fails=0
for i in $(seq 1 "$N"); do
  rm -rf "$WORK/run"; mkdir -p "$WORK/run"
  (cd "$WORK/run" && PYTHONPATH="$REPO" OMP_NUM_THREADS=1 timeout 300 python -m torch.distributed.run --standalone \
    --nproc_per_node=2 "$REPO/train.py" --device=cpu --compile=False --dataset=shakespeare_char --data_dir="$DATA" \
    --out_dir=full --n_layer=2 --n_head=2 --n_embd=32 --block_size=32 --batch_size=4 --gradient_accumulation_steps=4 \
    --eval_iters=2 --eval_interval=3 --log_interval=1 --learning_rate=3e-3 --warmup_iters=2 --lr_decay_iters=6 \
    --min_lr=3e-4 --dropout=0.1 --bias=False --always_save_checkpoint=True --wandb_log=False --max_iters=6 \
    > out.txt 2> err.txt)
  rc=$?
  [ $rc -ne 0 ] && { fails=$((fails + 1)); tail -3 "$WORK/run/err.txt"; }
  echo "run $i rc=$rc"
done
echo "FAILURES $fails / $N"
