#!/usr/bin/env bash
# Session 50, prepared without device time (~5.5 min, any card): the GEMMs' A column sums with 8-byte loads.
#   .vaw = HEAD + dev/patches/mlp_a_colsum_wide_loads.patch: a_column_sums reads its 64 rows x 16 columns a warp
#          with eight 8-byte loads a lane (four 16-byte ones spilled in the 128-register GELU' consumer) instead of
#          sixteen 4-byte ones, and adds the 8 lanes of a 4-column group with keep_half (a reduce-scatter over lane
#          bits 0, 1) and one shuffle. sm_90a, nvcc 13.0: no spills; GELU' with sums 2216 -> 2208 instructions (bf16),
#          dx with sums 6360 -> 6416; the loads still go two at a time under the GELU' consumer's register cap
#          (8 in the chain, 16 before). Session 49: the sums cost the GELU' GEMM +1.2 / +4.4 us at C = 768 / 1024.
#   1. .vaw's MLP GPU tests (the a_colsum bitwise / float64 checks, the op forward / backward)
#   2. compute-sanitizer memcheck + racecheck on .vaw's GEMMs with both kinds of sums
#   3. dev/mlp_epilogue_ncu.py --a-sums at C = 768 / 1024, .vaw / main alternated (the GEMMs alone, with and
#      without sums), then bench_mlp --skip-gemm .vaw / main, two pairs
# Prep: rm -rf .vaw && mkdir .vaw && git archive HEAD | tar -x -C .vaw && (cd .vaw && patch -p1 < ../dev/patches/mlp_a_colsum_wide_loads.patch)
#   carry [".gpu_data", ".vaw"]
export MAX_JOBS=13 BUILD_ARGS="--family mlp" VARIANTS=".vaw" VARIANT_JOBS=3 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vaw && step t_aw 150 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step")
tail -1 $O/t_aw.log; grep "^FAILED" $O/t_aw.log | head -5; grep -h "a_colsum: max error" $O/t_aw.log | sort -k5 -g | tail -2
SAN_SECS=100 SAN_ARGS="--sums --a-sums" san .vaw aw memcheck racecheck; wait
for r in 1 2; do
  for tt in .vaw:aw .:main; do
    for c in 768 1024; do
      (cd ${tt%%:*} && step epi_${tt#*:}$c$r 30 python dev/mlp_epilogue_ncu.py --C $c --sums --a-sums)
      echo "-- ${tt#*:} C=$c round $r"; grep " us" $O/epi_${tt#*:}$c$r.log
    done
  done
done
for r in 1 2; do
  for tt in .vaw:aw .:main; do
    (cd ${tt%%:*} && step mlp_${tt#*:}$r 45 python bench/bench_mlp.py --skip-gemm); echo "-- ${tt#*:}$r"
    grep -E "^ +16384" $O/mlp_${tt#*:}$r.log
  done
done
(cd $O && tar -czf logs.tgz *.log 2>/dev/null && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
