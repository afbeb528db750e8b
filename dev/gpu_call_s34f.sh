#!/usr/bin/env bash
# Session 34 (diagnostic, timing only): why the fused dQ convert (.vcv, s34e) slowed the D = 64 backward by 21-42%.
# Trees from 10bbbbe (.v0, main before the dQ^T halves) with one change each in reduce_dq (dev-only edits, not patches: see dev/README "session 34"):
#   .va  bulk_wait_group<0> (reductions complete) instead of bulk_wait_group_read<0> before the staging
#   .vb  .va + a gpu-scope release increment per block (bulk_results_release, value unused)
#   .vc  wait for the block before last to complete (bulk_wait_group<1>; the staging is then NOT safe: timing only)
#        + the release increment
# bench_attention --graphs --rounds 2 at the D = 64 shapes, backward: .v0, .va, .vb, .vc, .vcv, main (the halves).
# Carry [".gpu_data", ".v0", ".va", ".vb", ".vc", ".vcv"].
export MAX_JOBS=3 VARIANTS=".v0 .va .vb .vc .vcv" VARIANT_JOBS=3 LIMIT=${LIMIT:-300} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for tree_tag in ".v0:base" ".va:va" ".vb:vb" ".vc:vc" ".vcv:cv" ".:main"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  (cd $tree && step ba_$tag 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk --shapes "$D64")
  echo "-- $tag"; grep "^| (" $O/ba_$tag.log | grep bwd | cut -d'|' -f2-5
done
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
