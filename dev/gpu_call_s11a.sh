#!/usr/bin/env bash
# For session 11 (~8 minutes): issue 9's three seeds, side by side, after the switch to Philox4x32-7 (session 10's two
# Philox-7 runs gave best val 1.4787 / 1.4723, the Philox-10 runs so far 1.4650-1.4772): the full
# config/train_shakespeare_char.py with kernels=tk on main (Philox-7) and on 3ad97d4 (Philox-10, in .variant/),
# seeds 1337, 1, 2, all six at once on the GPU (wall times shared; the losses are what counts).
# Before the call: rm -rf .variant && mkdir .variant && git archive 3ad97d4 | tar -x -C .variant
# Carry [".gpu_data", ".variant"]. If Philox-7's mean is above Philox-10's by more than the seeds' spread, revert
# ee99f47 (DROPOUT_ROUNDS = 10 and the Python reference's ROUNDS).
source dev/gpu_call_lib.sh
(cd .variant && python -m tk_kernels.build > $O/build_variant.log 2>&1 && python data/shakespeare_char/prepare.py \
  --input "$SHAKESPEARE_INPUT" > /dev/null 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
for s in 1337 1 2; do
  timeout $(rem 400) python train.py config/train_shakespeare_char.py --kernels=tk --seed=$s --compile=True \
    --compile_mode=reduce-overhead --out_dir=$O/p7_$s --overwrite=True > $O/p7_$s.log 2>&1 &
  (cd .variant && timeout $(rem 400) python train.py config/train_shakespeare_char.py --kernels=tk --seed=$s \
    --compile=True --compile_mode=reduce-overhead --out_dir=$O/p10_$s --overwrite=True > $O/p10_$s.log 2>&1) &
done
wait; echo "== runs done at $((SECONDS - t0)) s"
for r in p7 p10; do for s in 1337 1 2; do echo "$r seed $s: $(grep -E '^best val' $O/${r}_$s.log)"; done; done
for r in p7 p10; do for s in 1337 1 2; do echo "$r $s $(grep -E '^step (1000|2000|2500|3000):' $O/${r}_$s.log | awk '{print $NF, $(NF-2)}' | tr '\n' ' ')"; done; done
rm -rf $O/p7_* $O/p10_*/ 2>/dev/null; cd $O && tar czf logs.tgz --exclude logs.tgz *.log && ls | grep -v logs.tgz | xargs rm -rf
