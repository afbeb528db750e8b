#!/usr/bin/env bash
# Session 48 (~8 min, any card): session 47's prepared s48a (never started: no machine at 18:25 UTC), trimmed, plus
# the 16-bit bias read.
# Trees (never merged; prep below):
#   .vnomath, .vdgnoaux, .vdgnoaux_kk   s48a's diagnostic trees (gpu_call_s48a.sh's header)
#   .vcsd   = HEAD + dev/patches/mlp_colsum_out_dtype.patch (bias gradients written in the bias's dtype)
#   .vb16   = .vcsd + dev/patches/mlp_bias16.patch: the GEMM epilogues read a bias in the operands' 16-bit dtype
#             as it is (round_into's three unrolled loops: none / fp32 / 16-bit; the GELU hand-off widens per
#             element), so bench_mlp's bf16 biases lose their two cast launches a forward too (four a step with .vcsd)
#   1. .vb16's MLP GPU op tests (the 16-bit bias bitwise its fp32 cast's, store and GELU; the bad-bias cases), then
#      bench_mlp --skip-gemm in .vb16, main, .vcsd, .vb16, main, .vcsd: merge .vb16 (or .vcsd) if it gains in both.
#   2. s48a's question at C = 2048: dev/mlp_epilogue_ncu.py in .vnomath / .vdgnoaux / .vdgnoaux_kk, forward and
#      reversed order, then Nsight Compute on .vnomath's GELU and .vdgnoaux_kk's GELU'.
# Prep: s48a's, then rm -rf .vb16 && cp -r .vcsd .vb16 && (cd .vb16 && patch -p1 < ../dev/patches/mlp_bias16.patch)
#   carry [".gpu_data", ".vnomath", ".vdgnoaux", ".vdgnoaux_kk", ".vcsd", ".vb16"]
export MAX_JOBS=6 BUILD_ARGS="--family mlp" VARIANTS=".vb16 .vcsd .vnomath .vdgnoaux .vdgnoaux_kk" VARIANT_JOBS=2 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vb16 && step t_b16 100 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step"); tail -1 $O/t_b16.log; grep "^FAILED" $O/t_b16.log | head -5
for r in 1 2; do
  for tt in .vb16:b16 .:main .vcsd:csd; do
    (cd ${tt%%:*} && step mlp_${tt#*:}$r 45 python bench/bench_mlp.py --skip-gemm); echo "-- ${tt#*:}$r"; grep -E "^ +16384" $O/mlp_${tt#*:}$r.log
  done
done
epir() {  # epir TREE TAG C: the four GEMMs timed in reverse order
  (cd "$1" && step "epir_$2" 45 python dev/mlp_epilogue_ncu.py --C "$3" --reverse); echo "-- $2 (reversed)"; grep TFLOP "$O/epir_$2.log"
}
for t in nomath dgnoaux dgnoaux_kk; do epi .v$t ${t}_2048 2048 45; epir .v$t ${t}_2048 2048; done
(cd .vnomath && epi_ncu 2048 "8:gelu_nomath")
(cd .vdgnoaux_kk && epi_ncu 2048 "10:dgelu_noaux_kk")
rm -f $O/*.ncu-rep
(cd $O && tar -czf logs.tgz *.log *.txt *.csv && rm -rf *.log *.txt *.csv)
echo "all done at $((SECONDS - t0)) s"
