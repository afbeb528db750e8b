#!/usr/bin/env bash
# Session 38, third call (issue 8; right after gpu_call_s38b.sh, on its still-warm machine): the checks of the tree
# to merge.  bash dev/gpu_call_s38c.sh TREE   (.vcols, .vpw or .vpt of gpu_call_s38b.sh; ~2.5 min)
#   compute-sanitizer memcheck / racecheck over attention_bwd_pieces --small (s38b ran .vpt's tests).
# Prep: as gpu_call_s38b.sh; carry [".gpu_data", TREE].
T=${1:?tree}
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS="$T" VARIANT_JOBS=8 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
sanitize $T 60 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
