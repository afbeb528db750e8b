#!/usr/bin/env bash
# Session 34 (issues 8 / 12): the fused dQ convert, second form (.vcv2 = HEAD + dev/patches/attention_bwd_d64_fused_convert.patch:
# a counter per 32-query half, each reduction waited for one reduction later with the staging double-buffered, the
# count looked at one more later), with the diagnostic trees of the first form's 21-42% slowdown (gpu_call_s34f.sh:
# .v0 = 10bbbbe, .va / .vb / .vc its one-line variants, .vcv the first form on 10bbbbe).
#   1. tests/attention whole in .vcv2; attention_bwd_pieces.py --compare against main (dK, dV bitwise, dQ to
#      rounding); compute-sanitizer memcheck and racecheck on the small cases
#   2. bench_attention --graphs --impls tk, D = 64 shapes, backward: main, .vcv2 (--rounds 2), .v0 .va .vb .vc .vcv (1)
#   3. GPT-2's tk step, main / .vcv2 / main / .vcv2
# Carry [".gpu_data", ".vcv2", ".v0", ".va", ".vb", ".vc", ".vcv"].
export MAX_JOBS=4 VARIANTS=".vcv2 .v0 .va .vb .vc .vcv" VARIANT_JOBS=2 LIMIT=${LIMIT:-590}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 60 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
(cd .vcv2 && step t_cv2 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_cv2.log
grep "^FAILED" $O/t_cv2.log | head -5
(cd .vcv2 && step cmp_cv2 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -4 $O/cmp_cv2.log
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  (cd .vcv2 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_$tool 60 "$cs" --tool $tool --error-exitcode 9 python \
     dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small)
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^compare" $O/san_$tool.log | head -3
done
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for tree_tag in ".:main" ".vcv2:cv2" ".v0:base" ".va:va" ".vb:vb" ".vc:vc" ".vcv:cv"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  rounds=1; case $tag in main|cv2) rounds=2;; esac
  (cd $tree && step ba_$tag 40 python bench/bench_attention.py --graphs --rounds $rounds --impls tk --shapes "$D64")
  echo "-- $tag: $(grep '^| (' $O/ba_$tag.log | grep bwd | awk -F'|' '{printf "%s%s %s; ", $2, $3, $5}')"
done
tk_step tr_main1; (cd .vcv2 && tk_step tr_cv2_1); tk_step tr_main2; (cd .vcv2 && tk_step tr_cv2_2)
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log tr_*)
echo "all done at $((SECONDS - t0)) s"
