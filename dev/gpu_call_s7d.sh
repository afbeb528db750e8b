#!/usr/bin/env bash
# Session 7's fourth GPU call (the last ~300 s of device time). Is the ~15 s of imports before train.py's first
# evaluation (s7a/s7b) the GPU machine's Python compiling torch's sources on every run (no bytecode cache: the venv
# has no __pycache__ in torch/_dynamo, and PYTHONPYCACHEPREFIX alone did not help)? Then: the full shakespeare_char
# under CUDA graphs with kernels=tk and Python's bytecode cache on, as in a normal install, twice (cold and warm
# compile caches), launch to exit.
env | grep -E "^PYTHON" ; python -c "import sys; print('dont_write_bytecode', sys.flags.dont_write_bytecode)"
imp="import time; t=time.time(); import torch, torch._dynamo, torch._inductor.compile_fx; print(f'{time.time()-t:.2f}')"
for i in 1 2; do echo "import with the bytecode cache on: $(env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc python -c "$imp") s"; done
LIMIT=${LIMIT:-235}
source dev/gpu_call_lib.sh
pat="Overriding: kernels|using fused|^\[.{9}(step 0|step 250|first|best|iter 5000)|timeline\]"
for run in cold warm; do
  env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc timeout $(rem 90) python dev/timeline.py -- python train.py \
    config/train_shakespeare_char.py --kernels=tk --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_tk \
    --overwrite=True > $O/timeline_$run.log 2>&1
  echo "== $run rc=$? at $((SECONDS - t0)) s"; grep -E "$pat" $O/timeline_$run.log; rm -rf $O/char_tk
done
