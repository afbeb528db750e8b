#!/usr/bin/env bash
# Session 41, first call (~8 min, any card; on an H200 the ratios to cuDNN are the issue's own). Two trees beside main:
#   .vep = dev/patches/attention_bwd_dkdv_tma_store.patch (rebased onto the one-consumer dQ in session 40, compiled
#          spill-free, never run): dK / dV leave through shared memory (stmatrix) and 4 / 2 TMA stores a consumer
#          instead of 64 / 32 4-byte stores a thread; D = 128 over the free dS^T / dQ scratch after a named barrier
#          of both consumers, D = 64 (persistent) in a 32 KB buffer of its own so that the stores run on under the next
#          item. The s39d T-scaling lead: our D = 128 CTAs pay ~9-16 query blocks of fixed cost, cuDNN's ~4-6.
#   .vst = dev/patches/attention_bwd_phase_stamps.patch: clock64 stamps per CTA (D = 128, one item a CTA) and
#          dev/attention_bwd_phases.py, which prints the median cycles of each phase (entry -> first K / V load ->
#          first slot ready, per loop block, last block, finish = dK / dV stores, same-SM gap between CTAs) and the
#          fixed cost outside the loop in query blocks, per shape; and for the persistent forward, per CTA and
#          consumer, the shares of the first-tile wait, the key-tile loop, the drain and the finish (O / lse stores),
#          cycles per item and per key tile (the forward gaps: (64,6,256,64) causal 0.945x, long non-causal D = 128
#          0.96x). Diagnostic only (never merged; the D = 128 dropout forwards spill 4-16 B with it, p = 0 none).
# Steps: outputs against main (dK, dV bitwise? the TMA store rounds the same: expect bitwise), racecheck + memcheck of
# .vep, bench_attention main / .vep twice alternated, the phase table, .vep's attention GPU tests.
# Prep: for t in .vep .vst; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done;
#   (cd .vep && patch -p1 < ../dev/patches/attention_bwd_dkdv_tma_store.patch);
#   (cd .vst && patch -p1 < ../dev/patches/attention_bwd_phase_stamps.patch)
#   carry [".gpu_data", ".vep", ".vst"]
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vep .vst" VARIANT_JOBS=5 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
bwd_checks .vep
ba . main1; ba .vep ep1
(cd .vst && step phases 60 python dev/attention_bwd_phases.py); cat $O/phases.log
ba . main2; ba .vep ep2
(cd .vep && step t_att 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
