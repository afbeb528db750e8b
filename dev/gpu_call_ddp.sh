#!/usr/bin/env bash
# Issue 13 on a machine with several GPUs (written without one: nothing here has run on a GPU yet).
#
#   bash dev/gpu_call_ddp.sh all     # everything in one command, if no per-command time limit applies
#   bash dev/gpu_call_ddp.sh 1       # the three parts of a session whose commands are limited to ~10 minutes,
#   bash dev/gpu_call_ddp.sh 2       # on the same machine (the kernels built in part 1 are reused), then part 3
#   bash dev/gpu_call_ddp.sh 3       # merges the three reports into one block for bench/RESULTS.md
#
# Part 1: bench/bench_ddp.py --fresh_build --checks loss,resume (one kernel build under N ranks: the other ranks
# wait for the build lock; the loss and resume checks with kernels=tk), then the GPU tests of this work
# (tests/train/test_batches.py's CUDA case, tests/train/test_torchrun_gpu.py). Part 2: the scaling runs with
# kernels=tk. Part 3: the scaling runs with kernels=torch, then `bench_ddp.py --merge`. GPUS (default: every
# visible one, as 1,2,4,8 on an 8-GPU machine) picks the process counts. Results in $OUT: bench_ddp_*.json /
# .md / .png and each run's log (logs_*/); the checkpoints stay in build/bench_ddp.
set -u
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PART=${1:?part: 1, 2, 3 or all}
O=${OUT:-out}; mkdir -p $O
WORK=$PWD/build/bench_ddp
export TORCH_EXTENSIONS_DIR=$WORK/torch_extensions  # where --fresh_build builds (bench_ddp: <work>/torch_extensions)
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ -z "${GPUS:-}" ]; then GPUS=1; for n in 2 4 8; do [ $n -le $NGPU ] && GPUS=$GPUS,$n; done; fi
echo "GPUs: $NGPU visible, N = $GPUS"; nvidia-smi topo -m > $O/topo.txt 2>&1
bench() {  # bench TAG SECONDS ARGS...: one bench_ddp run (SIGINT at the limit: it reports what finished)
  local tag=$1 limit=$2; shift 2
  timeout -s INT $(rem $limit) python bench/bench_ddp.py --gpus $GPUS --out $O --work $WORK --tag $tag "$@" \
    > $O/bench_ddp_$tag.log 2>&1
  echo "bench_ddp $tag rc=$? $((SECONDS - t0)) s"; sed -n '/^Scaling\|^Loss check\|^Resume\|^Kernel builds/,$p' $O/bench_ddp_$tag.log | head -60
  rm -rf $O/logs_$tag; cp -r $WORK/logs $O/logs_$tag 2>/dev/null
}
tests() {
  timeout -s SIGABRT $(rem 240) python -m pytest -m gpu -q -p no:cacheprovider --tb=short \
    tests/train/test_batches.py tests/train/test_torchrun_gpu.py > $O/tests.log 2>&1
  echo "tests rc=$? $(grep -E 'passed|failed' $O/tests.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR" $O/tests.log | head
}
case $PART in
  all) LIMIT=${LIMIT_ALL:-7200}; rm -rf $WORK
       bench all 7000 --fresh_build; tests ;;
  1) rm -rf $WORK; bench checks 420 --fresh_build --checks loss,resume; tests ;;
  2) bench scaling-tk 570 --checks scaling --kernels tk ;;
  3) bench scaling-torch 500 --checks scaling --kernels torch
     python bench/bench_ddp.py --merge $(ls $O/bench_ddp_*_checks.json $O/bench_ddp_*_scaling-tk.json \
       $O/bench_ddp_*_scaling-torch.json 2>/dev/null) --out $O --tag merged > $O/merge.log 2>&1
     echo "merge rc=$?"; tail -25 $O/merge.log ;;
  *) echo "part must be 1, 2, 3 or all"; exit 2 ;;
esac
cd $O && tar czf logs_$PART.tgz --exclude '*.tgz' *.log logs_* 2>/dev/null; true
