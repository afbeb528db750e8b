#!/usr/bin/env bash
# Session 47, last call (~3 min, any card): the gelu'(pre) stream marked evict-first. The GELU GEMM writes gelu'
# (268 MB at C = 2048) that nothing reads until the backward, and the GELU' GEMM reads it once, while both GEMMs'
# operand tiles are re-read from L2 by neighbouring CTAs; s47b's Nsight Compute had GELU''s consumers waiting on their
# operands (long_sb 44%) with DRAM 62% busy against 55% for the plain store. Tree (prep below):
#   .vcs = main + dev/patches/mlp_aux_streaming.patch: __stcs / __ldcs (st.global.cs / ld.global.cs: LDG.E.EF /
#          STG.E.EF in the SASS) for the gelu' chunks; outputs bitwise unchanged by construction
#   1. tests/mlp GPU op tests in .vcs; 2. dev/mlp_epilogue_ncu.py --C 2048 / 1024 / 768 in main and .vcs, alternated
#   twice; 3. bench_mlp --skip-gemm --C 768 1024 2048 in .vcs, main, .vcs, main
# Prep: rm -rf .vcs && mkdir .vcs && git archive HEAD | tar -x -C .vcs && (cd .vcs && patch -p1 <
#   ../dev/patches/mlp_aux_streaming.patch); carry [".gpu_data", ".vcs"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vcs" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-330}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vcs && step t_cs 90 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step"); tail -1 $O/t_cs.log; grep -E "^FAILED" $O/t_cs.log | head -5
for r in 1 2; do for C in 2048 1024 768; do epi . main${r}_$C $C 45; epi .vcs cs${r}_$C $C 45; done; done
for r in 1 2; do
  (cd .vcs && step mlp_cs$r 40 python bench/bench_mlp.py --skip-gemm); echo "-- cs$r"; grep -E "^ +16384" $O/mlp_cs$r.log
  step mlp_main$r 40 python bench/bench_mlp.py --skip-gemm; echo "-- main$r"; grep -E "^ +16384" $O/mlp_main$r.log
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
