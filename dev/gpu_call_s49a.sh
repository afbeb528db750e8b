#!/usr/bin/env bash
# Session 49 (written without a GPU: no device was lent). Supersedes s48c / s48d: the same two merge candidates, the MLP
# one grown by a third patch. ~9.5 min with every part; `bash dev/gpu_call_s49a.sh tests` (~5 min) and `... bench`
# (~5 min, needs the same trees) split it over two calls.
#   .vas = HEAD + dev/patches/mlp_colsum_out_dtype.patch + mlp_bias16.patch + mlp_dy_colsum_in_gemm.patch
#          (16-bit biases read as they are by the GEMM epilogues; bias gradients written in the bias's dtype; dy's
#          column sums -- db_proj, the linear op's db -- summed by the dx / GELU' GEMM's consumers from the ring slots
#          per 64-row block, then one short launch: bench_mlp's bf16 MLP goes from 12 launches a step to 7 and no
#          longer reads dy a second time)
#   .vln = HEAD + dev/patches/layernorm_fwd_raw_loads.patch (the LayerNorm forward's spills under nvcc 13.0 removed)
#   tests: .vas's MLP GPU tests (a_colsum bitwise / float64 checks included) and .vln's LayerNorm GPU tests side by
#          side; then compute-sanitizer memcheck + racecheck on .vas's GEMMs with both kinds of sums
#   bench: bench_mlp --skip-gemm in .vas, main, .vas, main (merge .vas if its tests pass and it gains in both pairs;
#          H200 s47f: C = 1024 1.096x / 1.097x, 1.1x needed); dev/mlp_epilogue_ncu.py --a-sums at C = 768 / 1024 in
#          .vas (each GEMM with and without the sums, the column-sum launches before / after); bench_layernorm --graphs
#          .vln / main (merge .vln if its tests pass and this is level: it fixes spills, no speed is claimed)
# Prep: for t in vas vln; do rm -rf .$t && mkdir .$t && git archive HEAD | tar -x -C .$t; done;
#   (cd .vas && for p in mlp_colsum_out_dtype mlp_bias16 mlp_dy_colsum_in_gemm; do patch -p1 < ../dev/patches/$p.patch; done);
#   (cd .vln && patch -p1 < ../dev/patches/layernorm_fwd_raw_loads.patch); carry [".gpu_data", ".vas", ".vln"]
PART=${1:-all}  # ROUNDS (default 2) bench_mlp pairs; EPI_C (default "768 1024", "" for none) the GEMM timings' widths
export MAX_JOBS=6 BUILD_ARGS="--family mlp --family layernorm" VARIANTS=".vas .vln" VARIANT_JOBS=5 LIMIT=${LIMIT:-585}
export VARIANT_BUILD_ARGS="--family mlp --family layernorm"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if [ "$PART" != bench ]; then
  (cd .vln && step t_ln 150 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm) &
  (cd .vas && step t_as 170 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step")
  wait
  tail -1 $O/t_as.log; grep "^FAILED" $O/t_as.log | head -5; tail -1 $O/t_ln.log; grep "^FAILED" $O/t_ln.log | head -5
  grep -h "a_colsum: max error" $O/t_as.log | sort -k5 -g | tail -2
fi
if [ "$PART" != tests ]; then
  for r in $(seq 1 ${ROUNDS:-2}); do
    for tt in .vas:as .:main; do
      (cd ${tt%%:*} && step mlp_${tt#*:}$r 45 python bench/bench_mlp.py --skip-gemm); echo "-- ${tt#*:}$r"
      grep -E "^ +16384" $O/mlp_${tt#*:}$r.log
    done
  done
  for c in ${EPI_C-768 1024}; do (cd .vas && step epi_as$c 30 python dev/mlp_epilogue_ncu.py --C $c --sums --a-sums); echo "-- C=$c"; grep " us" $O/epi_as$c.log; done
  for tt in .vln:ln .:lnmain; do
    (cd ${tt%%:*} && step bln_${tt#*:} 40 python bench/bench_layernorm.py --graphs --impls tk); echo "-- ${tt#*:}"; tail -8 $O/bln_${tt#*:}.log
  done
fi
if [ "$PART" != bench ]; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    (cd .vas && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_$tool 75 "$cs" --tool $tool --error-exitcode 9 \
       python dev/mlp_epilogue_ncu.py --ncu --small --sums --a-sums)
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $O/san_$tool.log
  done
fi
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
