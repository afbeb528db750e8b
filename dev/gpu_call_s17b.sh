#!/usr/bin/env bash
# Session 17, second GPU call (issue 8). Five trees built in one call (attention family only):
#   main      = working tree: HEAD + the dynamic D = 64 backward walk for CAUSAL only (non-causal keeps plain strides)
#   .variant  = c7b2b03 + dev/patches/attention_bwd_dynamic_walk.patch (the counter for non-causal too): s17a measured it
#               0.3-1.5% slower than c7b2b03 non-causal; this call puts it beside main again
#   .variant2 = main + dev/patches/attention_fwd_turn_across_items.patch (s17a: -0.8% .. +3.4% on c7b2b03)
#   .variant3 = main + dev/patches/attention_fwd_dynamic_walk.patch (the causal D = 64 forward's counter, zero-filled
#               by the binding per call)
#   .variant4 = main + both forward patches
# Prep (CPU machine): for v in .variant2 .variant3 .variant4; do mkdir $v && git ls-files -z | xargs -0 tar c | tar x -C $v; done
#   then git apply --directory=$v the patches above. Carry [".gpu_data", ".variant", ".variant2", ".variant3", ".variant4"].
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
for v in .variant .variant2 .variant3 .variant4; do
  (cd $v && MAX_JOBS=3 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
    > ${OUT:-out}/build$v.log 2>&1; echo "$v build rc=$?" >> ${OUT:-out}/build$v.log) &
done
export BUILD_ARGS="--family attention" MAX_JOBS=4
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.variant*.log; echo "all builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
F="tests/attention/test_attention_gpu.py tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py"
step tests_main 320 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $F tests/attention/test_attention_hopper_bwd_gpu.py &
for v in .variant3 .variant4; do (cd $v && step tests$v 320 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $F) & done
san() {  # tree tool seqlens
  (cd $1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 300) $cs --tool $2 --error-exitcode 9 python bench/sanitize_attention.py \
    --paths hopper --batch 1 --heads 140 --seqlens $3 --head-dims 64 --dtypes bf16 > $O/san_$2$1.log 2>&1
   echo "== $2 $1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$2$1.log)")
}
san . memcheck 129,300,700 & san .variant3 memcheck 129,300,700 & san .variant4 memcheck 129,300,700 &
san .variant3 racecheck 300 &
wait; echo "correctness done at $((SECONDS - t0)) s"
for t in main .variant3 .variant4; do echo "tests_$t: $(tail -1 $O/tests*$t.log)"; grep -E "^FAILED|^ERROR" $O/tests*$t.log | head -10; done
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
b() { (cd $1 && step bench_$2 45 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_$2.json); }
b . main; b .variant dynnc; b .variant2 turn; b .variant3 fdyn; b .variant4 both; b . main2; b .variant4 both2
for n in main dynnc turn fdyn both main2 both2; do echo "-- $n"; grep -E "causal=" $O/bench_$n.log | head -8; done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
