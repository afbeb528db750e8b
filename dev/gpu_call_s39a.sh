#!/usr/bin/env bash
# Session 39, first call (issue 8; ~8.5 min). On an H200 run gpu_call_s36b.sh first (every open target on main, no
# H200 since session 30), then this. Two Hopper-backward patches from s38e's stall samples ((8,16,2048,128)
# non-causal on the merged staged dQ^T: the proxy fence after the staging stores 7.3% of samples, the dS^T barrier
# 5.7%, the STS.128 3.3%), each alone and together, all compiled spill-free here (no ptxas warnings):
#   .vlf   = main + dev/patches/attention_bwd_dq_late_fence.patch: the D = 128 staged dQ^T share is stored where it
#            was, its proxy fence and tensor reduce-add move after the S^T(j + 1) wait, so that the 8 STS.128 land
#            while the consumer waits anyway (the fence's MEMBAR.ALL.CTA waited for them). SASS 3112 as main.
#   .vds   = main + dev/patches/attention_bwd_dqt_own_keys_first.patch (both D): dQ^T's 4 slices over the consumer's
#            own 64 keys are issued after a barrier of its own warpgroup, then the two consumers' dS^T barrier, then
#            the other 4 (one commit group: no wait in between), so waiting for the other consumer overlaps half the
#            GEMM. SASS 3208 at D = 128 non-causal (main 3112: the second half's descriptors).
#   .vboth = .vlf + attention_bwd_dqt_own_keys_first.patch
# Steps: outputs against main; bench_attention --graphs --rounds 2 --impls tk,cudnn, main / .vlf / .vds / .vboth
# twice alternated; .vboth's attention GPU tests; memcheck / racecheck of .vboth (cut short if time is up).
# Prep: for t in .vlf .vds .vboth; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done;
#   (cd .vlf && patch -p1 < ../dev/patches/attention_bwd_dq_late_fence.patch);
#   (cd .vds && patch -p1 < ../dev/patches/attention_bwd_dqt_own_keys_first.patch);
#   (cd .vboth && patch -p1 < ../dev/patches/attention_bwd_dq_late_fence.patch &&
#    patch -p1 < ../dev/patches/attention_bwd_dqt_own_keys_first.patch)
#   carry [".gpu_data", ".vlf", ".vds", ".vboth"]
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vlf .vds .vboth" VARIANT_JOBS=4 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vlf .vds .vboth; do (cd $t && step cmp$t 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp$t.log; done
ba . main1; ba .vlf lf1; ba .vds ds1; ba .vboth both1; ba . main2; ba .vlf lf2; ba .vds ds2; ba .vboth both2
(cd .vboth && step t_att 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize .vboth 35 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
