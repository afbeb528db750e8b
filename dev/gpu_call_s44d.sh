#!/usr/bin/env bash
# Session 44's fourth call (~6 min, any card): s44c found our attention forward 0.90x cuDNN under sustained load
# (even in short bursts) with fewer instructions and shared-memory wavefronts than cuDNN's but ~100 MB (25%) more L2
# traffic. Does the walk's L2 behaviour set its power? Trees (prep below): .vstatic (the static walk, no counter),
# .vg16 / .vg66 (16 / 66 heads a causal group instead of 33 at (16,16,1024,64)); each timed cold and hot.
# Prep: for v in vstatic vg16 vg66; do rm -rf .$v; mkdir .$v; git archive HEAD | tar -x -C .$v;
#   (cd .$v && patch -p1 < ../dev/patches/attention_fwd_walk_$v.patch); done; carry [".gpu_data", ".vstatic", ".vg16", ".vg66"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vstatic .vg16 .vg66" VARIANT_JOBS=2 LIMIT=${LIMIT:-480}
source dev/gpu_call_lib.sh
step sp 110 python dev/sustained_pairs.py; grep -E "us, peer|Error|error" $O/sp.log | head -20
for r in 1 2; do for t in . .vstatic .vg16 .vg66; do
  (cd $t && step fw_${t#.}_$r 40 python dev/sustained_pairs.py --only "attention fwd (" --secs 2)
  echo "$t: $(grep 'us, peer' $O/fw_${t#.}_$r.log)"; done; done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
