#!/usr/bin/env bash
# Session 23: first GPU run of the optimizer family (tk_kernels.AdamW: the gradient-norm kernel and the AdamW kernel,
# csrc/adamw.cu), then its effect: dev/optim_step.py (GPT-2 124M's parameter list, every variant side by side)
# and bench_train with the family on / off (TK_TORCH_FAMILIES=optimizer keeps torch's fused AdamW + clip_grad_norm_).
# Carry [".gpu_data"]. ~7 min.
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
step tests_optim 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/optim
tail -3 $O/tests_optim.log; grep -E "^FAILED|^ERROR" $O/tests_optim.log | head
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck synccheck racecheck; do
  (timeout "$(rem 150)" "$cs" --tool $tool --error-exitcode 9 python -m pytest -m gpu -q -p no:cacheprovider -x \
     tests/optim/test_optim_gpu.py -k "more_tensors or clipping or non_finite" > $O/san_$tool.log 2>&1
   echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)") &
done
step tests_rest 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/model tests/train
tail -1 $O/tests_rest.log; grep -E "^FAILED|^ERROR" $O/tests_rest.log | head
wait; echo "correctness done at $((SECONDS - t0)) s"
step optim_step 60 python dev/optim_step.py --model gpt2; tail -12 $O/optim_step.log
step optim_step_m 60 python dev/optim_step.py --model gpt2-medium; tail -12 $O/optim_step_m.log
step train_a 130 python bench/bench_train.py --models gpt2,shakespeare_char --kernels torch,tk --compile graphs --out $O/train_a
tail -6 $O/train_a.log
TK_TORCH_FAMILIES=optimizer step train_b 100 python bench/bench_train.py --models gpt2,shakespeare_char --kernels tk --compile graphs --out $O/train_b
tail -4 $O/train_b.log
step train_c 100 python bench/bench_train.py --models gpt2,shakespeare_char --kernels tk --compile graphs --out $O/train_c
tail -4 $O/train_c.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
