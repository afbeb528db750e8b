#!/usr/bin/env bash
# Prepared in session 44 (~4 min, any card; after s45a / s45b): replaces s44e, which found no machine.
#   1. bench_train.py's new --power on GPT-2 medium, torch and tk side by side (one process, CUDA graphs, 60 timed
#      steps): each mode's mean SM clock, board power and joules per step. s44b had the board at its 700 W limit
#      under back-to-back kernels; does the tk step run at a lower clock than torch's, and at fewer J a step?
#      Checks --power on a GPU for the first time (its CPU tests use a stand-in nvidia-smi).
#   2. the attention forward cold / hot (dev/sustained_pairs.py) with the rank-4 tensor maps' L2 promotion at 128 B
#      (.vp128) and none (.vpnone) instead of 256 B (s44c counted 25% more L2 traffic than cuDNN's), two rounds.
# Prep: for v in vp128 vpnone; do rm -rf .$v; mkdir .$v; git archive HEAD | tar -x -C .$v;
#   (cd .$v && patch -p1 < ../dev/patches/attention_maps_l2_$v.patch); done; carry [".gpu_data", ".vp128", ".vpnone"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vp128 .vpnone" VARIANT_JOBS=3 LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
step med 150 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --iters 60 --power --out $O/med
grep -E "tok/s|vs torch|gpt2-medium |SM MHz" $O/med.log | head -10
for r in 1 2; do for t in . .vp128 .vpnone; do
  (cd $t && step fw_${t#.}_$r 40 python dev/sustained_pairs.py --only "attention fwd (" --secs 2)
  echo "$t: $(grep 'us, peer' $O/fw_${t#.}_$r.log)"; done; done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med)
echo "all done at $((SECONDS - t0)) s"
