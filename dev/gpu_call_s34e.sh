#!/usr/bin/env bash
# Session 34 (issues 8 / 12), the correctness gate of two D = 64 backward patches beside main, one call:
#   .vdq = HEAD + dev/patches/attention_bwd_d64_dq_halves.patch (dQ^T split by queries: half the reduce traffic)
#   .vcv = HEAD (10bbbbe) + dev/patches/attention_bwd_d64_fused_convert_v1.patch (the last contributor converts dq_accum to dq)
# For each: tests/attention whole, dev/attention_bwd_pieces.py --compare against main's outputs (dK, dV bitwise,
# dQ to rounding), compute-sanitizer on the small cases (memcheck and racecheck: .vdq; memcheck, then racecheck
# if time is left: .vcv); then bench_attention --rounds 3 --graphs at the D = 64 shapes, backward, in all three.
# Prep: .vdq as in gpu_call_s34a.sh; rm -rf .vcv && mkdir .vcv && git archive HEAD | tar -x -C .vcv &&
#   (cd .vcv && patch -p1 < ../dev/patches/attention_bwd_d64_fused_convert_v1.patch). Carry [".gpu_data", ".vdq", ".vcv"].
export MAX_JOBS=6 VARIANTS=".vdq .vcv" VARIANT_JOBS=5 LIMIT=${LIMIT:-590} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 60 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
for v in vcv vdq; do
  (cd .$v && step t_$v 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_$v.log
  grep "^FAILED" $O/t_$v.log | head -5
  (cd .$v && step cmp_$v 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -6 $O/cmp_$v.log
done
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san_small() {  # san_small TREE TOOL
  (cd .$1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_$2_$1 60 "$cs" --tool $2 --error-exitcode 9 python \
     dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small)
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^ran" $O/san_$2_$1.log | head -3
}
san_small vcv memcheck
san_small vdq racecheck
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for tree_tag in ".:main" ".vcv:cv" ".vdq:dq"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  (cd $tree && step ba_$tag 45 python bench/bench_attention.py --graphs --rounds 3 --impls tk,cudnn --shapes "$D64")
  echo "-- $tag"; grep "^| (" $O/ba_$tag.log | grep bwd
done
san_small vdq memcheck
san_small vcv racecheck
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
