#!/usr/bin/env bash
# Prepared in session 13 for the next GPU call (issue 11): the MLP GEMM's GELU epilogue variants, gelu_regs (the
# candidate: GELU from registers like the plain store) and gelu_identity_nostage among them, beside cuBLAS; then the
# MLP fwd+bwd with cuBLAS weight gradients vs ours (dev/mlp_dw_variants.py) and bench_mlp's table.
# If gelu_regs is bitwise the shipped GELU and faster: port it to csrc/gemm.cu, run tests/mlp on the GPU, then
# bench_train with the family on (dev/bench_train_using.py mlp).
BUILD_ARGS="--family mlp"  # the variants build their own packages; bench_mlp and mlp_dw_variants use this one
source dev/gpu_call_lib.sh
step variants 240 python dev/mlp_gemm_variants.py --variants shipped,gelu_regs,gelu_identity,gelu_identity_nostage
grep -v -i warn $O/variants.log | tail -10
step dw 150 python dev/mlp_dw_variants.py
tail -5 $O/dw.log
step bench_mlp 120 python bench/bench_mlp.py --skip-gemm --json $O/bench_mlp.json
tail -5 $O/bench_mlp.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
