#!/usr/bin/env bash
# Session 21, call 2 of 2 (the warm machine of gpu_call_s21b.sh, whose builds it reuses): the GPT-2 124M step on main
# and on TREE (default .vif2), then Nsight Compute's per-instruction stall samples of TREE's GELU GEMM.
# Carry [".gpu_data", "$TREE"].
TREE=${TREE:-.vif2}
export MAX_JOBS=16 VARIANTS="$TREE" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step train_main 140 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd $TREE && step train_tree 120 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_tree)
tail -3 $O/train_tree.log
# (stall samples: in gpu_call_s21b.sh)
false && (cd $TREE && step ncu_gelu 150 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 1 --section SourceCounters \
  --section WarpStateStats --import-source no -f -o $O/gelu_src python dev/mlp_epilogue_ncu.py --ncu)
ncu -i $O/gelu_src.ncu-rep --page source --csv --print-source sass > $O/gelu_src_sass.csv 2> $O/ncu_export.log
python - "$O/gelu_src_sass.csv" <<'PY' > $O/gelu_stalls_top.txt 2>&1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = next((k for k in rows[0] if "Warp Stall Sampling (All" in k), None) if rows else None
print("columns:", list(rows[0]) if rows else "none")
if key:
    tot = sum(float(r[key] or 0) for r in rows)
    for r in sorted(rows, key=lambda r: -float(r[key] or 0))[:60]:
        print(f"{float(r[key] or 0) / max(tot, 1):6.1%}  {r.get('Address', '')}  {r.get('Source', '')[:90]}")
PY
head -50 $O/gelu_stalls_top.txt
ncu -i $O/gelu_src.ncu-rep --page details --csv > $O/gelu_details.csv 2>/dev/null
echo "all done at $((SECONDS - t0)) s"
rm -f $O/gelu_src.ncu-rep
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
