#!/usr/bin/env bash
# Session 11, call 2 (~7 minutes): the classifier's pipelined softmax kernel and vectorised backward scaling (issue 10)
# and the attention dropout back on Philox4x32-10:
# 1. compute-sanitizer memcheck / racecheck / synccheck of the classifier kernels (dev/classifier_sanitize.py);
# 2. the classifier GPU tests, the attention dropout GPU tests;
# 3. dev/classifier_timeline.py (per-kernel GPU time) and bench/bench_classifier.py (the table), alone;
# 4. bench/bench_train.py GPT-2 124M, compile, torch vs tk (the end-to-end effect).
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  timeout $(rem 90) $cs --tool $tool --error-exitcode 9 python dev/classifier_sanitize.py > $O/san_$tool.log 2>&1
  echo "== sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log | tr '\n' ' ')"
done
grep -E "rows_kernel|equal" $O/san_memcheck.log
step tests_cls 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR" $O/tests_cls.log | head
step cls_timeline 120 python dev/classifier_timeline.py
grep -E "^C=|largest|gaps >" $O/cls_timeline.log
step bench_cls 120 python bench/bench_classifier.py --json $O/bench_classifier.json
sed -n '/^classifier fwd+bwd/,$p' $O/bench_cls.log
step tests_drop 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_dropout_gpu.py
tail -1 $O/tests_drop.log; grep -E "^FAILED|^ERROR" $O/tests_drop.log | head
step train 170 python bench/bench_train.py --models gpt2 --compile compile --kernels torch,tk --out $O/train
grep -E "^gpt2 |tok/s" $O/train.log | head
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
