# Sourced by the GPU-call scripts from session 7 on (dev/gpu_call_s7*.sh): the environment, the call's time
# budget and the one extension build every call starts with. Keeps NVLink multicast off in every process.
#   rem N      seconds a step may take: N, or what is left of the call's LIMIT (default 585 s) if less
#   step NAME SECONDS CMD...   run CMD under timeout with its output in $O/NAME.log, then say rc and time
#   san, epi   (session 21 on) the MLP GEMM epilogues' sanitizer runs and timings in a tree: see their comments below
#   train_abab TREE   (session 24) GPT-2's step here and in TREE, alternated: see its comment below
#   sanitize TREE SECS CMD...   (session 29) compute-sanitizer memcheck and racecheck on CMD in TREE
#   prof TAG MODEL SECS TOP   (session 43) bench_train --profile, torch and tk: see its comment below
#   ba TREE TAG        (session 37) bench_attention --graphs --rounds 2 --impls tk,cudnn in TREE: $O/ba_TAG.log, and one
#                      line of its backward TFLOP/s, ours / cuDNN per shape
#   BUILD_ARGS (set before sourcing): arguments of the one build, e.g. "--family attention" (default: all families)
#   VARIANTS, VARIANT_JOBS (set before sourcing): trees beside the working tree (e.g. ".variant .variant2", patched
#              copies) whose attention family builds at the same time, VARIANT_JOBS compile jobs each (default 3),
#              into the same extension cache; logs $O/build<tree>.log; sourcing returns once all builds are done
#   VARIANT_BUILD_ARGS (set before sourcing): the variants' build arguments instead of "--family attention"
#              (e.g. "--family mlp"; " " for every family)
set -o pipefail
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt TIKTOKEN_GPT2_BPE=$PWD/.gpu_data/r50k_base.tiktoken
# The GPU machine sets PYTHONDONTWRITEBYTECODE=1, which makes every process compile torch's sources again
# (imports 15.7 s instead of 5.2 s, session 7): turn the bytecode cache on as in a normal install.
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=${OUT:-out}; mkdir -p "$O"
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
step() {
  local name=$1 secs=$2; shift 2
  timeout -s SIGABRT "$(rem "$secs")" "$@" > "$O/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc at $((SECONDS - t0)) s"
  return $rc
}
for v in $VARIANTS; do
  (log=$(cd "$O" && pwd)/build$v.log; cd "$v" && MAX_JOBS=${VARIANT_JOBS:-3} python -m tk_kernels.build ${VARIANT_BUILD_ARGS:---family attention} > "$log" 2>&1
   echo "$v build rc=$?" >> "$log") &
