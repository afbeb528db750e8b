#!/usr/bin/env bash
# Session 31's first call: the whole GPU test suite on main, directory by directory (session 30 merged the c_proj
# biases into the add + LayerNorm, which changed model.py's forward signatures; its calls ran tests/layernorm,
# tests/attention, the model-level CUDA-graph / 50-step / compiled-step tests, but not tests/mlp, tests/classifier,
# tests/optim, tests/model or tests/train whole, where s30c found stale tests of the same kind in tests/attention).
# On an H200 it first runs the H200-only items (~4 min; the suite then gets what is left of the call):
#   - the CTA-pair softmax (dev/patches/softmax_xent_pair_helper.patch, tree .vpair) beside main: its classifier
#     GPU tests, then dev/softmax_xent_ab.py alternated (session 29: no gain on the H100, where the kernel already
#     runs at DRAM's rate; session 28's MUFU analysis says the H200 is where it can gain);
#   - GPT-2's step torch and tk profiled on the H200 (bench_train --profile --top 60): where the H200 step goes;
#   - issue 11's MLP table on the H200 (bench_mlp.py --skip-gemm; its last figures are the H100's of session 24).
# Prep: rm -rf .vpair && mkdir .vpair && git archive HEAD | tar -x -C .vpair && (cd .vpair && patch -p1 <
#   ../dev/patches/softmax_xent_pair_helper.patch). Carry [".gpu_data", ".vpair"].
export MAX_JOBS=12 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
h200=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -c H200)
[ "$h200" = 1 ] && [ -d .vpair ] && { (cd .vpair && MAX_JOBS=4 python -m tk_kernels.build --family classifier > $O/build.vpair.log 2>&1) & }
if [ "$h200" = 1 ] && [ -d .vpair ]; then
  wait; tail -n1 $O/build.vpair.log
  (cd .vpair && step cls_pair 60 python -m pytest -m gpu -q -p no:cacheprovider tests/classifier/test_classifier_gpu.py); tail -1 $O/cls_pair.log
  sx() { (cd $1 && step sx_$2 30 python dev/softmax_xent_ab.py); echo "-- $2"; grep -E "^kernel rows=2048|^op" $O/sx_$2.log; }
  sx . base1; sx .vpair pair1; sx . base2; sx .vpair pair2
  step prof 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 60 --out $O/prof
  grep -A4 "GPU ms per step" $O/prof.log
  step mlp_bench 90 python bench/bench_mlp.py --skip-gemm --json $O/bench_mlp.json; grep -E "^\|" $O/mlp_bench.log | head -8
fi
for d in mlp classifier optim model train attention layernorm; do
  step t_$d 110 python -m pytest -m gpu -q -p no:cacheprovider --durations=5 tests/$d
  grep -E "passed|failed|error" $O/t_$d.log | tail -1; grep "^FAILED" $O/t_$d.log | head -5
done
(cd $O && tar -czf logs.tgz *.log $(ls *.json 2>/dev/null) $(ls -d prof 2>/dev/null) && rm -rf *.log *.json prof)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
