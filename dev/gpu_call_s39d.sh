#!/usr/bin/env bash
# Session 39 (~8 min; the call that replaces s39a / s39b after ~11 min of failed starts): two D = 128 backward designs
# beside main, each built from HEAD:
#   .vboth = main + attention_bwd_dq_late_fence.patch + attention_bwd_dqt_own_keys_first.patch (s39a's header)
#   .valt  = main + attention_bwd_dq_one_wg.patch: at D = 128 ONE consumer computes the block's whole dQ = dS K
#            (m64n128k16 x 8, A = dS^T's buffer read MN-major, B = K MN-major: 48 KB of shared reads against the two
#            m64n64 chains' 64 KB), consumer j % 2 for block j; the other only arrives on the block's dS^T barrier
#            (two ids by parity) instead of waiting at it; one 32 KB staging; dq_accum's frag64 blocks hold (queries,
#            dims) (the convert reads them so). Compiled spill-free, no C75xx warnings.
# Steps: outputs against main (dK, dV bitwise, dQ to 1e-3), bench_attention --graphs --rounds 2 --impls tk,cudnn
# main / .valt / .vboth twice alternated, then .valt's attention GPU tests with what time is left.
# carry [".gpu_data", ".valt", ".vboth"]
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".valt .vboth" VARIANT_JOBS=5 LIMIT=${LIMIT:-520}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .valt .vboth; do (cd $t && step cmp$t 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp$t.log; done
ba . main1; ba .valt alt1; ba .vboth both1; ba . main2; ba .valt alt2; ba .vboth both2
(cd .valt && step t_att 170 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
