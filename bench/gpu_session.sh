#!/usr/bin/env bash
# One GPU session: environment report, kernel build, GPU tests, attention benchmark.
#
#   bash bench/gpu_session.sh                  # all steps: env build test bench
#   bash bench/gpu_session.sh build test       # only some steps, in the given order
#   bash bench/gpu_session.sh train            # issue 2's check: full config/train_shakespeare_char.py
#   bash bench/gpu_session.sh train_bench      # bench/bench_train.py: whole train step, torch vs tk
#   bash bench/gpu_session.sh sanitize         # compute-sanitizer memcheck/racecheck/synccheck
#   bash bench/gpu_session.sh classifier       # classifier GPU tests + bench/bench_classifier.py
#   bash bench/gpu_session.sh layernorm        # LayerNorm family: its GPU tests, then bench_layernorm.py
#   bash bench/gpu_session.sh dropout          # attention dropout: its GPU tests, then its overhead benchmark
#   bash bench/gpu_session.sh train_seeds      # shakespeare_char, kernels=tk vs torch, seeds 1337 1 2, side by side
#   bash bench/gpu_session.sh mlp              # MLP family: its GPU tests, then bench_mlp.py (GEMM vs cuBLAS, MLP)
#   bash bench/gpu_session.sh hopper           # Hopper attention forward: check_attention.py + tests on that path
#
# Logs and results go to $OUT (default ./bench/out): build.log, gpu_tests.log, bench.log,
# bench_attention.json, bench_attention.png. Each step has its own timeout and a failing step does
# not stop the later ones; the exit status is non-zero if any step failed.
# The build cache is $TORCH_EXTENSIONS_DIR (default ./build/torch_extensions, git-ignored, so a later
# call on the same machine reuses it). Timeouts: BUILD_TIMEOUT (900 s), TEST_TIMEOUT, BENCH_TIMEOUT (600 s).
# Env: PYTEST_X=0 runs the GPU tests without -x (default: stop at the first failure);
#      PYTEST_ARGS adds pytest arguments (e.g. PYTEST_ARGS="-k layouts");
#      BENCH_ARGS adds benchmark arguments (e.g. BENCH_ARGS="--shapes small");
#      SHAKESPEARE_INPUT: a local tiny shakespeare text for the train step (default: download);
#      TRAIN_ARGS adds train.py arguments (default: --kernels=torch);
#      TRAIN_BENCH_ARGS adds bench_train.py arguments (e.g. "--models gpt2 --profile"; default
#      --profile), TRAIN_BENCH_TIMEOUT (1800 s); SANITIZE_TIMEOUT (1800 s per tool and budget).
set -o pipefail
export PYTHONUNBUFFERED=1
export MAX_JOBS=${MAX_JOBS:-16}
cd "$(dirname "$0")/.."
OUT=${OUT:-./bench/out}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-$PWD/build/torch_extensions}
mkdir -p "$OUT"
PY=${PYTHON:-python}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(env build test bench)
declare -A status

step_env() {
  nvidia-smi || true
  $PY - <<'EOF'
import torch, sys
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  cuda {torch.version.cuda}  "
      f"cudnn {torch.backends.cudnn.version()}")
for i in range(torch.cuda.device_count()):
    print(f"gpu {i}: {torch.cuda.get_device_name(i)} cc {torch.cuda.get_device_capability(i)}")
try:
    import triton; print(f"triton {triton.__version__}")
except ImportError:
    print("triton: not installed")
EOF
  (command -v nvcc && nvcc --version | tail -2) || echo "nvcc not on PATH"
  echo "CUDA_HOME=${CUDA_HOME:-unset}  MAX_JOBS=$MAX_JOBS  nproc=$(nproc)  TORCH_EXTENSIONS_DIR=$TORCH_EXTENSIONS_DIR"
}

step_build() {
  local t0=$SECONDS
  TK_VERBOSE_PTXAS=1 timeout ${BUILD_TIMEOUT:-900} $PY -m tk_kernels.build --verbose > "$OUT/build.log" 2>&1
  local rc=$?
  echo "build rc=$rc in $((SECONDS - t0))s (log: $OUT/build.log)"
  # register / spill / shared-memory summary of every kernel
  grep -E "Compiling entry|Used [0-9]+ registers|spill" "$OUT/build.log" | sed 's/^ptxas info *: //' | tail -60
  [ $rc -ne 0 ] && tail -60 "$OUT/build.log"
  return $rc
}

step_test() {
  local x="-x"
  [ "${PYTEST_X:-1}" = "0" ] && x=""
  timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu $x -q -s -rfE --durations=15 ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log"
}

step_bench() {
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_attention.py --json "$OUT/bench_attention.json" \
    --png "$OUT/bench_attention.png" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
}

