#!/usr/bin/env bash
# Session 40, phase timing of the D = 128 backward's CTAs (~2 min on a warm machine): .vst = HEAD with clock64 stamps
# in hopper_backward.cu (smid, entry, the producer's first K / V load, each consumer's start, first-slot wait, drain,
# finish start / end; bf16 non-causal D = 128 compiles spill-free, the causal ones spill 8 B) and
# dev/attention_bwd_phases.py, which prints per shape the median cycles of each phase, the per-block loop time, the
# fixed cost outside the loop in blocks and the same-SM gap between CTAs (the s39d T-scaling lead: ours F ~ 9-16
# blocks, cuDNN's ~4-6). carry [".gpu_data", ".vst"]
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vst" VARIANT_JOBS=12 LIMIT=${LIMIT:-300}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
(cd .vst && step phases 90 python dev/attention_bwd_phases.py); cat $O/phases.log
echo "all done at $((SECONDS - t0)) s"
