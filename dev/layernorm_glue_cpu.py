"""
The LayerNorm family's C++ autograd (csrc/bindings.cpp: AddLayerNorm, add_layer_norm) checked on a CPU,
without a GPU: bindings.cpp is compiled as is, except for its three CUDA-only lines (the device check,
the device guard, the stream), against CPU stand-ins of the launchers (layernorm.h) written with ATen,
and the eager path (ops.add_layer_norm_op -> ext.add_layer_norm) is compared bitwise with the custom
ops and their registered Python autograd (ops._custom_op_path), both running the same stand-ins:
outputs, which outputs require grad, and every gradient (dtype, None-ness, values), over dtypes,
bias, weight dtypes, requires_grad subsets, unused outputs, strided / unaligned inputs and gradients.
What this checks is the glue (saved tensors, gradient routing, casts, copies), not the kernels: the
GPU tests (tests/layernorm/test_layernorm_gpu.py) compare the two paths on the real kernels.

    python dev/layernorm_glue_cpu.py          # builds in a temporary directory (~1 min on 2 cores)
    python dev/layernorm_glue_cpu.py --time   # then host microseconds per fwd+bwd of each path, with launchers
                                              # that do nothing (the glue's own cost; a CPU estimate only)
"""
import itertools
import os
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tk_kernels.build import _cpp_extension, find_cuda_home  # noqa: E402
from tk_kernels.families.layernorm import ops  # noqa: E402

CSRC = ROOT / "tk_kernels" / "families" / "layernorm" / "csrc"
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16

# the launchers on the CPU, with ATen: s = x + delta rounded to x's dtype, y, mean, rstd; the backward's
# dx (+ ds), ddelta, dweight, dbias in fp32 math (any deterministic math will do: both paths call these)
STAND_IN = r"""
#include <ATen/ATen.h>
#include <cstdlib>
#include "layernorm.h"
namespace tk_ln {
static at::Tensor view(const void *p, int64_t rows, int64_t cols, DType t) {
  const auto st = t == DType::f32 ? at::kFloat : t == DType::bf16 ? at::kBFloat16 : at::kHalf;
  return at::from_blob(const_cast<void *>(p), {rows, cols}, at::TensorOptions().dtype(st));
}
static bool noop() { return std::getenv("TK_GLUE_NOOP") != nullptr; }  // --time: launchers that do nothing
cudaError_t layer_norm_forward(const FwdParams &p, cudaStream_t) {
  if (noop()) return cudaSuccess;
  at::Tensor s = view(p.x, p.rows, p.cols, p.x_t).to(at::kFloat);
  if (p.delta) {
    at::Tensor s_out = view(p.s, p.rows, p.cols, p.x_t);
    s_out.copy_(s + view(p.delta, p.rows, p.cols, p.delta_t).to(at::kFloat));
    s = s_out.to(at::kFloat);
  }
  const at::Tensor mean = s.mean(-1, true), rstd = ((s - mean).pow(2).mean(-1, true) + p.eps).rsqrt();
  at::Tensor y = (s - mean) * rstd * view(p.weight, 1, p.cols, DType::f32);
  if (p.bias) y = y + view(p.bias, 1, p.cols, DType::f32);
  view(p.y, p.rows, p.cols, p.y_t).copy_(y);
  view(p.mean, p.rows, 1, DType::f32).copy_(mean);
  view(p.rstd, p.rows, 1, DType::f32).copy_(rstd);
  return cudaSuccess;
}
int64_t backward_workspace_floats(const BwdParams &) { return 0; }
cudaError_t layer_norm_backward(const BwdParams &p, cudaStream_t) {
  if (noop()) return cudaSuccess;
  const at::Tensor rstd = view(p.rstd, p.rows, 1, DType::f32), dy = view(p.dy, p.rows, p.cols, p.dy_t).to(at::kFloat);
  const at::Tensor xh = (view(p.s, p.rows, p.cols, p.x_t).to(at::kFloat) - view(p.mean, p.rows, 1, DType::f32)) * rstd;
  const at::Tensor g = dy * view(p.weight, 1, p.cols, DType::f32);
  at::Tensor dx = rstd * (g - g.mean(-1, true) - xh * (g * xh).mean(-1, true));
  if (p.ds) dx = dx + view(p.ds, p.rows, p.cols, p.x_t).to(at::kFloat);
  view(p.dx, p.rows, p.cols, p.x_t).copy_(dx);
  if (p.ddelta) view(p.ddelta, p.rows, p.cols, p.delta_t).copy_(dx);
  view(p.dweight, 1, p.cols, DType::f32).copy_((dy * xh).sum(0, true));
  if (p.dbias) view(p.dbias, 1, p.cols, DType::f32).copy_(dy.sum(0, true));
  return cudaSuccess;
}
}  // namespace tk_ln
"""

