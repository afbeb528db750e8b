#!/usr/bin/env bash
# GPU check of branch s6-fixes (review s6 findings 1, 2, 5, 7, 11): what it changed that no GPU ran yet.
#   - tests/attention: the A100-budget cases now force the portable kernels and assert the paths; the small_smem
#     fixture and the dropout smem test assert backward_path; the helpers moved to tests/gpu_test_utils.py;
#     the dropout module lost its no-op fixture (the whole attention GPU suite, ~150 s in session 5)
#   - tests/classifier: the bf16 dW bound by chunk count (prints ours / torch and ours / rounded per case) and
#     the new 32-chunk case (65536, 256, 32771); tests/layernorm: its no-op fixture removed
#   - bench/sanitize_attention.py with dropout and forced paths: memcheck at the H200's own budget (hopper and
#     portable passes) and racecheck at the two smaller budgets (portable pass), side by side
# One command: `bash dev/gpu_call_s6_fixes.sh` (OUT=dir for the logs; LIMIT=seconds overall, default 585).
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS pytest-args...: one pytest run, its last line and failures
  local name=$1 limit=$2; shift 2
  timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -s -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -8
}
# the sanitizer runs first, in the background (they take minutes each; the tests share the GPU meanwhile)
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() {  # san TOOL LIMIT_BYTES|"" : one sanitizer run of bench/sanitize_attention.py
  env -u TK_SMEM_LIMIT ${2:+TK_SMEM_LIMIT=$2} PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout -s SIGINT $(rem 500) \
    "$cs" --tool $1 --error-exitcode 1 python bench/sanitize_attention.py > $O/sanitize_$1_${2:-default}.log 2>&1
  echo $? > $O/sanitize_$1_${2:-default}.rc
}
san memcheck "" & san racecheck 166912 & san racecheck 101376 &
t attn 240 tests/attention
grep -E "^\[A100-budget" $O/attn.log | head -4
t families 150 tests/classifier tests/layernorm
grep -E "\] dw: " $O/families.log | grep bf16
wait
for f in $O/sanitize_*.log; do
  echo "$(basename $f .log) rc=$(cat ${f%.log}.rc) $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $f | tail -1)"
  grep -E "^sanitize_attention:" $f
done
echo "total $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
