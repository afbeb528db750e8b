#!/usr/bin/env bash
# Session 13, call 4: where the MLP GEMM's GELU epilogues lose their time (dev/mlp_gemm_variants.py: the plain store on
# the GELU kernels' 3-stage ring, GELU / GELU' without their math, GELU without its pre-activation stores, beside
# cuBLAS), and bench/bench_mlp.py's MLP table now (issue 11).
source dev/gpu_call_lib.sh
step variants 240 python dev/mlp_gemm_variants.py
grep -v -i warn $O/variants.log | tail -12
step bench_mlp 150 python bench/bench_mlp.py --skip-gemm --json $O/bench_mlp.json
sed -n '/^MLP/,$p' $O/bench_mlp.log | head -12; tail -5 $O/bench_mlp.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
