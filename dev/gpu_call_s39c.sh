#!/usr/bin/env bash
# Session 39, second call on the warm machine (~8 min): the tree $1 (the winner of gpu_call_s39b.sh) checked for a
# merge: its attention GPU tests, memcheck / racecheck, then GPT-2's step against main alternated (train_abab).
# carry [".gpu_data", "$1"]
T=${1:?tree}
export MAX_JOBS=8 BUILD_ARGS=" " VARIANTS="$T" VARIANT_JOBS=8 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd $T && step t_att 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize $T 35 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
train_abab $T
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
