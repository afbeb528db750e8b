#!/usr/bin/env bash
# Session 6's prepared second GPU call (same machine, warm: the build is cached): issue 9's three seeds each of the
# full config/train_shakespeare_char.py with kernels=tk and kernels=torch (dropout 0.2, compile), six runs side by
# side in the background (val losses only: their wall times are not single-run times), while the remaining GPU
# tests run: the attention matrix with both portable kernels forced, the CUDA-graphs train.py test (gradient
# accumulation + eval at step 0, the .grad-buffer fix of session 5) and the torchrun test. Then the seeds' table.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -8
}
python data/shakespeare_char/prepare.py --input "$SHAKESPEARE_INPUT" > $O/prepare.log 2>&1 || tail -3 $O/prepare.log
mkdir -p $O/seeds
for k in tk torch; do
  for s in 1337 1 2; do
    ( ts=$SECONDS
      timeout -s SIGABRT $(rem 540) python train.py config/train_shakespeare_char.py --kernels=$k --seed=$s \
        --compile=True --out_dir=$O/seeds/out_${k}_$s --overwrite=True --log_file=$O/seeds/${k}_$s.jsonl \
        > $O/seeds/${k}_$s.log 2>&1
      echo "$? $((SECONDS - ts))" > $O/seeds/${k}_$s.rc ) &
  done
done
t attn_portable 90 "TK_ATTENTION_PATH=portable TK_ATTENTION_BWD=portable" tests/attention/test_attention_gpu.py
t train 240 "" tests/train/test_cuda_graphs_gpu.py tests/train/test_torchrun_gpu.py tests/train/test_batches.py
wait
echo "seeds done $((SECONDS - t0)) s"
for f in $O/seeds/*.rc; do echo "$(basename $f .rc): rc, s = $(cat $f); $(grep 'best val loss' ${f%.rc}.log)"; done
python bench/train_seeds_table.py $O/seeds > $O/seeds_table.log 2>&1; cat $O/seeds_table.log | head -30
rm -rf $O/seeds/out_*
cd $O && tar czf logs.tgz --exclude logs.tgz *.log seeds 2>/dev/null
