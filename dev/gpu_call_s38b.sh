#!/usr/bin/env bash
# Session 38, second call (issue 8): Hopper-backward patches beside main, from the stall samples of s38a (Nsight
# Compute, (8,16,2048,128) non-causal: the consumers' top stalls were the loop head waiting for the dQ^T reductions to
# release their registers (long_sb 8.2% of samples) and the lg queue under the 8 red.global.add (4.2%), then the first
# use of the block's lse2 right after its shared loads (short_sb 5.2%) and of Delta (1.9%)). ~8 min; then
# gpu_call_s38c.sh TREE on the same machine (the sanitizers of the tree to merge).
#   .vcols = main + dev/patches/attention_bwd_early_columns.patch: lse2 read into registers before dP^T's issue,
#            Delta before the dP^T wait at D = 64 (at D = 128 it spilled 32 B there, so it stays after the wait)
#   .vpw   = .vcols + dev/patches/attention_bwd_dq_warp_bulk.patch (D = 128): the consumers stage their dQ^T partial
#            in shared memory (8 x 16-byte stores a thread, frag64 order) and each warp adds its own part (8 runs of
#            512 B) by bulk reductions its lane 0 issues after a proxy fence and __syncwarp: no barrier between warps,
#            registers as main (spill-free); lane 0 waits for the previous block's reductions to have read the
#            staging before the warp writes it again. (cuDNN's kernel stages its dQ: STS.128 + UTMAREDG, s38a.)
#   .vpw2  = .vpw + dev/patches/attention_bwd_dq_warp_bulk_d64.patch: the same at D = 64 (8 KB a consumer, 4 runs a warp)
#   .vpt   = .vpw + dev/patches/attention_bwd_dq_warp_tma.patch (D = 128): each warp's share is one box of a tensor map
#            over dq_accum (128 floats x 4 warps x rows of 2 KB; box 128 x 1 x 8), stored densely in shared memory and
#            added by ONE cp.reduce.async.bulk.tensor per warp and block (cuDNN: 8 UTMAREDG a block, s38a) instead of 8
#            bulk reductions each wrapped in ptxas's ELECT loop: 3112 SASS instructions against .vpw's 3320 (main 3456).
#   (dev/patches/attention_bwd_dq_writer_warp.patch, the form with a writer warp in the producer warpgroup as in
#   FlashAttention-3, is not timed: its producer thread spills 64 B at 24 registers, its consumers 16 B at 232.)
# Steps: outputs against main (dK, dV bitwise; dQ to rounding); bench_attention --graphs --rounds 2 --impls tk,cudnn,
# main / .vcols / .vpw / .vpt twice alternated (.vpw2 not timed this time: device time), then all of .vpt's attention
# GPU tests.
# Prep: rm -rf .vcols .vpw .vpw2; mkdir .vcols && git archive HEAD | tar -x -C .vcols &&
#   (cd .vcols && patch -p1 < ../dev/patches/attention_bwd_early_columns.patch); cp -r .vcols .vpw;
#   (cd .vpw && patch -p1 < ../dev/patches/attention_bwd_dq_warp_bulk.patch);
#   cp -r .vpw .vpt; (cd .vpt && patch -p1 < ../dev/patches/attention_bwd_dq_warp_tma.patch)
#   carry [".gpu_data", ".vcols", ".vpw", ".vpt"]
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vcols .vpw .vpt" VARIANT_JOBS=4 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vcols .vpw .vpt; do (cd $t && step cmp$t 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp$t.log; done
ba() {  # ba TREE TAG
  (cd $1 && step ba_$2 50 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn)
  echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
}
ba . main1; ba .vcols cols1; ba .vpw pw1; ba .vpt pt1; ba . main2; ba .vcols cols2; ba .vpw pw2; ba .vpt pt2
(cd .vpt && step t_att 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize .vpt 45 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small  # (cut short if the call's time is up)
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