# bindings.cpp's CUDA-only lines -> their CPU stand-ins (each must match exactly once)
CPU_EDITS = [
    ("TORCH_CHECK(t.is_cuda(),", "TORCH_CHECK(true,"),
    ("const c10::cuda::CUDAGuard guard(x.device());", ""),
    ("const c10::cuda::CUDAGuard guard(s.device());", ""),
    ("c10::cuda::getCurrentCUDAStream().stream()", "nullptr"),
]


def build_cpu_ext(workdir: Path):
    cpp_extension = _cpp_extension()  # CUDA_HOME resolved as the real builds do
    src = (CSRC / "bindings.cpp").read_text()
    for old, new in CPU_EDITS:
        n = 2 if old.startswith("c10::cuda::getCurrent") else 1
        assert src.count(old) == n, f"bindings.cpp changed: {old!r} found {src.count(old)} times, expected {n}"
        src = src.replace(old, new)
    (workdir / "bindings_cpu.cpp").write_text(src)
    (workdir / "stand_in.cpp").write_text(STAND_IN)
    cuda = find_cuda_home() or "/usr/local/cuda"
    return cpp_extension.load(
        "tk_layernorm_glue_cpu", [str(workdir / "bindings_cpu.cpp"), str(workdir / "stand_in.cpp")],
        extra_include_paths=[str(CSRC), os.path.join(cuda, "include")], extra_cflags=["-O1", "-std=c++20"],
        extra_ldflags=[f"-L{os.path.join(cuda, 'lib64')}", "-lcudart"], build_directory=str(workdir), verbose=False)


def run_path(path, inputs, requires, y_dt, gy, gs, use=("y", "s")):
    leaves = [None if t is None else t.detach().clone().requires_grad_(r) for t, r in zip(inputs, requires)]
    s, y = path(*leaves, 1e-5, y_dt)
    outs = [(o, g) for name, o, g in (("y", y, gy), ("s", s, gs)) if name in use and o.requires_grad]
    if outs:
        torch.autograd.backward([o for o, _ in outs], [g for _, g in outs])
    return s, y, [None if t is None else t.grad for t in leaves]


def same(a, b) -> str | None:
    """None if the two paths' results agree bitwise, else what differs."""
    (s1, y1, g1), (s2, y2, g2) = a, b
    for name, p, q in (("s", s1, s2), ("y", y1, y2)):
        if p.dtype != q.dtype or not torch.equal(p, q) or p.requires_grad != q.requires_grad:
            return name
    for i, (p, q) in enumerate(zip(g1, g2)):
        if (p is None) != (q is None) or (p is not None and (p.dtype != q.dtype or not torch.equal(p, q))):
            return f"gradient {i} ({None if p is None else p.dtype} vs {None if q is None else q.dtype})"
    return None


