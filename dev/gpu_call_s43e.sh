#!/usr/bin/env bash
# Session 43's fifth call (~7 min, any card): main's working tree = HEAD + the GELU epilogue trimmed (gelu.cuh: halved
# A&S coefficients and exp(-x^2 / 2) as ex2 of a pre-scaled exponent, 5 FMUL a value instead of 7; gemm.cu: AuxChunks,
# the gelu'(pre) chunk addresses formed once per half: the bf16 GELU box loop 760 -> 658 instructions, SASS) against
# .vbase (HEAD). The MLP / model GPU tests and compute-sanitizer (racecheck, memcheck) on the MLP epilogues, the four
# epilogue GEMMs alone at C = 768 / 1024 alternated, bench_mlp's MLP table in both trees, GPT-2 medium's tk step B A B A.
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase; carry [".gpu_data", ".vbase"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vbase" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-500} SAN_SECS=120
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
san . new racecheck memcheck
step t_mlp 150 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp tests/model; tail -1 $O/t_mlp.log; grep -E "^FAILED|^ERROR" $O/t_mlp.log | head -5
wait
ep() { (cd $1 && step epi_$2_$3 30 python dev/mlp_epilogue_ncu.py --C $3); echo "-- $2 C=$3"; grep TFLOP $O/epi_$2_$3.log; }
for r in 1 2; do for C in 768 1024; do ep . new$r $C; ep .vbase base$r $C; done; done
step mlp_new 60 python bench/bench_mlp.py --skip-gemm; grep -E "^ *16384" $O/mlp_new.log
(cd .vbase && step mlp_base 60 python bench/bench_mlp.py --skip-gemm); grep -E "^ *16384" $O/mlp_base.log
med() { step $1 70 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -1; }
med med_b; (cd .vbase && med med_c); med med_d; (cd .vbase && med med_e)
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med_*)
echo "all done at $((SECONDS - t0)) s"
