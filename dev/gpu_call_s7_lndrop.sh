#!/usr/bin/env bash
# Branch s7-dropout-ln, its GPU verification in one call (~9 minutes on an H200): issue 12's residual dropout
# folded into the LayerNorm family's fused add (tk::dropout_add_layer_norm_fwd / _bwd, the model passing the
# sublayer outputs before dropout). 1. bench/bench_layernorm_dropout.py: the check against float64 with the
# kernels' mask at (16384, 384) and (16384, 768), then the fused op vs F.dropout + our op vs eager / compiled
# PyTorch, eager calls and CUDA-graph replays; 2. the new GPU tests; 3. the existing GPU tests the change
# touches (the LayerNorm family's ops and model tests, the attention dropout whose headers and generator glue
# moved); 4. the end-to-end step: bench_train.py shakespeare_char under CUDA graphs with dropout 0.2, torch vs
# tk, with the per-family profile and the top kernels (Inductor's dropout kernels should be gone on tk).
source dev/gpu_call_lib.sh
t() {  # t NAME SECONDS pytest-args...: one pytest run, its last line and failures
  local name=$1 limit=$2; shift 2
  timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "== $name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"
  grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -10
}
step bench_ln_dropout 170 python bench/bench_layernorm_dropout.py --json $O/bench_layernorm_dropout.json
sed -n '/^check/,$p' $O/bench_ln_dropout.log
t ln_dropout_tests 190 tests/layernorm/test_layernorm_dropout_gpu.py
t touched 100 tests/layernorm/test_layernorm_gpu.py tests/attention/test_attention_dropout_gpu.py \
  -k "opcheck or compiled or training_losses or eager_path_equals_custom or reproducible or mask_op or kept_fraction or same_seed or cuda_graph or p0 or eval_mode"
step bench_train 150 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 \
  --kernels torch,tk --profile --top 12 --out $O/train
tail -50 $O/bench_train.log
tar czf $O/logs.tgz $O/*.log $O/*.json 2>/dev/null
