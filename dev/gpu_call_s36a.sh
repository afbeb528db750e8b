#!/usr/bin/env bash
# Session 36 (issues 8 / 12), first call: four Hopper attention patches of session 35 beside main (HEAD), ~9.5 min.
#   .vkt   = HEAD + attention_bwd_d64_kt_registers.patch: dQ^T = K^T dS^T with K^T from registers, every D = 64
#            instance (the causal ones spill 80 bytes). By arithmetic each SS m64n32k16 of dQ^T reads 3 KB in 16
#            tensor cycles (192 B a cycle against the shared memory's 128); from registers 1 KB.
#   .vkt3  = HEAD + attention_bwd_d64_kt_registers_slices.patch: K^T from registers as far as it compiles spill-free
#            (non-causal all 8 16-key slices, causal 4, causal dropout none); the non-causal SASS is .vkt's
#   .vq128 = HEAD + attention_fwd_d128_q_registers.patch: the D = 128 forward's S = Q K^T with Q from registers (p = 0;
#            spill-free, instructions -2%), as session 35 merged for D = 64
#   .vqe   = .vq128 + attention_fwd_q_item_after_first.patch: with Q in registers the pipeline frees the Q buffer
#            after the first key tile, so the producer loads the next item's Q during the item (D = 128 has one Q
#            buffer: its item boundary exposed a Q load; the non-causal D = 128 forwards are 0.92-0.94x cuDNN)
#   .vall  = HEAD + the .vkt3, .vq128 and .vqe patches: tests/attention whole, memcheck and racecheck there.
# 1. bench_attention --graphs --rounds 2 --impls tk,cudnn: D = 64 in main / .vkt / .vkt3 / .vqe, D = 128 in main /
#    .vq128 / .vqe; 2. pytest -m gpu tests/attention in .vall; attention_bwd_pieces --compare against main;
# 3. compute-sanitizer memcheck, then racecheck, on the small cases in .vall.
# Prep (HEAD = the commit that added this script or later, kernels unchanged): for each tree T with patches P...:
#   rm -rf T && mkdir T && git archive HEAD | tar -x -C T && (cd T && for p in P...; do patch -p1 < ../dev/patches/$p; done)
#   .vkt: attention_bwd_d64_kt_registers.patch; .vkt3: attention_bwd_d64_kt_registers_slices.patch;
#   .vq128: attention_fwd_d128_q_registers.patch; .vqe: that + attention_fwd_q_item_after_first.patch;
#   .vall: attention_bwd_d64_kt_registers_slices.patch + the two forward patches.
#   Carry [".gpu_data", ".vkt", ".vkt3", ".vq128", ".vqe", ".vall"].
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vkt .vkt3 .vq128 .vqe .vall" VARIANT_JOBS=2 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
D128="8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128"
ba() {  # ba TREE TAG SHAPES PASSES
  (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$3")
  for p in $4; do echo "-- $2 $p: $(grep '^| (' $O/ba_$2.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
}
ba . main64 "$D64" "fwd bwd"; ba .vkt kt "$D64" bwd; ba .vkt3 kt3 "$D64" bwd; ba .vqe qe64 "$D64" fwd
ba . main128 "$D128" fwd; ba .vq128 q128 "$D128" fwd; ba .vqe qe128 "$D128" fwd
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vall && step cmp 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp.log
(cd .vall && step t_all 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_all.log
grep "^FAILED" $O/t_all.log | head -5
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small
sanitize .vall 220 python dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
