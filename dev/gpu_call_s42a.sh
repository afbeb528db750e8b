#!/usr/bin/env bash
# Session 42, after s41c ran (H100): .vep (dev/patches/attention_bwd_dkdv_tma_store.patch, dK / dV through shared
# memory and TMA stores) was +1-12% on the backward in s41c's one round (dK / dV bitwise, racecheck / memcheck clean).
# This call: the backward timing in the reverse order, .vep's whole attention GPU suite, then GPT-2's tk step
# alternated .vep / main / .vep / main (bench_train --compile graphs).
# Prep: rm -rf .vep && mkdir .vep && git archive HEAD | tar -x -C .vep && (cd .vep && patch -p1 < ../dev/patches/attention_bwd_dkdv_tma_store.patch)
#   carry [".gpu_data", ".vep"]
export MAX_JOBS=16 BUILD_ARGS=" " VARIANTS=".vep" VARIANT_JOBS=12 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
ba .vep ep2; ba . main2
(cd .vep && step t_attn 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_attn.log; grep "^FAILED" $O/t_attn.log | head
(cd .vep && tk_step train_b); tk_step train_c; (cd .vep && tk_step train_d); tk_step train_e
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