done
python -m tk_kernels.build $BUILD_ARGS > "$O/build.log" 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" "$O/build.log" | head -30; }
echo "build $((SECONDS - t0)) s"
if [ -n "$VARIANTS" ]; then wait; for v in $VARIANTS; do tail -n1 "$O/build$v.log"; done; echo "all builds at $((SECONDS - t0)) s"; fi
python data/shakespeare_char/prepare.py --input "$SHAKESPEARE_INPUT" > /dev/null 2>&1
python data/shakespeare/prepare.py --input "$SHAKESPEARE_INPUT" --bpe "$TIKTOKEN_GPT2_BPE" > /dev/null 2>&1
# san TREE TAG TOOL...   compute-sanitizer TOOL (memcheck, racecheck, synccheck) on the MLP GEMM epilogues in TREE
#                        (dev/mlp_epilogue_ncu.py --ncu --small $SAN_ARGS, default --sums), up to SAN_SECS (default
#                        150) s each, each in the background: $O/san_TOOL_TAG.log, one summary line each; the caller waits
san() {
  local tree=$1 tag=$2 tool; shift 2
  local cs; cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in "$@"; do
    (cd "$tree" && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$(rem "${SAN_SECS:-150}")" "$cs" --tool "$tool" --error-exitcode 9 python \
       dev/mlp_epilogue_ncu.py --ncu --small ${SAN_ARGS:---sums} > "$O/san_${tool}_$tag.log" 2>&1
     echo "== $tool $tag rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/san_${tool}_$tag.log")") &
  done
}
# sanitize TREE SECS CMD...   compute-sanitizer memcheck, then racecheck, on CMD run in TREE (each under SECS s,
#                        PyTorch's caching allocator off): $O/san_memcheck.log, $O/san_racecheck.log, their summaries
sanitize() {
  local tree=$1 secs=$2 tool cs; shift 2
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    (cd "$tree" && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step "san_$tool" "$secs" "$cs" --tool "$tool" --error-exitcode 9 "$@")
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^ran" "$O/san_$tool.log"
  done
}
# epi TREE TAG [C [SECS]]   the four MLP GEMMs alone in TREE at width C (default 768; dev/mlp_epilogue_ncu.py,
#                        do_bench medians; up to SECS s, default 30): $O/epi_TAG.log
epi() {
  (cd "$1" && step "epi_$2" "${4:-30}" python dev/mlp_epilogue_ncu.py --C "${3:-768}"); echo "-- $2"; grep TFLOP "$O/epi_$2.log"
}
# epi_ncu C [K:TAG ...]  (sessions 43, 47) Nsight Compute on the MLP GEMM's GELU and plain-store kernels at width C
#                        (dev/mlp_epilogue_ncu.py --ncu: launches 8 and 9; "10:dgelu 11:dstore" for the backward's):
#                        speed of light and the stall samples by SASS line (dev/ncu_stalls.py): $O/r_*.ncu-rep,
#                        sol_*.csv, src_*.csv, stalls_*.txt, a summary each
epi_ncu() {
  local k
  for k in ${2:-8:gelu 9:store}; do
    step ncu_${k#*:} 60 ncu --clock-control none -k regex:gemm_kernel --launch-skip ${k%%:*} -c 1 --section SpeedOfLight \
      --section SourceCounters --section WarpStateStats --import-source no -f -o $O/r_${k#*:} python dev/mlp_epilogue_ncu.py --ncu --C $1
    ncu -i $O/r_${k#*:}.ncu-rep --page source --csv --print-source sass > $O/src_${k#*:}.csv 2>> $O/ncu_export.log
    python dev/ncu_stalls.py $O/src_${k#*:}.csv --top 25 > $O/stalls_${k#*:}.txt 2>&1
    ncu -i $O/r_${k#*:}.ncu-rep --page details --csv > $O/sol_${k#*:}.csv 2>> $O/ncu_export.log
    echo "-- ${k#*:}"; grep -E "Throughput|Duration|Pipe|SM Busy" $O/sol_${k#*:}.csv | awk -F'","' '{print $(NF-2), $(NF-1), $NF}' | head -14
    head -6 $O/stalls_${k#*:}.txt | cut -c1-200
  done
}
# train_abab TREE        GPT-2's step (bench_train.py --compile graphs), each its own process: torch and tk here
#                        (train_a), then tk in TREE (train_b), here (train_c), in TREE (train_d); prints the tok/s
#                        lines. Alternating cancels the slow drift of back-to-back runs (session 24: ~0.07 ms a run).
tk_step() {  # tk_step NAME: the tk step alone, its tok/s line (train_abab's B, A, B runs)
  step $1 80 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/$1
  grep "tok/s" $O/$1.log | head -1
}
train_abab() {
  step train_a 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_a
  grep "tok/s" $O/train_a.log | head -2
  (cd "$1" && tk_step train_b); tk_step train_c; (cd "$1" && tk_step train_d)
}
# char_seeds             (session 33; session 18's loop) the flagship config as a user runs it, seeds 1337, 1, 2,
#                        alternating tk / torch, one run at a time, launch to exit (dev/timeline.py): $O/char_K_S.log,
#                        one line each with the best val loss and the timeline's launch-to-exit summary
char_seeds() {
  local seed k
  for seed in 1337 1 2; do
    for k in tk torch; do
      step char_${k}_$seed 100 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=$k \
        --seed=$seed --out_dir=out-char-$k-$seed
      echo "$k seed $seed: $(grep 'best val loss' $O/char_${k}_$seed.log | tail -1) | $(tail -1 $O/char_${k}_$seed.log)"
    done
  done
}
# h200_items             (sessions 32 on) what only an H200 can answer, run only on one and with the tree .vpair
#                        (main + dev/patches/softmax_xent_pair_helper.patch): the pair's classifier GPU tests and
#                        dev/softmax_xent_ab.py alternated with main, GPT-2's torch and tk step profiled, bench_mlp.
h200_items() {
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ -d .vpair ] || return 0
  (cd .vpair && MAX_JOBS=8 python -m tk_kernels.build --family classifier > $O/build.vpair.log 2>&1); tail -n1 $O/build.vpair.log
  (cd .vpair && step cls_pair 60 python -m pytest -m gpu -q -p no:cacheprovider tests/classifier/test_classifier_gpu.py); tail -1 $O/cls_pair.log
  local tree_tag tree tag
  for tree_tag in ".:base1" ".vpair:pair1" ".:base2" ".vpair:pair2"; do
    tree=${tree_tag%%:*}; tag=${tree_tag#*:}
    (cd $tree && step sx_$tag 30 python dev/softmax_xent_ab.py); echo "-- $tag"; grep -E "^kernel rows=2048|^op" $O/sx_$tag.log
  done
  step prof 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 60 --out $O/prof
  grep -A4 "GPU ms per step" $O/prof.log
  step mlp_bench 90 python bench/bench_mlp.py --skip-gemm --json $O/bench_mlp.json; grep -E "^\|" $O/mlp_bench.log | head -8
}
# bf TREE TAG            (session 41) the non-causal forwards and backwards of issue 8's shapes in TREE (bench_attention
#                        --graphs --causal false --impls tk,cudnn, up to 40 s): $O/bf_TAG.log, one line of the forward
#                        rows, ours / cuDNN TFLOP/s per shape
bf() {
  local shapes="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128"
  (cd $1 && step bf_$2 40 python bench/bench_attention.py --graphs --causal false --shapes "$shapes" --impls tk,cudnn)
  echo "-- $2 fwd: $(grep '^| (' $O/bf_$2.log | grep fwd | awk -F'|' '{printf "%s %s/%s; ", $2, $5, $6}')"
}
# fwd_tests TREE         (session 41) the Hopper forward's GPU tests in TREE (non-causal matrix, layouts, the portable
#                        match, repeatability, poison, raw lse; up to 60 s): $O/t_fwdTREE.log, its summary and failures
fwd_tests() {
  (cd $1 && step t_fwd$1 60 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_gpu.py \
     -k "full or layouts or hopper_forward or repeat or poison or raw_forward")
  tail -1 $O/t_fwd$1.log; grep "^FAILED" $O/t_fwd$1.log | head -3
}
# bwd_checks TREE        (session 41) the attention backward's pieces in TREE against the working tree's
#                        (dev/attention_bwd_pieces.py --save / --compare), then compute-sanitizer racecheck and memcheck
#                        of TREE on its --small cases: $O/ref.log, cmp.log, racecheck.log, memcheck.log, their summaries
bwd_checks() {
  local tool cs
  step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
  (cd $1 && step cmp 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp.log
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck memcheck; do
    (cd $1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${tool} 50 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/${tool}.log
  done
}
# prof TAG MODEL SECS TOP (session 43 on) bench_train --profile of MODEL's torch and tk steps with CUDA graphs, the TOP
#                        largest kernels (up to SECS s): $O/prof_TAG.log and $O/prof_TAG/, then its tok/s and GPU-ms lines
prof() {
  step prof_$1 $3 python bench/bench_train.py --models $2 --kernels torch,tk --compile graphs --profile --top $4 --out $O/prof_$1
  grep -E "tok/s|GPU ms per step" -A4 $O/prof_$1.log | head -20
}
# ba TREE TAG            bench_attention.py --graphs --rounds 2 --impls tk,cudnn in TREE (up to 45 s): $O/ba_TAG.log, then
#                        one line of the backward rows and one of the forward rows, ours / cuDNN TFLOP/s per shape
ba() {
  (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn)
  local pass
  for pass in bwd fwd; do
    echo "-- $2 $pass: $(grep '^| (' $O/ba_$2.log | grep $pass | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
  done
}
