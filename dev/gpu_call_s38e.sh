#!/usr/bin/env bash
# Session 38 (on s38d's warm machine): Nsight Compute stall samples of the merge candidate's D = 128 backward,
# (8,16,2048,128) non-causal (as gpu_call_s37c.sh). carry [".gpu_data", ".vmerge"]
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vmerge" VARIANT_JOBS=8 LIMIT=150
source dev/gpu_call_lib.sh
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
(cd .vmerge && step ncu_tk 90 $NCU -k regex:attention_bwd_hopper --launch-skip 2 -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight -o $(cd $O && pwd)/st_tk python dev/ncu_attention.py --impl tk --shape 8,16,2048,128 --causal 0)
$NCU -i $O/st_tk.ncu-rep --page details --print-details all > $O/details_tk.log 2>&1
grep -iE "Elapsed Cycles|Executed Ipc|Warp Cycles Per Issued|Pipe Tensor Cycles" $O/details_tk.log | head
$NCU -i $O/st_tk.ncu-rep --page source --csv --print-source sass > $O/st_tk.csv 2>/dev/null
python dev/ncu_stalls.py $O/st_tk.csv --top 20 > $O/stalls_tk.log 2>&1; head -25 $O/stalls_tk.log
(cd $O && tar -czf logs.tgz *.log *.csv && rm -rf *.log *.csv *.ncu-rep)
