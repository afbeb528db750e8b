#!/usr/bin/env bash
# Session 21, last call (~4.5 min of device time left): the GELU GEMMs on an epilogue warpgroup, never run before.
#   main   = HEAD
#   .v192  = HEAD + dev/patches/mlp_epilogue_warpgroup.patch: for the GELU / GELU' GEMMs a fourth warpgroup finishes
#            each staged tile while the consumers run the next mainloop (no pieces); 512 threads launched at 128
#            registers, so 128 x 192 tiles (m64n192 wgmma: the m64n256 one needs 154 registers), a 4-stage ring; the
#            tile's bias reaches the consumers through shared memory (written by the epilogue warpgroup)
#   .v192g = HEAD + dev/patches/mlp_epilogue_warpgroup_gelu_only.patch: the same for GELU only; GELU' keeps main's
#            kernel (its SASS is identical to main's), timed to see which half of the change pays
# Prep: mkdir .v192 && git archive HEAD | tar -x -C .v192 && (cd .v192 && patch -p1 < ../dev/patches/mlp_epilogue_warpgroup.patch) &&
#   mkdir .v192g && git archive HEAD | tar -x -C .v192g && (cd .v192g && patch -p1 < ../dev/patches/mlp_epilogue_warpgroup_gelu_only.patch)
# Carry [".gpu_data", ".v192", ".v192g"].
export LIMIT=${LIMIT:-200} MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".v192 .v192g" VARIANT_JOBS=5 VARIANT_BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 30 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
(cd .v192 && step save_v192 30 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_v192.pt)
echo "-- v192 vs main:"; python dev/compare_saved.py $O/saved_main.pt $O/saved_v192.pt
(cd .v192 && step tests 80 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf -x tests/mlp) &
SAN_SECS=80 san .v192 v192 memcheck racecheck
# the timings beside the correctness runs would be skewed: wait for them
wait; echo "correctness done at $((SECONDS - t0)) s"; echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^E  " $O/tests.log | head -8
epi . main; epi .v192 v192; epi .v192g v192g; epi . main2; epi .v192 v192_2; epi .v192g v192g_2
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