def case(rows, C, x_dt, d_dt, y_dt, bias, w_dt=F32, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape, dt: torch.randn(*shape, generator=g).to(dt)  # noqa: E731
    x, d = r(rows, C, dt=x_dt) + 0.3, None if d_dt is None else r(rows, C, dt=d_dt)
    w, b = (1 + 0.2 * r(C, dt=F32)).to(w_dt), (0.1 * r(C, dt=F32)).to(w_dt) if bias else None
    return (x, d, w, b), r(rows, C, dt=y_dt), r(rows, C, dt=x_dt)


def main() -> int:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ext = build_cpu_ext(Path(tmp))
    ops._ext = lambda: ext
    for op in (ops.add_layer_norm_fwd, ops.add_layer_norm_bwd):
        torch.library.register_kernel(op, "cpu", op._init_fn)
    eager, custom = ops.add_layer_norm_op, ops._custom_op_path
    failures, n = [], 0

    def check(label, inputs, requires, y_dt, gy, gs, use=("y", "s")):
        nonlocal n
        n += 1
        a = run_path(eager, inputs, requires, y_dt, gy, gs, use)
        if a[1].requires_grad and "AddLayerNorm" not in a[1].grad_fn.name():
            failures.append(f"{label}: y.grad_fn is {a[1].grad_fn.name()}, not the C++ node")
        diff = same(a, run_path(custom, inputs, requires, y_dt, gy, gs, use))
        if diff is not None and use == ("y", "s"):
            failures.append(f"{label}: {diff} differs")
        return a, diff

    dtypes = [(F32, BF16, BF16), (BF16, BF16, BF16), (F32, F16, F16), (F16, F16, F16), (F32, F32, F32),
              (F32, None, BF16), (BF16, None, BF16), (F32, F32, BF16)]
    for (x_dt, d_dt, y_dt), bias, rows, C in itertools.product(dtypes, (True, False), (1, 7, 33), (64, 200)):
        inputs, gy, gs = case(rows, C, x_dt, d_dt, y_dt, bias, seed=n)
        check(f"dtypes {x_dt}/{d_dt}/{y_dt} bias={bias} ({rows},{C})", inputs, [True] * 4, y_dt, gy, gs)
    for req, d_dt in itertools.product(itertools.product((False, True), repeat=4), (BF16, None)):
        inputs, gy, gs = case(9, 64, F32, d_dt, BF16, True, seed=n)
        (s, y, _), _ = check(f"requires_grad {req} delta={d_dt}", inputs, req, BF16, gy, gs)
        if y.requires_grad != any(r for r, t in zip(req, inputs) if t is not None):
            failures.append(f"requires_grad {req}: y.requires_grad is {y.requires_grad}")
    for w_dt, (x_dt, d_dt, y_dt) in itertools.product((BF16, F16, F32), [(F32, BF16, BF16), (F16, None, F16)]):
        inputs, gy, gs = case(5, 96, x_dt, d_dt, y_dt, True, w_dt, seed=n)
        (_, _, grads), _ = check(f"weight {w_dt} {x_dt}/{d_dt}/{y_dt}", inputs, [True] * 4, y_dt, gy, gs)
        if grads[2].dtype != w_dt or grads[3].dtype != w_dt:
            failures.append(f"weight {w_dt}: gradient dtypes {grads[2].dtype}, {grads[3].dtype}")
    # unused outputs: y unused -> the residual gradient only, no weight / bias gradient (custom ops: zeros)
    inputs, gy, gs = case(6, 64, F32, BF16, BF16, True, seed=n)
    (_, _, g), _ = check("y unused", inputs, [True] * 4, BF16, gy, gs, use=("s",))
    if not (torch.equal(g[0], gs) and g[1].dtype == BF16 and torch.equal(g[1], gs.to(BF16))
            and g[2] is None and g[3] is None):
        failures.append("y unused: wrong gradients")
    _, diff = check("s unused", inputs, [True] * 4, BF16, gy, gs, use=("y",))
    if diff is not None:
        failures.append(f"s unused: {diff} differs")
    x = inputs[0].clone().requires_grad_()
    if eager(x, None, inputs[2], None, 1e-5, BF16)[0] is not x:
        failures.append("without delta the eager path does not return x itself")
    # strided / unaligned / transposed inputs, strided incoming gradients
    g = torch.Generator().manual_seed(1)
    w, b = 1 + 0.1 * torch.randn(64, generator=g), 0.1 * torch.randn(64, generator=g)
    xs = {"strided": torch.randn(8, 2, 64, generator=g)[:, 1], "unaligned": torch.randn(8 * 64 + 1, generator=g)[1:].view(8, 64),
          "transposed": torch.randn(64, 8, generator=g).t()}
    d, gy, gs = torch.randn(64, 8, generator=g).to(BF16).t(), torch.randn(64, 8, generator=g).to(BF16).t(), torch.randn(64, 8, generator=g).t()
    for (name, xi), di in itertools.product(xs.items(), (d, None)):
        check(f"{name} x, delta={di is not None}", (xi, di, w, b), [True] * 4, BF16, gy, gs)
    # errors from the extension's own checks come through the C++ path
    try:
        eager(torch.randn(4, 100), None, torch.randn(100), None, 1e-5, F32)
        failures.append("width 100 did not raise")
    except RuntimeError as e:
        if "multiple of 8" not in str(e):
            failures.append(f"width 100: {e}")
    print(f"{n} cases, C++ autograd path vs custom ops: " + ("all bitwise equal" if not failures else
                                                            f"{len(failures)} FAILED"))
    for f in failures:
        print("  " + f)
    if "--time" in sys.argv[1:]:
        time_paths(ext)
    return 1 if failures else 0


def time_paths(ext) -> None:
    """Host us per fwd+bwd at (64, 768), x fp32, delta / y bf16, with launchers that do nothing."""
    import time
    os.environ["TK_GLUE_NOOP"] = "1"
    x = torch.randn(64, 768, requires_grad=True)
    d = torch.randn(64, 768).to(BF16).requires_grad_()
    w, b = torch.ones(768, requires_grad=True), torch.zeros(768, requires_grad=True)
    dy, ds = torch.randn(64, 768).to(BF16), torch.randn(64, 768)

    class PythonFunction(torch.autograd.Function):  # the session-4 eager path (see dev/layernorm_host.py)
        @staticmethod
        def forward(ctx, x, delta, weight, bias, eps, out_dtype):
            ctx.set_materialize_grads(False)
            k = ops._kernel_ready
            out = ext.forward(k(x), k(delta), k(weight), k(bias), eps, out_dtype)
            ops._setup_context(ctx, (x, delta, weight, bias, eps, out_dtype), out)
            return out

        @staticmethod
        def backward(ctx, dy, ds, dmean, drstd):
            s, mean, rstd, weight = ctx.saved_tensors
            k = ops._kernel_ready
            dx, dd, dw, db, _ = ext.backward(k(dy), k(ds), k(s), mean, rstd, k(weight), True, ctx.delta_dtype)
            return dx, dd, dw, db, None, None

    class Bare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, d, w, b):
            ctx.set_materialize_grads(False)
            return torch.empty(x.shape, dtype=BF16), torch.empty(x.shape)

        @staticmethod
        def backward(ctx, dy, ds):
            return torch.empty(x.shape), torch.empty(x.shape, dtype=BF16), torch.empty(768), torch.empty(768)

    def fwdbwd(f):
        def run():
            x.grad = d.grad = w.grad = b.grad = None
            s, y = f()
            torch.autograd.backward([s, y], [ds, dy])
        return run

    paths = {
        "C++ autograd (ext.add_layer_norm)": lambda: ops.add_layer_norm_op(x, d, w, b, 1e-5, BF16),
        "Python Function (session 4 path)": lambda: PythonFunction.apply(x, d, w, b, 1e-5, BF16)[1::-1],
        "custom ops + register_autograd": lambda: ops._custom_op_path(x, d, w, b, 1e-5, BF16),
        "bare Python Function, no kernels": lambda: Bare.apply(x, d, w, b)[::-1],
    }

    def no_autograd():
        y, s, mean, rstd = ext.forward(x.detach(), d.detach(), w.detach(), b.detach(), 1e-5, BF16)
        ext.backward(dy, ds, s, mean, rstd, w.detach(), True, BF16)
    print("host us per fwd+bwd on this CPU (launchers do nothing; CPU time, best of 9 interleaved rounds x 1000):")
    runs = {name: fwdbwd(f) for name, f in paths.items()}
    runs["ext.forward + ext.backward, no autograd"] = no_autograd
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(9):  # the paths take turns, so a busy spell of the shared machine hits them all
        for name, run in runs.items():
            for _ in range(100):
                run()
            t = time.process_time()
            for _ in range(1000):
                run()
            best[name] = min(best[name], (time.process_time() - t) * 1e3)
    for name, us in best.items():
        print(f"  {name:42s} {us:7.1f}")


if __name__ == "__main__":
    sys.exit(main())
