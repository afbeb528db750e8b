#!/usr/bin/env bash
# Session 31's last minutes of device time (~4 min): dev/patches/attention_prep_zeroes_dq.patch (the Hopper backward's
# prep kernel zeroes dq_accum, no fill kernel; tests passed in s23e, never timed beside main) as .vz:
#   1. .vz: pytest -m gpu tests/attention/test_attention_hopper_bwd_gpu.py (as much as 60 s allows);
#   2. GPT-2's tk step alternated: main, .vz, main, .vz (each its own process).
# Prep: rm -rf .vz && mkdir .vz && git archive HEAD | tar -x -C .vz && (cd .vz && patch -p1 <
#   ../dev/patches/attention_prep_zeroes_dq.patch). Carry [".gpu_data", ".vz"].
export MAX_JOBS=8 VARIANTS=".vz" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-270}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vz && step t_vz 60 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_hopper_bwd_gpu.py); tail -1 $O/t_vz.log
tk_step train_a; (cd .vz && tk_step train_b); tk_step train_c; (cd .vz && tk_step train_d)
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? 2>/dev/null) && rm -rf *.log train_?)
echo "all done at $((SECONDS - t0)) s"
