#!/usr/bin/env bash
# Session 12, calls 1-2: the Hopper classifier (csrc/hopper_gemm.cu: logits GEMM with row statistics, dx GEMM with
# softmax - onehot in registers; csrc/rows.cu), first GPU run:
# 1. a smoke run and compute-sanitizer memcheck / racecheck of hopper_chunk_ (dev/classifier_sanitize.py);
# 2. the classifier GPU tests on both paths;
# 3. bench/bench_classifier.py (tk = Hopper path, tk_portable, eager, compile) with the per-kernel profile at C = 768,
#    and again with the Hopper path's chunk at 2048 rows (CHUNK_BYTES 512 MiB).
source dev/gpu_call_lib.sh
step smoke 60 python dev/classifier_sanitize.py; cat $O/smoke.log | tail -8
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck synccheck; do
  timeout $(rem 90) $cs --tool $tool --error-exitcode 9 python dev/classifier_sanitize.py > $O/san_$tool.log 2>&1
  echo "== sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)"
done
step tests_cls 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf -x tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR|Error|assert" $O/tests_cls.log | head -20
step bench_cls 150 python bench/bench_classifier.py --json $O/bench_classifier.json --profile
sed -n '/^classifier fwd+bwd/,$p' $O/bench_cls.log
grep -E "^ *(logits|dlogits|xent|void|sm90|nvjet|Kernel|Self|Name)" $O/bench_cls.log | head -40
step bench_cls2048 100 python dev/classifier_chunks.py
tail -6 $O/bench_cls2048.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
