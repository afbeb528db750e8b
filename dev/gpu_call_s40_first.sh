#!/usr/bin/env bash
# Session 40, first call (~9 min, any card; on an H200 the ratios to cuDNN are the issue's own): the D = 128 backward
# with ONE consumer computing the block's whole dQ (session 39, bench/RESULTS.md "session 39") in its two hand-over
# forms, beside main:
#   .valt = HEAD + dev/patches/attention_bwd_dq_one_wg.patch: the other consumer hands its dS^T rows over by bar.arrive
#           on a named barrier (two ids by block parity). s39d (H100): D = 128 backward +2-8% at every shape, tests
#           537 passed, memcheck clean, but racecheck 48 hazards (the shared dQ staging's stores of the two consumers,
#           ordered only through that arrive / sync: racecheck's model, or a race?). Since then the dQ convert's two
#           layouts are two branches (s39d's per-element select cost the D = 64 backwards ~1.5%).
#   .vmb  = HEAD + dev/patches/attention_bwd_dq_one_wg_mbarrier.patch: the same with the hand-over on an mbarrier
#           (phase j of one barrier: the other consumer's 128 threads arrive, the dQ consumer waits on parity j % 2),
#           an order racecheck follows. Compiled spill-free, no C75xx; never run.
#   .vmb64 = HEAD + dev/patches/attention_bwd_dq_one_wg_d64.patch: .vmb with the one-consumer dQ at D = 64 too (dQ = dS K,
#           m64n64k16 x 8: 32 KB of shared reads a block against the two m64n32 chains' 48 KB, in a loop near the
#           shared memory's 128 B a cycle; consumer g % 2 for the CTA's g-th block of its persistent walk; still
#           red.global.add from registers; the dQ convert then reads (queries, dims) blocks at D = 64 too). Its D = 128
#           kernels are .vmb's (SASS differs only in register names). Compiled spill-free, never run.
# Steps: outputs against main (dK, dV bitwise, dQ to 1e-3); racecheck of the three, memcheck of .vmb64; the prep /
# convert / main kernel times of main, .vmb, .vmb64 (attention_bwd_pieces.py --time: is the (queries, dims) convert
# slower?); bench_attention --graphs --rounds 2 --impls tk,cudnn main / .vmb / .vmb64 / .valt twice alternated;
# .vmb64's attention GPU tests (both D). Merge the racecheck-clean form that keeps .valt's speed at D = 128 (D = 64
# SASS is main's in .valt and .vmb), and .vmb64's D = 64 if it pays (then GPT-2's step: gpu_call_s40b.sh .vmb64, at
# once on the warm machine).
# Prep: for t in .valt .vmb .vmb64; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done;
#   (cd .valt && patch -p1 < ../dev/patches/attention_bwd_dq_one_wg.patch);
#   (cd .vmb && patch -p1 < ../dev/patches/attention_bwd_dq_one_wg_mbarrier.patch);
#   (cd .vmb64 && patch -p1 < ../dev/patches/attention_bwd_dq_one_wg_d64.patch)
#   carry [".gpu_data", ".valt", ".vmb", ".vmb64"]
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".valt .vmb .vmb64" VARIANT_JOBS=4 LIMIT=${LIMIT:-580}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vmb .vmb64 .valt; do (cd $t && step cmp$t 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp$t.log; done
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tt in .vmb:racecheck .vmb64:racecheck .valt:racecheck .vmb64:memcheck; do
  t=${tt%%:*}; tool=${tt#*:}
  (cd $t && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${tool}$t 45 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/${tool}$t.log
done
for t in . .vmb .vmb64; do (cd $t && step time_${t#.} 40 python dev/attention_bwd_pieces.py --time); echo "-- $t"; grep "^time" $O/time_${t#.}.log; done
ba . main1; ba .vmb mb1; ba .vmb64 mb64_1; ba .valt alt1; ba . main2; ba .vmb mb2; ba .vmb64 mb64_2; ba .valt alt2
(cd .vmb64 && step t_att 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