step_classifier() {
  # the fused classifier: its GPU tests, then fwd+bwd vs eager and torch.compile (time, extra peak memory)
  timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu -q -s -rfE tests/classifier ${PYTEST_ARGS:-} 2>&1 \
    | tee "$OUT/classifier_tests.log"
  local rc=$?
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_classifier.py --json "$OUT/bench_classifier.json" \
    --png "$OUT/bench_classifier.png" 2>&1 | tee "$OUT/bench_classifier.log" || rc=1
  return $rc
}

step_train() {
  # full config/train_shakespeare_char.py (5000 iters); prints wall time and the best val loss
  local input=()
  [ -n "${SHAKESPEARE_INPUT:-}" ] && input=(--input "$SHAKESPEARE_INPUT")
  $PY data/shakespeare_char/prepare.py "${input[@]}" > "$OUT/prepare.log" 2>&1 || { tail -3 "$OUT/prepare.log"; return 1; }
  local t0=$SECONDS
  timeout ${TRAIN_TIMEOUT:-900} $PY train.py config/train_shakespeare_char.py ${TRAIN_ARGS:---kernels=torch} \
    > "$OUT/train.log" 2>&1
  local rc=$?
  echo "train rc=$rc, wall $((SECONDS - t0)) s (log: $OUT/train.log)"
  grep -E "^step [0-9]+:" "$OUT/train.log" | tail -3
  grep -E "best val loss" "$OUT/train.log" | tail -1
  return $rc
}

step_train_bench() {
  # bench/bench_train.py: tokens/s, ms/iter, MFU of the whole train step for kernels=torch|tk x
  # eager|compile (GPT-2 124M, 350M, the shakespeare_char model), per-op-family GPU time
  timeout ${TRAIN_BENCH_TIMEOUT:-1800} $PY bench/bench_train.py --out "$OUT" ${TRAIN_BENCH_ARGS:---profile} \
    2>&1 | tee "$OUT/bench_train.log"
}

step_sanitize() {
  # every attention kernel (dropout included) under compute-sanitizer's memcheck, racecheck and synccheck
  # at small odd shapes (bench/sanitize_attention.py), with the GPU's own shared-memory budget (a Hopper
  # and a portable pass on sm_90), an A100-sized one and the 99 KB one of RTX-class GPUs (portable kernels
  # forced: TK_SMEM_LIMIT configures only them); prints the error count and the passes per tool and budget
  local cs
  cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  [ -x "$cs" ] || { echo "compute-sanitizer not found (looked on PATH and in \$CUDA_HOME/bin)"; return 1; }
  # the nine runs are independent: run them side by side on the one GPU
  local rc=0 tool limit log n r
  for limit in "" 166912 101376; do
    for tool in memcheck racecheck synccheck; do
      log="$OUT/sanitize_${tool}_${limit:-default}.log"
      ( env -u TK_SMEM_LIMIT ${limit:+TK_SMEM_LIMIT=$limit} PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
          timeout ${SANITIZE_TIMEOUT:-1800} "$cs" --tool "$tool" --error-exitcode 1 \
          $PY bench/sanitize_attention.py > "$log" 2>&1; echo $? > "$log.rc" ) &
    done
  done
  wait
  for limit in "" 166912 101376; do
    for tool in memcheck racecheck synccheck; do
      log="$OUT/sanitize_${tool}_${limit:-default}.log"
      r=$(cat "$log.rc"); rm -f "$log.rc"
      # memcheck/synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: ... (N errors"
      n=$(grep -oE "ERROR SUMMARY: [0-9]+" "$log" | tail -1 | grep -oE "[0-9]+$")
      [ -z "$n" ] && n=$(grep -oE "SUMMARY: .*\(([0-9]+) error" "$log" | tail -1 | grep -oE "[0-9]+ error" | grep -oE "[0-9]+")
      echo "sanitize $tool TK_SMEM_LIMIT=${limit:-unset}: ${n:-?} errors, rc=$r ($(grep -E '^sanitize_attention:' "$log" | tail -1 || true)) log: $log"
      if [ "$r" != "0" ] || [ "${n:-1}" != "0" ]; then rc=1; tail -30 "$log"; fi
    done
  done
  return $rc
}

step_layernorm() {
  # residual add + LayerNorm: the family's GPU tests, then fwd+bwd tk vs eager vs torch.compile
  timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu -x -q -s -rfE tests/layernorm ${PYTEST_ARGS:-} \
    2>&1 | tee "$OUT/layernorm_tests.log" | grep -vE "^\[ln rows=" ; local rc=${PIPESTATUS[0]}
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_layernorm.py --json "$OUT/bench_layernorm.json" \
    --png "$OUT/bench_layernorm.png" 2>&1 | tee "$OUT/bench_layernorm.log" || rc=1
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_layernorm.py --graphs --json "$OUT/bench_layernorm_graphs.json" \
    2>&1 | tee "$OUT/bench_layernorm_graphs.log" || rc=1
  return $rc
}

