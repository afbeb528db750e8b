#!/usr/bin/env bash
# Session 11, call 1 (~9 minutes):
# 1. dev/classifier_timeline.py at C = 768 and 1024 (issue 10: where the classifier's 0.42 ms of wall time beyond its
#    kernels' GPU time goes), alone on the GPU;
# 2. issue 9's three seeds side by side after the switch to Philox4x32-7 (session 10's two Philox-7 runs gave best val
#    1.4787 / 1.4723, the Philox-10 runs so far 1.4650-1.4772): the full config/train_shakespeare_char.py on main
#    (kernels=tk, Philox-7), on 3ad97d4 (kernels=tk, Philox-10, in .variant/) and with kernels=torch, seeds 1337, 1, 2,
#    all nine at once on the GPU (wall times shared; the losses are what counts).
# Before the call: rm -rf .variant && mkdir .variant && git archive 3ad97d4 | tar -x -C .variant
# Carry [".gpu_data", ".variant"]. If Philox-7's mean is above Philox-10's by more than the seeds' spread, revert
# ee99f47 (DROPOUT_ROUNDS = 10 and the Python reference's ROUNDS).
source dev/gpu_call_lib.sh
step cls_timeline 120 python dev/classifier_timeline.py
grep -E "^C=|largest|gaps >" $O/cls_timeline.log
(cd .variant && python -m tk_kernels.build > $O/build_variant.log 2>&1 && python data/shakespeare_char/prepare.py \
  --input "$SHAKESPEARE_INPUT" > /dev/null 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
for s in 1337 1 2; do
  timeout $(rem 420) python train.py config/train_shakespeare_char.py --kernels=tk --seed=$s --compile=True \
    --compile_mode=reduce-overhead --out_dir=$O/p7_$s --overwrite=True > $O/p7_$s.log 2>&1 &
  timeout $(rem 420) python train.py config/train_shakespeare_char.py --kernels=torch --seed=$s --compile=True \
    --compile_mode=reduce-overhead --out_dir=$O/torch_$s --overwrite=True > $O/torch_$s.log 2>&1 &
  (cd .variant && timeout $(rem 420) python train.py config/train_shakespeare_char.py --kernels=tk --seed=$s \
    --compile=True --compile_mode=reduce-overhead --out_dir=$O/p10_$s --overwrite=True > $O/p10_$s.log 2>&1) &
done
wait; echo "== runs done at $((SECONDS - t0)) s"
for r in p7 p10 torch; do for s in 1337 1 2; do echo "$r seed $s: $(grep -E '^best val' $O/${r}_$s.log)"; done; done
for r in p7 p10 torch; do for s in 1337 1 2; do echo "$r $s $(grep -E '^step (1000|2000|2500|3000|4000|5000):' $O/${r}_$s.log | awk '{print $NF, $(NF-2)}' | tr '\n' ' ')"; done; done
rm -rf $O/p7_*/ $O/p10_*/ $O/torch_*/ 2>/dev/null; cd $O && tar czf logs.tgz --exclude logs.tgz *.log && ls | grep -v logs.tgz | xargs rm -rf
