#!/usr/bin/env bash
# Session 23: the optimizer family's GPU tests again (two test fixes after s23b), then where the GPT-2 124M step's
# time goes now on both paths (bench_train --profile --top 40), for the next cuts of issue 12. Carry [".gpu_data"]. ~4 min.
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step tests_optim 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/optim
tail -1 $O/tests_optim.log; grep -E "^FAILED|^ERROR" $O/tests_optim.log | head
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(timeout "$(rem 150)" "$cs" --tool memcheck --error-exitcode 9 python -m pytest -m gpu -q -p no:cacheprovider \
   tests/optim/test_optim_gpu.py > $O/san_memcheck.log 2>&1; echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY' $O/san_memcheck.log) $(tail -1 $O/san_memcheck.log)") &
step train_prof 240 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 40 --out $O/train_prof
sed -n '/model  *mode/,$p' $O/train_prof.log | cut -c1-170 | head -110
wait
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
