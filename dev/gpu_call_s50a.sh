#!/usr/bin/env bash
# Session 50, first call (~8 min, an H200 wanted: issue 11 is judged there; none was lent in session 49).
#   .vcs = HEAD + dev/patches/mlp_colsum_pair.patch (db_fc and db_proj, the MLP backward's two finish-only column
#          sums over the GELU' GEMM's block sums, in one launch: bench_mlp's bf16 step 7 launches -> 6)
#   1. bench_mlp on main, GEMM table included (issue 11: C = 1024 was 1.096x on the H200 in s47f, before session
#      49's merges), JSON + PNG
#   2. .vcs's MLP GPU tests (column sums, the pair, the op's forward / backward, opcheck, graphs)
#   3. bench_mlp --skip-gemm .vcs / main alternated, ROUNDS (default 2) pairs; with PROF=1 s50b's GPT-2 medium
#      profile runs after the first pair (for a call that may be the session's only one)
# Prep: rm -rf .vcs && mkdir .vcs && git archive HEAD | tar -x -C .vcs && (cd .vcs && patch -p1 < ../dev/patches/mlp_colsum_pair.patch)
#   carry [".gpu_data", ".vcs"]
export MAX_JOBS=13 BUILD_ARGS=" " VARIANTS=".vcs" VARIANT_JOBS=3 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
step mlp 120 python bench/bench_mlp.py --json $O/bench_mlp.json --png $O/bench_mlp.png; grep -E "^\||^ +[0-9]+ +[0-9]+ " $O/mlp.log | head -30
(cd .vcs && step t_cs 150 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py \
   -k "column_sums or forward_backward or opcheck or graph"); tail -1 $O/t_cs.log; grep "^FAILED" $O/t_cs.log | head -5
ab() {  # ab R: round R of the bench_mlp pairs
  local tt
  for tt in .vcs:cs .:main; do
    (cd ${tt%%:*} && step mlp_${tt#*:}$1 45 python bench/bench_mlp.py --skip-gemm); echo "-- ${tt#*:}$1"
    grep -E "^ +16384" $O/mlp_${tt#*:}$1.log
  done
}
ab 1
if [ -n "$PROF" ]; then  # PROF=1: GPT-2 medium's torch / tk steps profiled (s50b's first step) before the second pair
  prof 350 gpt2-medium 200 60
fi
for r in $(seq 2 ${ROUNDS:-2}); do ab $r; done
(cd $O && tar -czf logs.tgz *.log prof_* 2>/dev/null && rm -rf *.log prof_*)
echo "all done at $((SECONDS - t0)) s"
