#!/usr/bin/env bash
# Session 39, first call (issue 8; ~6 min). On an H200 run gpu_call_s36b.sh first (every open target on main, no H200
# since session 30), then this.
#   .vlf = main + dev/patches/attention_bwd_dq_late_fence.patch: the D = 128 backward's staged dQ^T share is stored
#          where it was, but its proxy fence and tensor reduce-add move after the S^T(j + 1) wait, so that the 8
#          STS.128 land while the consumer waits anyway (s38e: the fence right after them, whose MEMBAR.ALL.CTA waits
#          for them, was the largest stall, 7.3% of samples). Spill-free; SASS 3112 instructions as main.
# Steps: outputs against main; bench_attention --graphs --rounds 2 --impls tk,cudnn, main / .vlf twice alternated;
# .vlf's attention GPU tests; memcheck / racecheck.
# Prep: rm -rf .vlf && mkdir .vlf && git archive HEAD | tar -x -C .vlf &&
#   (cd .vlf && patch -p1 < ../dev/patches/attention_bwd_dq_late_fence.patch); carry [".gpu_data", ".vlf"]
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vlf" VARIANT_JOBS=8 LIMIT=${LIMIT:-500}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vlf && step cmp 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp.log
ba() {  # ba TREE TAG
  (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn)
  echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
}
ba . main1; ba .vlf lf1; ba . main2; ba .vlf lf2
(cd .vlf && step t_att 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize .vlf 40 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
