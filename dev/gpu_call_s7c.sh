#!/usr/bin/env bash
# Session 7's third GPU call. Which family parts the GPT-2 loss-parity runs? Call 1 measured tk vs torch at up to
# 1.69% (train loss ~0.9% higher from step 150 on), call 2's control (torch compiled vs eager) at 0.87% (0.2-0.3%
# from step 150 on). Here, at once: three tk vs torch pairs with one family each kept on PyTorch by
# TK_TORCH_FAMILIES (classifier, layer_norm, attention), beside the classifier GPU tests (the loss-only op, the
# loosened rounding test).
source dev/gpu_call_lib.sh
( step test_classifier 150 python -m pytest -m gpu tests/classifier -q ) &
for f in classifier layer_norm attention; do
  ( TK_TORCH_FAMILIES=$f step lp_no_$f 330 python bench/loss_parity.py --runs gpt2 --out $O/lp_no_$f ) &
done
wait
tail -3 $O/test_classifier.log
for f in classifier layer_norm attention; do echo "--- TK_TORCH_FAMILIES=$f"; grep "kernels=tk:" $O/lp_no_$f/gpt2_tk.log; sed -n '/steps, kernels/,/largest/p' $O/lp_no_$f.log; done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log lp_no_*/*.jsonl lp_no_*/*.json 2>/dev/null
