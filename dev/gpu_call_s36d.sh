#!/usr/bin/env bash
# Session 36 (issue 8), the D = 128 non-causal backward persistent (dev/patches/attention_bwd_d128_persistent.patch):
# one CTA per SM walks the key blocks with the one K / V buffer, so the next block's K, V and first Q / dO load while
# the consumers store dK, dV, and no CTA starts or exits between key blocks. By the s36c times the non-causal D = 128
# backward costs ~15-22 us per key block per SM beyond its query blocks (101.6 us a key block at T = 2048, 655 at
# 16384: 2.47 us a query block): 0.90x cuDNN at (8,16,2048,128), 0.97x at (1,16,16384,128).
#   bash dev/gpu_call_s36d.sh       bench_attention D = 128 in main / .vp128 / main / .vp128, the backward's outputs
#                                   compared with main's (dK, dV bitwise), pytest -m gpu tests/attention in .vp128
#   bash dev/gpu_call_s36d.sh san   compute-sanitizer memcheck + racecheck on the cases with several key blocks a CTA
# Prep: rm -rf .vp128 && mkdir .vp128 && git archive HEAD | tar -x -C .vp128 &&
#       (cd .vp128 && patch -p1 < ../dev/patches/attention_bwd_d128_persistent.patch); carry [".gpu_data", ".vp128"].
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vp128" VARIANT_JOBS=8 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if [ "$1" = san ]; then
  step ref_m 60 python dev/attention_bwd_pieces.py --save /tmp/ref_many.pt --small --many; tail -1 $O/ref_m.log
  sanitize .vp128 240 python dev/attention_bwd_pieces.py --compare /tmp/ref_many.pt --small --many
  tail -4 $O/san_memcheck.log
else
  D128="8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128"
  ba() {  # ba TREE TAG
    (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$D128")
    for p in fwd bwd; do echo "-- $2 $p: $(grep '^| (' $O/ba_$2.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
  }
  ba . main1; ba .vp128 p1; ba . main2; ba .vp128 p2
  step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
  (cd .vp128 && step cmp 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -4 $O/cmp.log
  (cd .vp128 && step t_att 260 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
  grep "^FAILED" $O/t_att.log | head -5
fi
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
