#!/usr/bin/env bash
# Session 32's third call: s32b again with the portable backward's bwd_args value-initialised (s32b: its new
# colsum_partial field was garbage there, and the portable convert wrote through it: illegal address in every
# attention test after the first portable one). Same steps; the step A/B alternates three times.
# Prep: .vbase as in gpu_call_s32b.sh. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=10 VARIANTS=".vbase" VARIANT_JOBS=6 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_attn 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention; tail -1 $O/t_attn.log; grep "^FAILED" $O/t_attn.log | head
step chk 30 python dev/qkv_bias_check.py; tail -1 $O/chk.log
sanitize . 50 python dev/qkv_bias_check.py
step tm 40 python dev/qkv_bias_check.py --time; tail -5 $O/tm.log
tk_step train_a; (cd .vbase && tk_step train_b); tk_step train_c; (cd .vbase && tk_step train_d); tk_step train_e; (cd .vbase && tk_step train_f)
(cd $O && tar -czf logs.tgz *.log $(ls -d train_? 2>/dev/null) && rm -rf *.log train_?)
echo "all done at $((SECONDS - t0)) s"
