#!/usr/bin/env bash
# Session 29's third call (~490 s of device time left): the delta_bias LayerNorm at C = 384 / 768 / 1024 with and
# without dropout, forward alone and fwd + bwd, in .vbias (bias staged after the dropout's Philox rounds: slow at
# C = 768 with p = 0.1 in s29b) and .vbias2 (staged before them), alternated; then .vbias2's LayerNorm GPU tests
# (all, no -x) and compute-sanitizer memcheck / racecheck. Only the layernorm family is built.
# Carry [".gpu_data", ".vbias", ".vbias2"]. LIMIT (default 240 s).
export MAX_JOBS=4 VARIANTS=".vbias .vbias2" VARIANT_JOBS=6 VARIANT_BUILD_ARGS="--family layernorm" \
  BUILD_ARGS="--family layernorm" LIMIT=${LIMIT:-240}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for r in 1 2; do for v in .vbias .vbias2; do
  (cd $v && step ln_time$v$r 40 python dev/ln_delta_bias_check.py --time); echo "-- $v $r"; grep -E "^C=" $O/ln_time$v$r.log
done; done
(cd .vbias2 && step ln_tests 100 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm); tail -3 $O/ln_tests.log
sanitize .vbias2 40 python dev/ln_delta_bias_check.py
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
