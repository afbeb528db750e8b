#!/usr/bin/env bash
# Session 38, second call (issue 8): two Hopper-backward patches beside main, from the stall samples of s38a
# (Nsight Compute, (8,16,2048,128) non-causal: the consumers' top stalls were the loop head waiting for the dQ^T
# reductions to release their registers (long_sb 8.2% of samples) and the lg queue under the 8 red.global.add
# (4.2%), then the first use of the block's lse2 right after its shared loads (short_sb 5.2%) and of Delta (1.9%)).
#   .vcols = main + dev/patches/attention_bwd_early_columns.patch: lse2 read into registers before dP^T's issue,
#            Delta before the dP^T wait at D = 64 (at D = 128 it spilled 32 B there, so it stays after the wait)
#   .vwr   = .vcols + dev/patches/attention_bwd_dq_writer_warp.patch (D = 128 only): the consumers stage their dQ^T
#            partial in shared memory (8 x 16-byte stores, proxy fence, a named-barrier arrive) and warp 1 of the
#            producer warpgroup adds it into dq_accum with one 16 KB bulk reduction per consumer and block, then frees
#            the staging (FlashAttention-3's dQ writer; cuDNN's kernel stages its dQ with STS.128 + UTMAREDG too).
#            Registers 24 / 240: the consumers are spill-free, the producer thread's ring loop spills 64 B (two smem
#            base values it kept in uniform registers before; at 32 / 232 the consumers spilled 16 B instead):
#            a first look at whether the form pays, not a candidate to merge as is.
#   .vpw   = .vcols + dev/patches/attention_bwd_dq_warp_bulk.patch (D = 128 only): the consumers stage their dQ^T
#            partial the same way, but each warp adds its own part (8 runs of 512 B) by bulk reductions issued by its
#            lane 0 after a __syncwarp: no barrier between warps, no writer warp, registers as main (spill-free);
#            lane 0 waits for its previous block's reductions to have read the staging before the warp writes it.
# Steps: outputs against main (dK, dV bitwise; dQ to rounding), bench_attention --graphs --rounds 2 --impls tk,cudnn
# main / .vcols / .vwr / .vpw twice alternated, then .vpw's Hopper backward tests and racecheck / memcheck.
# Prep: rm -rf .vcols .vwr; for t in .vcols .vwr; do mkdir $t && git archive HEAD | tar -x -C $t &&
#   (cd $t && patch -p1 < ../dev/patches/attention_bwd_early_columns.patch); done;
#   cp -r .vcols .vpw; (cd .vwr && patch -p1 < ../dev/patches/attention_bwd_dq_writer_warp.patch);
#   (cd .vpw && patch -p1 < ../dev/patches/attention_bwd_dq_warp_bulk.patch)   carry [".gpu_data", ".vcols", ".vwr", ".vpw"]
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vcols .vwr .vpw" VARIANT_JOBS=4 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vcols .vwr .vpw; do (cd $t && step cmp$t 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp$t.log; done
ba() {  # ba TREE TAG
  (cd $1 && step ba_$2 50 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn)
  echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
}
ba . main1; ba .vcols cols1; ba .vwr wr1; ba .vpw pw1; ba . main2; ba .vcols cols2; ba .vwr wr2; ba .vpw pw2
(cd .vpw && step t_hb 90 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_hopper_bwd_gpu.py); tail -1 $O/t_hb.log
grep "^FAILED" $O/t_hb.log | head -5
sanitize .vpw 50 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
