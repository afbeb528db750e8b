#!/usr/bin/env bash
# Session 15 (issues 11 / 12): the MLP family on in the model (dev/patches/mlp_on.patch applied), with its op's
# overheads cut (bias gradient on a ones-row GEMM, the forward's weight casts saved for the backward).
# s15a found tk vs torch 1.29% (gpt2, inside torch's own run-to-run spread, session 7) and 1.01% (shakespeare_char,
# whose dropout masks differ between the two). This call separates the family's own effect: the loss parity of
# tk with the family off (TK_TORCH_FAMILIES=mlp) against on, both runs, besides tk vs torch again and torch vs
# torch (same seed: nondeterministic reductions only) on shakespeare_char; and the GPU tests of the changed op.
source dev/gpu_call_lib.sh
E="--a_env TK_TORCH_FAMILIES=mlp"
( step lp_gpt2 500 python bench/loss_parity.py --runs gpt2 --out $O/lp_gpt2 ) &
( step lp_gpt2_mlp 500 python bench/loss_parity.py --runs gpt2 --kernels tk,tk $E --out $O/lp_gpt2_mlp ) &
( step lp_char 500 python bench/loss_parity.py --runs shakespeare_char --out $O/lp_char ) &
( step lp_char_mlp 500 python bench/loss_parity.py --runs shakespeare_char --kernels tk,tk $E --out $O/lp_char_mlp ) &
( step lp_char_torch 500 python bench/loss_parity.py --runs shakespeare_char --kernels torch,torch --out $O/lp_char_torch ) &
step tests 450 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model tests/train
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
wait
for r in lp_gpt2 lp_gpt2_mlp lp_char lp_char_mlp lp_char_torch; do echo "-- $r"; grep -E "^ +[0-9]+ |largest" $O/$r.log; cp $O/$r/loss_parity.json $O/$r.json 2>/dev/null; done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
