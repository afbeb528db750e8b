#!/usr/bin/env bash
# Session 10's last call (~5 minutes): the attention dropout on Philox4x32-7 (branch philox7: 7 rounds instead of
# 10, as FlashAttention-2): the dropout / attention GPU tests (mask vs the Python reference at 7 rounds, exactness
# against float64 with the kernels' own mask, statistics), the dropout overhead beside main (.variant: main's
# tk_kernels + bench at 3ad97d4, Philox-10), then the full config/train_shakespeare_char.py with kernels=tk (best
# val loss <= 1.47 with the new mask stream; cold compile caches). Carry [".gpu_data", ".variant"].
LIMIT=${LIMIT:-390}
source dev/gpu_call_lib.sh
step tests 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_dropout_gpu.py \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
(cd .variant && python -m tk_kernels.build --family attention > $O/build_variant.log 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
step drop_new 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash
(cd .variant && timeout $(rem 50) python bench/bench_attention_dropout.py --graphs --impls tk > $O/drop_main.log 2>&1); echo "== main rc=$?"
for f in drop_new drop_main; do echo "-- $f"; grep -E "^[0-9]+x|overhead" $O/$f.log; done
pat="Overriding: kernels|^\[.{9}(step 0|step 250|first|best|iter 5000)|timeline\]|best val"
timeout $(rem 110) python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk \
  --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_tk --overwrite=True > $O/char_tk.log 2>&1
echo "== char_tk rc=$? at $((SECONDS - t0)) s"; grep -E "$pat" $O/char_tk.log | tail -8; rm -rf $O/char_tk
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null && ls | grep -v logs.tgz | xargs rm -rf