step_hopper() {
  # the sm_90a attention forward: dev/hopper/check_attention.py (accuracy, then TFLOP/s vs cuDNN / flash /
  # portable), then the attention GPU tests forced onto the Hopper path
  timeout ${BENCH_TIMEOUT:-600} $PY dev/hopper/check_attention.py 2>&1 | tee "$OUT/check_attention.log"
  local rc=${PIPESTATUS[0]}
  TK_ATTENTION_PATH=hopper timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu -q -rfE tests/attention \
    ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/attention_hopper_tests.log" || rc=1
  return $rc
}

step_dropout() {
  # the attention dropout: its GPU tests, then fwd+bwd at p = 0.2 vs 0 (ours, SDPA flash, cuDNN)
  local x="-x"
  [ "${PYTEST_X:-1}" = "0" ] && x=""
  timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu $x -q -s -rfE --durations=10 \
    tests/attention/test_attention_dropout_gpu.py ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/dropout_tests.log"
  local rc=$?
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_attention_dropout.py --json "$OUT/bench_attention_dropout.json" \
    2>&1 | tee "$OUT/bench_dropout.log" || rc=1
  return $rc
}

step_mlp() {
  # the MLP family: its GPU tests, then the GEMM vs cuBLAS and MLP fwd+bwd vs eager / torch.compile
  timeout ${TEST_TIMEOUT:-600} $PY -m pytest -m gpu -q -s -rfE --durations=10 tests/mlp ${PYTEST_ARGS:-} 2>&1 \
    | tee "$OUT/mlp_tests.log"
  local rc=$?
  timeout ${BENCH_TIMEOUT:-600} $PY bench/bench_mlp.py --json "$OUT/bench_mlp.json" --png "$OUT/bench_mlp.png" \
    2>&1 | tee "$OUT/bench_mlp.log" || rc=1
  return $rc
}

step_train_seeds() {
  # config/train_shakespeare_char.py (dropout 0.2, --compile=True) with kernels=tk and kernels=torch for
  # seeds 1337, 1, 2: six runs side by side on the one GPU, each in its own out_dir under $OUT/train_seeds;
  # then a table of best val loss and wall time, and the eval curves (step: val loss) next to each other
  local input=()
  [ -n "${SHAKESPEARE_INPUT:-}" ] && input=(--input "$SHAKESPEARE_INPUT")
  $PY data/shakespeare_char/prepare.py "${input[@]}" > "$OUT/prepare.log" 2>&1 || { tail -3 "$OUT/prepare.log"; return 1; }
  local dir="$OUT/train_seeds" k s rc=0
  mkdir -p "$dir"
  for k in tk torch; do
    for s in 1337 1 2; do
      ( t0=$SECONDS
        timeout ${TRAIN_TIMEOUT:-1800} $PY train.py config/train_shakespeare_char.py --kernels=$k --seed=$s \
          --compile=True --out_dir="$dir/out_${k}_$s" --overwrite=True ${TRAIN_ARGS:-} > "$dir/${k}_$s.log" 2>&1
        echo "$? $((SECONDS - t0))" > "$dir/${k}_$s.rc" ) &
    done
  done
  wait
  for k in tk torch; do
    for s in 1337 1 2; do
      [ "$(cut -d' ' -f1 "$dir/${k}_$s.rc")" = "0" ] || { rc=1; echo "kernels=$k seed=$s failed:"; tail -20 "$dir/${k}_$s.log"; }
    done
  done
  $PY bench/train_seeds_table.py "$dir" || rc=1
  return $rc
}

for s in "${steps[@]}"; do
  case "$s" in
    env|build|test|bench|classifier|layernorm|train|train_bench|sanitize|dropout|train_seeds|mlp|hopper) ;;
    *) echo "unknown step '$s' (steps: env build test bench classifier layernorm train train_bench sanitize dropout train_seeds mlp hopper)"; exit 2 ;;
  esac
  echo "===== $s ====="
  "step_$s"
  status[$s]=$?
done

echo
echo "===== summary ====="
rc=0
for s in "${steps[@]}"; do
  echo "$s: rc=${status[$s]}"
  [ "${status[$s]}" != "0" ] && rc=1
done
if [ -f "$OUT/gpu_tests.log" ] && [[ " ${steps[*]} " == *" test "* ]]; then
  echo "tests: $(grep -E '[0-9]+ (passed|failed)' "$OUT/gpu_tests.log" | tail -1)"
fi
if [ -f "$OUT/bench.log" ] && [[ " ${steps[*]} " == *" bench "* ]]; then
  sed -n '/^TFLOP\/s (median)/,$p' "$OUT/bench.log"
fi
if [ -f "$OUT/bench_train.log" ] && [[ " ${steps[*]} " == *" train_bench "* ]]; then
  sed -n '/^model  /,/^wrote/p' "$OUT/bench_train.log"
fi
exit $rc
