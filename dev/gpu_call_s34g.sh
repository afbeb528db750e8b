#!/usr/bin/env bash
# Session 34 (issues 8 / 12): the fused dQ convert, second form (.vcv2 = HEAD + dev/patches/attention_bwd_d64_fused_convert.patch:
# a counter per 32-query half, each reduction waited for one reduction later with the staging double-buffered, the
# count looked at one more later), with the diagnostic trees of the first form's 21-44% slowdown (gpu_call_s34f.sh:
# .v0 = 10bbbbe, .va / .vb / .vc its one-line variants, .vcv the first form on 10bbbbe), in order of need:
#   1. bench_attention --graphs --rounds 2 --impls tk, D = 64 shapes, backward: main, .vcv2
#   2. tests/attention whole in .vcv2; attention_bwd_pieces.py --compare against main (dK, dV bitwise, dQ to rounding)
#   3. GPT-2's tk step, main / .vcv2 / main / .vcv2
#   4. the diagnostic trees (built in the background meanwhile), one round each; compute-sanitizer on .vcv2
# Carry [".gpu_data", ".vcv2", ".v0", ".va", ".vb", ".vc", ".vcv"].
export MAX_JOBS=10 VARIANTS=".vcv2" VARIANT_JOBS=6 LIMIT=${LIMIT:-590}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for v in .v0 .va .vb .vc .vcv; do
  (cd $v && MAX_JOBS=2 python -m tk_kernels.build --family attention > $O/build$v.log 2>&1; echo "$v build rc=$?" >> $O/build$v.log) &
done
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
ba() {  # ba TREE TAG ROUNDS
  (cd $1 && step ba_$2 40 python bench/bench_attention.py --graphs --rounds $3 --impls tk --shapes "$D64")
  echo "-- $2: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s; ", $2, $3, $5}')"
}
ba . main 2; ba .vcv2 cv2 2
step ref 60 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vcv2 && step t_cv2 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_cv2.log
grep "^FAILED" $O/t_cv2.log | head -5
(cd .vcv2 && step cmp_cv2 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp_cv2.log
tk_step tr_main1; (cd .vcv2 && tk_step tr_cv2_1); tk_step tr_main2; (cd .vcv2 && tk_step tr_cv2_2)
wait; for v in .v0 .va .vb .vc .vcv; do tail -n1 $O/build$v.log; done
ba .v0 base 1; ba .va va 1; ba .vb vb 1; ba .vc vc 1; ba .vcv cv 1
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  (cd .vcv2 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_$tool 60 "$cs" --tool $tool --error-exitcode 9 python \
     dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small)
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^compare" $O/san_$tool.log | head -3
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log tr_*)
echo "all done at $((SECONDS - t0)) s"
