#!/usr/bin/env bash
# Session 12, call 4: the dx GEMM with its softmax transform as a pipeline stage (the producer warpgroup's warps 1-3 rewrite
# each landed logits tile in place; the consumers run plain wgmma_ss), the onehot moved to rows.cu's finish_rows, splits
# that fill whole waves: sanitizer, classifier GPU tests on both paths, bench_classifier (tk, tk_hopper, eager, compile)
# with the per-kernel profile, and Nsight Compute of the two Hopper GEMMs (dev/classifier_ncu.py).
source dev/gpu_call_lib.sh
step smoke 60 python dev/classifier_sanitize.py; grep hopper $O/smoke.log | tail -3
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout $(rem 90) $cs --tool $tool --error-exitcode 9 python dev/classifier_sanitize.py > $O/san_$tool.log 2>&1
  echo "== sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)"
done
step tests_cls 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR" $O/tests_cls.log | head -20
step bench_cls 150 python bench/bench_classifier.py --json $O/bench_classifier.json --profile
sed -n '/^classifier fwd+bwd/,$p' $O/bench_cls.log
grep -E "logits_kernel|nvjet|softmax_xent" $O/bench_cls.log | cut -c1-110
# launches matching "logits_kernel", in order: logits, dlogits of call 1, then of call 2 (profiled: skip 2, count 2)
step ncu 200 ncu -k regex:logits_kernel -c 2 --launch-skip 2 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis \
  --metrics sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  python dev/classifier_ncu.py
grep -E "logits_kernel|Duration|hgmma|pipe_xu|Stall|Issue Slots|Warp Cycles Per Issued|Executed Ipc A|Eligible|DRAM Throughput|L2 Hit|inst_executed|Compute \(SM\)" $O/ncu.log | cut -c1-150 | head -60
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
