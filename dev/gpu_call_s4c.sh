#!/usr/bin/env bash
# Session 4, last GPU call (the lead's): build (families in parallel); the whole train step, kernels=torch
# vs tk with torch.compile (GPT-2 124M and 350M; the Hopper backward and the compile fix in), the new MLP
# epilogues (dev/hopper/check_mlp_epilogue.py) and the train step with the MLP family on; the helpers' dev
# variants; the LayerNorm host-time breakdown. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
rem() { local r=$((578 - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }  # a step's limit within the call's
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout -s SIGABRT $(rem 230) python bench/bench_train.py --models gpt2,gpt2-medium --kernels torch,tk --compile compile \
  --warmup 3 --iters 15 --profile --out $O/train > $O/bench_train.log 2>&1
echo "bench_train rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$|Warning|_warn_once" $O/bench_train.log | tail -22
timeout $(rem 80) python dev/hopper/check_mlp_epilogue.py --no-v1 > $O/check_mlp_epilogue.log 2>&1; echo "check_mlp_epilogue rc=$? $((SECONDS - t0)) s"
tail -30 $O/check_mlp_epilogue.log
# the train step with the MLP family on, only if the MLP alone is near the best PyTorch at C = 768
r=$(awk '/^MLP fwd\+bwd/{f=1} f && $1=="768"{print $NF}' $O/check_mlp_epilogue.log | tr -d x)
if python -c "import sys; sys.exit(0 if float('${r:-0}') >= 0.9 else 1)" 2>/dev/null; then
  timeout -s SIGABRT $(rem 70) python dev/bench_train_using.py mlp -- --models gpt2 --kernels tk --compile compile --warmup 3 \
    --iters 15 --out $O/train_mlp > $O/bench_train_mlp.log 2>&1; echo "bench_train +mlp rc=$? $((SECONDS - t0)) s"
  grep -E "tok/s|rror" $O/bench_train_mlp.log | head -5
else echo "MLP at C=768: ${r:-?}x the best PyTorch; the train step with the MLP on is skipped"; fi
timeout $(rem 45) python dev/hopper/check_mlp_dw.py > $O/check_mlp_dw.log 2>&1; echo "check_mlp_dw rc=$? $((SECONDS - t0)) s"; tail -22 $O/check_mlp_dw.log
timeout $(rem 45) python dev/hopper/check_attention_bwd_variants.py > $O/check_attention_bwd_variants.log 2>&1; echo "bwd variants rc=$? $((SECONDS - t0)) s"; tail -16 $O/check_attention_bwd_variants.log
timeout $(rem 30) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; tail -11 $O/layernorm_host.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train train_mlp 2>/dev/null
