"""
Host time (microseconds per call) of the tk ops' Python, measured on a CPU with a stubbed extension: no GPU,
no kernels, only what our wrappers, torch.library's custom-op dispatch and autograd cost per call.

    python dev/host_overhead.py            # every row, one table
    python dev/host_overhead.py --no-compile   # skip the compiled GPT steps (they compile for ~minutes here)

Why: on the H200 (GPT-2 124M, B=16 T=1024, torch.compile default mode) kernels=tk took 37.7 ms of wall time
per iter for 32.8 ms of GPU time, and 32.5 ms under CUDA graphs: the step was host-bound by the Python of
our custom ops (12x attention fwd/bwd, 25x add_layer_norm fwd/bwd, the classifier's chunk loop per step).

How the stub works (nothing of it is shipped):
  - each family's extension is replaced in tk_kernels.build's per-process cache by an object whose methods
    only allocate outputs of the right shapes (so the real _ext() path runs);
  - the ops' own CUDA implementations (the functions under @custom_op) are registered for "cpu" too, so a
    call on CPU tensors runs our wrapper code as on a GPU (torch.library.register_kernel);
  - layernorm's eager path (autograd in C++, csrc/bindings.cpp) cannot be stubbed: its dispatch rows and the GPT
    steps run layernorm's custom ops instead (dev/layernorm_host.py times the C++ path on a GPU);
  - the MLP's GEMMs are stubbed; its cuBLAS weight and bias gradients (aten::mm.dtype, no CPU kernel) take the
    op's fallback (torch.zeros, dy.sum) instead; the GPT steps run under CPU bf16 autocast (the MLP op takes
    16-bit activations only; session 15 measured dispatch.mlp fwd+bwd at 283 us here, attention's at 145);
  - the classifier's chunks are made 8 rows long (8 chunks per call, as at GPT-2 124M B=16 T=1024);
  - attention's hopper_reason says None (the H200's case: the Hopper kernels run);
  - the dispatch registry is overridden (unsupported -> None) so a kernels=tk plan is made for the CPU, and
    layernorm's tensor_reason treats CPU tensors as if on the GPU (the CUDA device check is the only one
    that fails on a CPU; every other check runs).
The floor row is a custom op of the same schema whose kernel only allocates: the cost of torch.library's
dispatch around our code.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402
from tk_kernels import build, dispatch  # noqa: E402
from tk_kernels.families.attention import ops as A  # noqa: E402
from tk_kernels.families.classifier import ops as CL  # noqa: E402
from tk_kernels.families.layernorm import ops as LN  # noqa: E402
from tk_kernels.families.mlp import ops as MLP  # noqa: E402


def _bthd(x: torch.Tensor) -> torch.Tensor:
    B, H, T, D = x.shape
    return x.new_empty((B, T, H, D)).transpose(1, 2)


class AttentionStub:
    def attention_forward_hopper(self, q, k, v, causal, scale, dropout_p):
        return _bthd(q), q.new_empty(q.shape[:3], dtype=torch.float32), q.new_empty((0,), dtype=torch.int64)

    def attention_forward(self, q, k, v, causal, scale, dropout_p):
        return self.attention_forward_hopper(q, k, v, causal, scale, dropout_p)

    def attention_backward_hopper(self, q, k, v, o, lse, dout, causal, scale, dropout_p, rng_state):
        return _bthd(q), _bthd(k), _bthd(v)

    def attention_backward(self, q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state):
        return _bthd(q), _bthd(k), _bthd(v)

    def attention_backward_into(self, q, k, v, o, lse, dout, dq, dk, dv, causal, scale, deterministic, dropout_p,
                                rng_state, hopper, dbias=None):
        return None


class LayerNormStub:
    forward = staticmethod(lambda *a: LN._add_layer_norm_fwd_fake(*a))
    backward = staticmethod(lambda *a: LN._add_layer_norm_bwd_fake(*a))
    # the eager path's autograd is C++ (csrc/bindings.cpp's add_layer_norm), which no stub can run on a CPU:
    # eager calls take the custom ops here (dev/layernorm_host.py measures the C++ path on a GPU)
    add_layer_norm = staticmethod(lambda x, delta, w, b, eps, out_dtype, delta_bias=None:
                                  LN._custom_op_path(x, delta, w, b, eps, out_dtype, 0.0, delta_bias))


class ClassifierStub:
    def softmax_xent_grad_(self, logits, targets, row_loss, ignore_index):
        return None

    def mul_scalar(self, t, s, out_f32=False):
        return torch.empty_like(t, dtype=torch.float32 if out_f32 else t.dtype)


class MlpStub:
    def gemm_(self, *args, **kwargs):  # every output is allocated by ops.py before the call
        return None

    def column_sums(self, x, out_dtype=None):
        return x.new_empty((x.shape[1],), dtype=out_dtype or torch.float32)

    def column_sums_pair(self, a, b, out_dtype):
        return a.new_empty((a.shape[1],), dtype=out_dtype), b.new_empty((b.shape[1],), dtype=out_dtype)


def install_stubs() -> list:
    build._cached.update(attention=AttentionStub(), layernorm=LayerNormStub(), classifier=ClassifierStub(),
                         mlp=MlpStub())
    for op in (A.attention_fwd, A.attention_bwd, A.attention_qkv_fwd, A.attention_qkv_bwd,
               LN.add_layer_norm_fwd, LN.add_layer_norm_bwd,
               CL.linear_cross_entropy_fwd, CL.linear_cross_entropy_bwd, MLP.mlp_fwd, MLP.mlp_bwd):
        torch.library.register_kernel(op, "cpu", op._init_fn)
    A.hopper_reason = lambda device: None
    CL.CHUNK_BYTES = 8 * 2 * 64 * 2  # 8-row chunks at V = 64: 8 chunks of the 64 rows below, as GPT-2 at B=16 T=1024
    real_reason = LN.tensor_reason

    def tensor_reason(*args):
        reason = real_reason(*args)
        return None if reason is not None and "runs on one CUDA device" in reason else reason
    LN.tensor_reason = tensor_reason
    LN.environment_reason = lambda device: None
    ok = lambda *a, **k: None  # noqa: E731
    # aten::mm.dtype (the MLP's cuBLAS weight and bias gradients) has no CPU kernel: its fallback (torch.zeros for
    # the stubbed split-K GEMM, dy.sum for the bias) stands in, about the same host work
    MLP._MM_OUT_DTYPE = False
    overrides = [dispatch.override(f, unsupported=ok) for f in ("attention", "layer_norm", "classifier", "mlp")]
    for o in overrides:
        o.__enter__()
    return overrides


# the floor: a custom op of attention_fwd's schema whose kernel only allocates
@torch.library.custom_op("hostbench::alloc_fwd", mutates_args=(), device_types="cpu")
def alloc_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
              dropout_p: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return AttentionStub().attention_forward_hopper(q, k, v, causal, scale, dropout_p)


@alloc_fwd.register_fake
def _(q, k, v, causal, scale, dropout_p):
    return AttentionStub().attention_forward_hopper(q, k, v, causal, scale, dropout_p)


def host_us(f, n: int = 2000, repeats: int = 7) -> float:
    """The fastest of `repeats` batches of n calls of f, in microseconds of this process's CPU time per
    call (the machine is shared: CPU time and the minimum leave out the time other processes take)."""
    for _ in range(min(n, 200)):
        f()
    times = []
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(n):
            f()
        times.append((time.process_time() - t) / n * 1e6)
    return min(times)


def op_rows() -> dict[str, float]:
    B, H, T, D, C, N, V = 1, 4, 64, 64, 768, 64, 64
    qkv = torch.randn(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # (3, B, H, T, D) views, as in model.py
    q, k, v = (t.requires_grad_() for t in torch.randn(3, B, T, H, D).transpose(2, 3).unbind(0))
    qd, kd, vd = qkv[0], qkv[1], qkv[2]
    # model.py's c_attn output, for the qkv ops; T = 8 in the fwd+bwd rows, so that the CPU copies of the views
    # path's gradient concatenation (stack + copy, 2 x 24 KB) stay small beside the host time they stand for
    fused = torch.randn(B, 8, 3 * H * D, requires_grad=True)
    o, lse, rng = torch.ops.tk.attention_fwd(qd, kd, vd, True, 0.125, 0.0)
    x = torch.randn(N, C, requires_grad=True)
    d = torch.randn(N, C, requires_grad=True)
    w = torch.ones(C, requires_grad=True)
    b = torch.zeros(C, requires_grad=True)
    y, s, mean, rstd = torch.ops.tk.add_layer_norm_fwd(x.detach(), d.detach(), w.detach(), b.detach(), 1e-5,
                                                        torch.float32)
    xc = torch.randn(N, 64, requires_grad=True)  # the classifier's GEMMs run for real on the CPU: keep them tiny
    wc = torch.randn(V, 64, requires_grad=True)
    tg = torch.randint(0, V, (N,))
    plan = dispatch.plan("tk", "cpu", torch.float32, head_dim=D)
    xm = torch.randn(N, 64, dtype=torch.bfloat16, requires_grad=True)  # the MLP: bf16 activations, fp32 parameters
    mp = [torch.randn(256, 64, requires_grad=True), torch.randn(256, requires_grad=True),
          torch.randn(64, 256, requires_grad=True), torch.randn(64, requires_grad=True)]
    dym = torch.randn(N, 64, dtype=torch.bfloat16)
    plan16 = dispatch.plan("tk", "cpu", torch.bfloat16, head_dim=D)
    rows = {}

    rows["floor: alloc-only custom op (attention_fwd schema)"] = host_us(
        lambda: torch.ops.hostbench.alloc_fwd(qd, kd, vd, True, 0.125, 0.0))
    with torch.no_grad():
        rows["tk::attention_fwd (op call)"] = host_us(lambda: torch.ops.tk.attention_fwd(qd, kd, vd, True, 0.125, 0.0))
        rows["tk::attention_bwd (op call)"] = host_us(
            lambda: torch.ops.tk.attention_bwd(qd, kd, vd, o, lse, o, True, 0.125, False, 0.0, rng))
        o8, lse8, _ = torch.ops.tk.attention_qkv_fwd(fused, H, True, 0.125, 0.0)
        rows["tk::attention_qkv_fwd (op call)"] = host_us(
            lambda: torch.ops.tk.attention_qkv_fwd(fused, H, True, 0.125, 0.0))
        rows["tk::attention_qkv_bwd (op call)"] = host_us(
            lambda: torch.ops.tk.attention_qkv_bwd(fused, o8, lse8, o8, H, True, 0.125, False, 0.0, rng))
        rows["tk::add_layer_norm_fwd (op call)"] = host_us(
            lambda: torch.ops.tk.add_layer_norm_fwd(x, d, w, b, 1e-5, torch.float32))
        rows["tk::add_layer_norm_bwd (op call)"] = host_us(
            lambda: torch.ops.tk.add_layer_norm_bwd(y, s, s, mean, rstd, w, True, None))
        rows["tk::linear_cross_entropy_fwd (op call)"] = host_us(
            lambda: torch.ops.tk.linear_cross_entropy_fwd(xc, wc, tg, -1), n=1000)
        ym, pre, g, wf16, wp16 = torch.ops.tk.mlp_fwd(xm, *mp, "none")
        rows["tk::mlp_fwd (op call)"] = host_us(lambda: torch.ops.tk.mlp_fwd(xm, *mp, "none"))
        rows["tk::mlp_bwd (op call)"] = host_us(lambda: torch.ops.tk.mlp_bwd(
            dym, xm, wf16, wp16, pre, g, True, True, "float32", "float32"))
        rows["dispatch.attention (eager, no grad)"] = host_us(lambda: dispatch.attention(plan, qd, kd, vd))
        rows["dispatch.add_layer_norm (eager, no grad; custom ops)"] = host_us(lambda: dispatch.add_layer_norm(plan, x, d, w, b))

    def attn_fb():
        q.grad = k.grad = v.grad = None
        dispatch.attention(plan, q, k, v).sum().backward()

    def views_fb():  # model.py before attention_qkv: q, k, v views of the projection, autograd concatenates
        fused.grad = None
        q, k, v = fused.view(B, 8, 3, H, D).permute(2, 0, 3, 1, 4).unbind(0)
        dispatch.attention(plan, q, k, v).sum().backward()

    def fused_fb():  # model.py now
        fused.grad = None
        dispatch.attention_qkv(plan, fused, H).sum().backward()

    def ln_fb():
        x.grad = d.grad = w.grad = b.grad = None
        s2, y2 = dispatch.add_layer_norm(plan, x, d, w, b)
        torch.autograd.backward([s2, y2], [s, y])

    def ce_fb():
        xc.grad = wc.grad = None
        dispatch.linear_cross_entropy(plan, xc, wc, tg).backward()

    def mlp_fb():
        xm.grad = None
        for q in mp:
            q.grad = None
        dispatch.mlp(plan16, xm, *mp).backward(dym)

    rows["dispatch.attention fwd+bwd (eager autograd)"] = host_us(attn_fb, n=1000)
    rows["dispatch.mlp fwd+bwd (eager autograd)"] = host_us(mlp_fb, n=1000)
    rows["dispatch.attention on qkv views fwd+bwd (eager)"] = host_us(views_fb, n=1000)
    rows["dispatch.attention_qkv fwd+bwd (eager autograd)"] = host_us(fused_fb, n=1000)
    rows["dispatch.add_layer_norm fwd+bwd (custom ops)"] = host_us(ln_fb, n=1000)
    rows["dispatch.linear_cross_entropy fwd+bwd (eager)"] = host_us(ce_fb, n=1000)
    return rows


def gpt_rows(compile_: bool) -> dict[str, float]:
    from model import GPT, GPTConfig
    rows = {}
    idx = torch.randint(0, 64, (1, 16))  # tiny: the torch ops (and our classifier's GEMMs) compute on the CPU
    tgt = torch.randint(0, 64, (1, 16))
    for kernels in ("torch", "tk"):
        torch.manual_seed(0)
        cfg = GPTConfig(n_layer=12, n_head=1, n_embd=64, block_size=16, vocab_size=64, dropout=0.0,
                        bias=True, kernels=kernels)
        model = GPT(cfg)
        # bf16 autocast, as train.py trains on a GPU (the MLP op takes 16-bit activations only)
        model.plan_kernels(torch.device("cpu"), torch.bfloat16)

        def step(m):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                _, loss = m(idx, tgt)
            loss.backward()
            model.zero_grad(set_to_none=True)
        rows[f"GPT 12L step eager, kernels={kernels}"] = host_us(lambda: step(model), n=50)
        if compile_:
            cm = torch.compile(model)
            t = time.perf_counter()
            step(cm)
            print(f"  (compiled kernels={kernels} in {time.perf_counter() - t:.0f} s)", flush=True)
            rows[f"GPT 12L step compiled, kernels={kernels}"] = host_us(lambda: step(cm), n=50)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    p.add_argument("--no-compile", action="store_true", help="skip the compiled GPT steps")
    p.add_argument("--ops-only", action="store_true", help="only the per-op rows")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch._dynamo.config.cache_size_limit = 64
    stubs = install_stubs()
    rows = op_rows()
    if not args.ops_only:
        rows.update(gpt_rows(not args.no_compile))
    print(f"host us per call (CPU, stubbed extension, torch {torch.__version__}; CPU time, best of 7 batches)")
    for name, us in rows.items():
        print(f"  {name:52s} {us:9.1f}")
    for o in reversed(stubs):  # leave the registry as it was (not at interpreter exit, when it is gone)
        o.__exit__(None, None, None)


if __name__ == "__main__":
    main()
