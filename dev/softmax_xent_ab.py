"""The classifier's softmax kernel alone (ext.softmax_xent_grad_, in place on one chunk of logits) and the whole op,
in the tree this runs from: accuracy against float64 and do_bench medians, for an A/B of two trees run alternately:

    python dev/softmax_xent_ab.py            # (cd .vbase && python dev/softmax_xent_ab.py) for the other tree

Printed per (rows, V, dtype): the kernel's loss and gradient relative errors against a float64 softmax cross-entropy
of the same logits, its median time (L2 flushed) and the TB/s over its 4 V bytes a row; then the whole op's
fwd+bwd (tk_kernels.linear_cross_entropy, N = 16384, C = 768 / 1024, V = 50304, bf16).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dev.proj_bench import rel, us  # noqa: E402
from tk_kernels.families.classifier import ops  # noqa: E402


def kernel_case(rows, V, dtype, ignore_every=0):
    ext = ops._ext()
    logits = (torch.randn(rows, V, device="cuda") * 3).to(dtype)
    targets = torch.randint(0, V, (rows,), device="cuda")
    if ignore_every:
        targets[::ignore_every] = -1
    ref = logits.double().log_softmax(-1)
    keep = targets != -1
    ref_loss = torch.where(keep, -ref.gather(1, targets.clamp(min=0)[:, None])[:, 0], 0.0)
    ref_grad = ref.exp() - torch.nn.functional.one_hot(targets.clamp(min=0), V).double()
    ref_grad[~keep] = 0.0
    out = logits.clone()
    loss = torch.full((rows,), float("nan"), device="cuda")
    ext.softmax_xent_grad_(out, targets, loss, -1)
    err_loss, err_grad = rel(loss, ref_loss), rel(out, ref_grad)
    buf = logits.clone()
    t_us = us(lambda: ext.softmax_xent_grad_(buf, targets, loss, -1))
    tbs = 2 * rows * V * logits.element_size() / (t_us * 1e-6) / 1e12  # each logit read once, written once
    print(f"kernel rows={rows} V={V} {str(dtype)[6:]:8s} ignore_every={ignore_every}: loss err {err_loss:.2e}, "
          f"grad err {err_grad:.2e}; {t_us:8.1f} us, {tbs:.2f} TB/s")


def op_case(N, C, V):
    torch.manual_seed(0)
    x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(V, C, device="cuda") * C ** -0.5).to(torch.bfloat16).requires_grad_()
    t = torch.randint(0, V, (N,), device="cuda")

    def step():
        x.grad = w.grad = None
        ops.linear_cross_entropy(x, w, t).backward()
    ms = us(step) / 1e3
    print(f"op N={N} C={C} V={V} bf16 fwd+bwd: {ms:.3f} ms")


def main():
    print(torch.cuda.get_device_name(), torch.__version__, os.getcwd())
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        kernel_case(2048, 50304, dtype)
    kernel_case(2048, 50304, torch.bfloat16, ignore_every=7)
    kernel_case(1000, 50257, torch.bfloat16)
    kernel_case(4096, 32000, torch.bfloat16)
    kernel_case(16384, 65, torch.bfloat16)
    kernel_case(7, 65536, torch.float16)
    for C in (768, 1024):
        op_case(16384, C, 50304)


if __name__ == "__main__":
    main()
