#!/usr/bin/env bash
# Session 37 (issue 8): three Hopper-backward patches beside main, in one call (~9 min):
#   .vzf  = main + dev/patches/attention_bwd_prep_zero_fill.patch (the prep kernel writes dq_accum's zeros; the binding
#           allocates it with at::empty: ATen's fill was 40.4 us of a 1436.9 us backward at (8,16,2048,128), s36e)
#   .vred = main + dev/patches/attention_bwd_dq_red_v4.patch (each consumer adds its dQ^T partial into dq_accum with
#           8 (D = 128) / 4 (D = 64) red.global.add.v4.f32 a thread straight from registers, 512 contiguous bytes a
#           warp-instruction, instead of the frag64 staging in shared memory (16-byte stores, a proxy fence, two
#           warpgroup barriers, then one thread's bulk reductions): 64 KB a block less of shared-memory traffic at
#           D = 128 (~368 KB by the session-36 arithmetic), and no barrier between the consumers' dQ^T waits)
#   .vown = .vred + attention_bwd_dq_own_keys.patch (git show 1e8f27a:dev/patches/...; dropped after this call; D = 128: each consumer's dQ^T covers only its own 64
#           keys, in two halves of 64 head dims one after the other in the same registers, so the consumers no longer
#           wait for each other's dS^T at every block (s36e: they run in lockstep); twice the dq_accum reductions.
#           The causal dropout D = 128 instances spill 4 bytes.)
# Steps: the backward's kernels (dev/attention_bwd_breakdown.py) in each tree; outputs against main
# (attention_bwd_pieces --compare: dK, dV bitwise, dQ by relative error); bench_attention --graphs --rounds 2
# --impls tk,cudnn at every shape, main / .vzf / .vred / .vown twice, alternated.
# Prep: for t in vzf:attention_bwd_prep_zero_fill vred:attention_bwd_dq_red_v4; do rm -rf .${t%%:*} &&
#   mkdir .${t%%:*} && git archive HEAD | tar -x -C .${t%%:*} && (cd .${t%%:*} && patch -p1 < ../dev/patches/${t#*:}.patch); done;
#   rm -rf .vown && cp -r .vred .vown && (cd .vown && git show 1e8f27a:dev/patches/attention_bwd_dq_own_keys.patch | patch -p1)
# carry [".gpu_data", ".vzf", ".vred", ".vown"].
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vzf .vred .vown" VARIANT_JOBS=4 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for t in . .vzf .vred .vown; do (cd $t && step br$t 40 python dev/attention_bwd_breakdown.py --shapes 8,16,2048,128)
  grep -E "us per backward|^ +[0-9.]+ us" $O/br$t.log | cut -c1-120; done
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vzf .vred .vown; do (cd $t && step cmp$t 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -2 $O/cmp$t.log; done
ba . main1; ba .vzf zf1; ba .vred red1; ba .vown own1; ba . main2; ba .vzf zf2; ba .vred red2; ba .vown own2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
