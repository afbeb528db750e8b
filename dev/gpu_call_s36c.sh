#!/usr/bin/env bash
# Session 36, second call: the working tree = main + the D = 128 forward's Q from registers and ITEM_AFTER_FIRST (one
# Q buffer freed after the item's first key tile; D = 64 unchanged: its SASS is main's but for
# the order of a few address instructions in one instance). s36a ran this D = 128 SASS in
# .vall (tests/attention stopped by its 150 s step limit after ~524 passes; memcheck / racecheck clean); here the whole
# directory, then every bench_attention shape and the dropout overhead on the merged kernels. No prep; carry
# [".gpu_data"].
export MAX_JOBS=16 BUILD_ARGS="--family attention" LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_att 260 python -m pytest -m gpu -q -p no:cacheprovider tests/attention; tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
step ba 170 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --json $O/ba.json
for p in fwd bwd; do echo "-- $p: $(grep '^| (' $O/ba.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
step drop 60 python bench/bench_attention_dropout.py --graphs; grep -E "^[0-9]+x" $O/drop.log | grep -E " tk |cudnn"
(cd $O && tar -czf logs.tgz *.log *.json && rm -rf *.log *.json)
echo "all done at $((SECONDS - t0)) s"
