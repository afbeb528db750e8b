#!/usr/bin/env bash
# Prepared in session 25 (no device time left to run it): the linear op's bias gradient summed inside its dX GEMM,
# dev/patches/linear_db_in_dx_gemm.patch, beside main. The plain-store dX = dy W GEMM gets an instantiation of its own
# (A_SUMS) whose CTAs on the first column tile add dy's columns per band of 16 rows from the A tiles already in shared
# memory (16 four-byte loads a thread a K slice, while the slice's wgmmas run) into an fp32 ((M+127)/128*8, K)
# buffer; the column-sum kernel then adds the 1024 bands instead of reading dy (75 MB for c_attn) again. In s25c's
# profile (H100) the projections' column sums over dy cost ~25 us (c_attn) and ~11.5 us (c_proj) a layer.
# Check: dx bitwise the GEMM without the sums, the bands against a float64 sum (tests/mlp's test_gemm_layouts),
# the linear op's db (test_linear_forward_backward), the bad-shape messages; then the A_SUMS GEMM against the
# plain one (dev/proj_bench.py), GPT-2 and GPT-2 medium tk steps alternated.
#   .vdb = HEAD + the patch
# Prep: rm -rf .vdb && mkdir .vdb && git archive HEAD | tar -x -C .vdb && (cd .vdb && patch -p1 < ../dev/patches/linear_db_in_dx_gemm.patch)
# Carry [".gpu_data", ".vdb"]. ~8 min.
export MAX_JOBS=8 VARIANTS=".vdb" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vdb && step mlp_tests 150 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp)
tail -1 $O/mlp_tests.log
(cd .vdb && step proj 100 python dev/proj_bench.py)
grep "C=" $O/proj.log | grep -E "dX"
train_abab .vdb
med() { step $1 60 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -1; }
med med_a; (cd .vdb && med med_b); med med_c; (cd .vdb && med med_d)
echo "all done at $((SECONDS - t0)) s"
