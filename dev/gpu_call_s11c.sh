#!/usr/bin/env bash
# Session 11, call 3 (~6 minutes), main after the classifier changes (register softmax kernel, mul_scalar backward)
# and the attention dropout back on Philox4x32-10:
# 1. compute-sanitizer memcheck of the classifier kernels; the classifier GPU tests;
# 2. bench/bench_classifier.py (issue 10's table);
# 3. bench/bench_train.py GPT-2 124M, torch vs tk, compile and CUDA graphs (issue 12);
# 4. the full config/train_shakespeare_char.py --kernels=tk under CUDA graphs, alone, timed from launch (issue 9's
#    val loss and issue 12's < 60 s).
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout $(rem 90) $cs --tool memcheck --error-exitcode 9 python dev/classifier_sanitize.py > $O/san_memcheck.log 2>&1
echo "== sanitizer memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/san_memcheck.log)"; grep equal $O/san_memcheck.log
step tests_cls 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR" $O/tests_cls.log | head
step bench_cls 120 python bench/bench_classifier.py --json $O/bench_classifier.json
sed -n '/^classifier fwd+bwd/,$p' $O/bench_cls.log
step train 200 python bench/bench_train.py --models gpt2 --compile compile,graphs --kernels torch,tk --out $O/train
sed -n '/^model /,$p' $O/train.log | head -8
step shakespeare 150 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk --compile=True \
  --compile_mode=reduce-overhead --out_dir=$O/sc_tk --overwrite=True
grep -E "best val|\[timeline\]" $O/shakespeare.log | tail -3; rm -rf $O/sc_tk
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
