#!/usr/bin/env bash
# Session 8's last GPU call (~150 s): the attention GPU tests with the pipelined query-block loop for every
# (D, causal) of the Hopper backward (call s8d: +4-8% at the D = 64 non-causal shapes).
LIMIT=${LIMIT:-190}
source dev/gpu_call_lib.sh
step attn_tests 130 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -x tests/attention
echo "$(grep -E 'passed|failed' $O/attn_tests.log | tail -1)"; grep -E "^FAILED|^ERROR|Fatal" $O/attn_tests.log | head -10
