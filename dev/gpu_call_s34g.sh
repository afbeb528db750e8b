#!/usr/bin/env bash
# Session 34 (diagnostic, timing only): what cost the first form of the fused dQ convert its 21-44% (s34e). Trees,
# each 10bbbbe (main before the dQ^T halves) + one patch of dev/patches:
#   .v0   none (the baseline)
#   .vcv  attention_bwd_d64_fused_convert_v1.patch (the first form, as s34e ran it)
#   .va   diag_s34_bwd_wait_complete.patch: the staging waits for the reductions' completion instead of their reads
#   .vb   diag_s34_bwd_wait_complete_release.patch: .va + a gpu-scope release increment a block (value unused)
#   .vc   diag_s34_bwd_wait_late_release.patch: the wait for completion one block later + the increment (its
#         staging is NOT safe: timing only)
# bench_attention --graphs --rounds 2 --impls tk at the D = 64 shapes, backward, in each. (The second form, on main,
# is tested and timed by gpu_call_s34h.sh.)
# Prep: for each (T, P) above, rm -rf T && mkdir T && git archive 10bbbbe | tar -x -C T && (cd T && patch -p1 <
#   ../dev/patches/P) (.v0: no patch). Carry [".gpu_data", ".v0", ".va", ".vb", ".vc", ".vcv"]. ~3 min.
export MAX_JOBS=3 VARIANTS=".v0 .va .vb .vc .vcv" VARIANT_JOBS=3 LIMIT=${LIMIT:-300} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for tree_tag in ".v0:base" ".va:va" ".vb:vb" ".vc:vc" ".vcv:cv"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  (cd $tree && step ba_$tag 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk --shapes "$D64")
  echo "-- $tag: $(grep '^| (' $O/ba_$tag.log | grep bwd | awk -F'|' '{printf "%s%s %s; ", $2, $3, $5}')"
done
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
