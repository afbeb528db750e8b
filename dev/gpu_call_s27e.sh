#!/usr/bin/env bash
# Session 27's smallest call (what ~4 minutes of device time allow): issue 9's backward-only causal Philox skip
# alone. Builds the attention family here and in .vdsb (= main + dev/patches/attention_dropout_causal_skip_bwd.patch;
# prep in gpu_call_s27c.sh's header), runs .vdsb's Hopper dropout GPU tests, then the dropout overhead main / .vdsb
# alternated. Carry [".gpu_data", ".vdsb"]. ~2 min.
export LIMIT=${LIMIT:-150} MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vdsb" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vdsb && step drop_tests 40 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py -k "hopper or same_mask")
tail -1 $O/drop_tests.log
ab() { step $1 25 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "^[0-9]|overhead" $O/$1.log | head -4; }
ab drop_a; (cd .vdsb && ab drop_b); ab drop_c; (cd .vdsb && ab drop_d)
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
