#!/usr/bin/env bash
# Prepared in session 47 for the next (~6 min, any card): why the GELU' GEMM without its gelu' read and product stays
# ~75 us above the forward's GELU GEMM without its math and store at C = 2048 (same 128 x 192 tiles, same shapes;
# s47a / s47b, H100, us: .vnomath's GELU 870-880, .vdgnoaux's GELU' 949-958; their plain stores 858-863 / 837-849).
# Trees (never merged):
#   .vnomath     = HEAD + dev/patches/diag_mlp_nomath.patch (GELU: no gelu' store, gelu(x) -> x)
#   .vdgnoaux    = HEAD + dev/patches/diag_mlp_dgnoaux.patch (GELU': no gelu' read, no product)
#   .vdgnoaux_kk = HEAD + diag_mlp_dgnoaux.patch + diag_mlp_dgkk.patch (the same on a K-major copy of W_proj: the
#                  forward's operand layouts exactly)
#   1. dev/mlp_epilogue_ncu.py --C 2048 in the three trees, in the script's order and reversed (--reverse: GELU' timed
#      first), alternated twice; then --C 1024 once each way.
#   2. Nsight Compute on .vnomath's GELU (launch 8) and .vdgnoaux_kk's GELU' (launch 10) at C = 2048.
#   3. .vcsd = HEAD + dev/patches/mlp_colsum_out_dtype.patch (session 47, compiled here, not run yet): the column-sum
#      kernel writes the bias gradients in the bias's dtype, so 16-bit biases (bench_mlp's) lose their two cast
#      launches a backward; outputs bitwise the cast's by construction. tests/mlp GPU op tests in .vcsd (test_column_sums
#      checks every out dtype against the cast), then bench_mlp --skip-gemm in .vcsd, main, .vcsd, main. The H200 had
#      main at 1.096x / 1.097x at C = 1024 (s47f), ~5-9 us a call short of 1.1x; merge if it gains in both pairs.
# Reading: if .vdgnoaux_kk's GELU' timed first matches .vnomath's GELU, the gap was order / power drift and the GELU'
# loss is its read and product (go after those); if it stays ~75 us above, compare the two ncu reports' consumer
# stalls and the epilogue code (the unpack / pack and the column-sum FADDs GELU' keeps).
# Prep: for t in nomath dgnoaux; do rm -rf .v$t && mkdir .v$t && git archive HEAD | tar -x -C .v$t &&
#   (cd .v$t && patch -p1 < ../dev/patches/diag_mlp_$t.patch); done; rm -rf .vdgnoaux_kk && mkdir .vdgnoaux_kk &&
#   git archive HEAD | tar -x -C .vdgnoaux_kk && (cd .vdgnoaux_kk && patch -p1 < ../dev/patches/diag_mlp_dgnoaux.patch
#   && patch -p1 < ../dev/patches/diag_mlp_dgkk.patch); rm -rf .vcsd && mkdir .vcsd && git archive HEAD | tar -x -C .vcsd
#   && (cd .vcsd && patch -p1 < ../dev/patches/mlp_colsum_out_dtype.patch);
#   carry [".gpu_data", ".vnomath", ".vdgnoaux", ".vdgnoaux_kk", ".vcsd"]
export MAX_JOBS=6 BUILD_ARGS="--family mlp" VARIANTS=".vnomath .vdgnoaux .vdgnoaux_kk .vcsd" VARIANT_JOBS=3 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-540}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
epir() {  # epir TREE TAG C: the four GEMMs timed in reverse order
  (cd "$1" && step "epir_$2" 45 python dev/mlp_epilogue_ncu.py --C "$3" --reverse); echo "-- $2 (reversed)"; grep TFLOP "$O/epir_$2.log"
}
for r in 1 2; do
  for t in nomath dgnoaux dgnoaux_kk; do epi .v$t ${t}${r}_2048 2048 45; epir .v$t ${t}${r}_2048 2048; done
done
for t in nomath dgnoaux dgnoaux_kk; do epi .v$t ${t}_1024 1024 45; epir .v$t ${t}_1024 1024; done
(cd .vnomath && epi_ncu 2048 "8:gelu_nomath")
(cd .vdgnoaux_kk && epi_ncu 2048 "10:dgelu_noaux_kk")
(cd .vcsd && step t_csd 90 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "not gpt_step"); tail -1 $O/t_csd.log; grep "^FAILED" $O/t_csd.log | head -5
for r in 1 2; do
  (cd .vcsd && step mlp_csd$r 45 python bench/bench_mlp.py --skip-gemm); echo "-- csd$r"; grep -E "^ +16384" $O/mlp_csd$r.log
  step mlp_main$r 45 python bench/bench_mlp.py --skip-gemm; echo "-- main$r"; grep -E "^ +16384" $O/mlp_main$r.log
done
rm -f $O/*.ncu-rep
(cd $O && tar -czf logs.tgz *.log *.txt *.csv && rm -rf *.log *.txt *.csv)
echo "all done at $((SECONDS - t0)) s"
