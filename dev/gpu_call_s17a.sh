#!/usr/bin/env bash
# Session 17, first GPU call (issue 8). Three trees built in one call:
#   main      = HEAD: the full attention GPU suite (owed since session 16: the final boustrophedon backward walk and
#               the persistent_blocks() refactor never ran test_attention_gpu / test_attention_qkv_gpu).
#   .variant  = HEAD + dev/patches/attention_bwd_dynamic_walk.patch: the persistent D = 64 backward taking its items
#               from a global counter (pipeline scheduler::DYNAMIC; the producer's atomicAdd, the item handed to the
#               consumers through shared memory; the prep kernel zeroes the counter; producer 56 / consumers 224
#               registers at D = 64). Session 16's static walk lost 2.4% at causal (4,16,4096,64).
#   .variant2 = HEAD + dev/patches/attention_fwd_turn_across_items.patch: the D = 64 forward's ping-pong turn carried
#               across items.
# Prep (CPU machine):
#   rm -rf .variant .variant2 && mkdir .variant .variant2 && git archive HEAD | tar -x -C .variant && \
#     git archive HEAD | tar -x -C .variant2 && git apply --directory=.variant dev/patches/attention_bwd_dynamic_walk.patch && \
#     git apply --directory=.variant2 dev/patches/attention_fwd_turn_across_items.patch
# Carry [".gpu_data", ".variant", ".variant2"]. The correctness steps run concurrently (they share the GPU; no timing
# is taken from them); the benchmarks run one at a time afterwards.
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
for v in .variant .variant2; do
  (cd $v && MAX_JOBS=5 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
    > ${OUT:-out}/build$v.log 2>&1; echo "$v build rc=$?" >> ${OUT:-out}/build$v.log) &
done
export BUILD_ARGS="--family attention" MAX_JOBS=6
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.variant.log $O/build.variant2.log; echo "all builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
T="tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_dropout_gpu.py"
step tests_main 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $T \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_qkv_gpu.py &
(cd .variant && step tests_bwd 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $T) &
(cd .variant2 && step tests_fwd 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py) &
for v in .variant .variant2; do
  (cd $v && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 200) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
    --paths hopper --batch 1 --heads 140 --seqlens 129,300,700 --head-dims 64 --dtypes bf16 > $O/san_mem$v.log 2>&1
   echo "== memcheck $v rc=$? $(grep 'ERROR SUMMARY' $O/san_mem$v.log)") &
done
wait; echo "correctness done at $((SECONDS - t0)) s"
for t in main bwd fwd; do echo "tests_$t: $(tail -1 $O/tests_$t.log)"; grep -E "^FAILED|^ERROR" $O/tests_$t.log | head -10; done
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
step bench_main 45 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json
(cd .variant && step bench_dyn 45 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_dyn.json)
(cd .variant2 && step bench_turn 45 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_turn.json)
step drop_main 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/drop_main.json
echo "-- main"; grep -E "fwd|bwd" $O/bench_main.log | head -16; echo "-- dynamic bwd walk"; grep -E "bwd" $O/bench_dyn.log | head -8
echo "-- fwd turn across items"; grep -E "fwd" $O/bench_turn.log | head -8; echo "-- dropout"; tail -12 $O/drop_main.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
