#!/usr/bin/env bash
# Session 48 (~7.5 min, any card; s48b never started: five refused starts cost 1,170 s of the 1,800). The two merge
# candidates only; s48b's GELU / GELU' diagnostics wait for a session with device time.
#   .vb16 = HEAD + dev/patches/mlp_colsum_out_dtype.patch + mlp_bias16.patch (16-bit biases read as they are by the
#           GEMM epilogues, bias gradients written in the bias's dtype: bench_mlp's bf16 MLP loses its four cast launches)
#   .vln  = HEAD + dev/patches/layernorm_fwd_raw_loads.patch (the LayerNorm forward holds the row's loads as loaded,
#           widens after the last is issued, launch bounds from the registers they take: no spills on sm_80 / sm_90a,
#           where nvcc 13.0 spilled 21 / 3 instances; model instances -4.5 / -5% SASS instructions, registers equal)
#   1. .vb16's MLP GPU op tests and .vln's LayerNorm GPU tests, side by side (correctness only)
#   2. bench_mlp --skip-gemm in .vb16, main, .vb16, main: merge .vb16 if it gains in both pairs
#   3. bench_layernorm --graphs in .vln, main (a regression check of the fix; no speed is claimed from it)
# Prep: for t in vb16 vln; do rm -rf .$t && mkdir .$t && git archive HEAD | tar -x -C .$t; done;
#   (cd .vb16 && patch -p1 < ../dev/patches/mlp_colsum_out_dtype.patch && patch -p1 < ../dev/patches/mlp_bias16.patch);
#   (cd .vln && patch -p1 < ../dev/patches/layernorm_fwd_raw_loads.patch); carry [".gpu_data", ".vb16", ".vln"]
export MAX_JOBS=6 BUILD_ARGS="--family mlp --family layernorm" VARIANTS=".vb16 .vln" VARIANT_JOBS=5 LIMIT=${LIMIT:-450}
export VARIANT_BUILD_ARGS="--family mlp --family layernorm"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vln && step t_ln 150 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm) &
(cd .vb16 && step t_b16 150 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step")
wait
tail -1 $O/t_b16.log; grep "^FAILED" $O/t_b16.log | head -5; tail -1 $O/t_ln.log; grep "^FAILED" $O/t_ln.log | head -5
for r in 1 2; do
  for tt in .vb16:b16 .:main; do
    (cd ${tt%%:*} && step mlp_${tt#*:}$r 45 python bench/bench_mlp.py --skip-gemm); echo "-- ${tt#*:}$r"; grep -E "^ +16384" $O/mlp_${tt#*:}$r.log
  done
done
for tt in .vln:ln .:lnmain; do
  (cd ${tt%%:*} && step bln_${tt#*:} 40 python bench/bench_layernorm.py --graphs --impls tk); echo "-- ${tt#*:}"; tail -8 $O/bln_${tt#*:}.log
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
