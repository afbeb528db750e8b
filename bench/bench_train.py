"""
Whole-model training-step benchmark: what kernels=tk does to train.py's step (nanoGPT bench.py's
role, for this repo's model and optimizer).

    python bench/bench_train.py                        # all models x kernels=torch|tk x eager|compile
    python bench/bench_train.py --models gpt2 --profile
    python bench/bench_train.py --device=cpu --tiny    # CPU smoke run (a tiny model, 2 iterations)
    python bench/bench_train.py --compile eager,compile,graphs   # + torch.compile(mode="reduce-overhead")
    python bench/bench_train.py --models gpt2 --batch_size 1 --block_size 64   # ~ the host's time per step

Per mode: tokens/s, ms/iter and MFU (GPT.estimate_mfu) of one training step as train.py takes it:
bf16 autocast forward, backward, gradient clipping at 1.0, fused AdamW step (on CUDA), zero_grad.
Inputs are random tokens (no dataset), the same batch every step; the warm-up steps (which
include torch.compile's compilation) are not timed. All modes run in one process, one after the
other, with the memory freed in between; a mode that fails (kernels=tk without a usable GPU,
out of memory, ...) records its error and the run goes on.

Models: gpt2 (124M: 12 layers x 768, 12 heads) and gpt2-medium (350M: 24 x 1024, 16 heads) at
block 1024, batch 16, vocab 50304, with GPT-2's biases; shakespeare_char: config/train_shakespeare_char.py's
model, batch and block (6 x 384, block 256, batch 64, 65 characters, no biases: train.py's default); --batch_size / --block_size override
them. Dropout is 0 everywhere unless --dropout is given (the step train.py takes with that config
setting: embedding, attention and residual dropout; kernels=tk runs the attention's and the residual dropout in its kernels).

--profile adds a torch.profiler pass per mode and prints its GPU time per op family (GEMM,
attention, LayerNorm, fused (triton), elementwise, loss, optimizer, other), classified by kernel
name (see FAMILY_PATTERNS); on a CPU it classifies the CPU time of the aten ops instead.
--power samples the GPU's SM clock and board power (nvidia-smi, every 50 ms) while the timed steps run and
reports their means and the energy per step: a GPT-2 step keeps an H100 at its 700 W limit, where the clock
falls from 1980 MHz to 1260-1700 (session 44), so tokens/s there follows each mode's energy per step (give it
--iters for a second or more of steps; nvidia-smi needs a few hundred ms to start).
Results: a table on stdout, and bench_train.json + bench_train.png (if matplotlib is installed)
in --out.
"""

import argparse
import contextlib
import gc
import io
import json
import os
import sys
import time
import traceback

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from model import GPT, GPTConfig  # noqa: E402
from tk_kernels import TKUnsupportedError, dispatch  # noqa: E402

CHAR_CONFIG = os.path.join(ROOT, "config", "train_shakespeare_char.py")
CHAR_VOCAB = 65  # tiny shakespeare's distinct characters (data/shakespeare_char/prepare.py)
# GPT-2's models keep GPT-2's biases; shakespeare_char is the model train.py builds from its config, and train.py's
# default is bias = False (session 9 found the two disagreeing, 6.29 ms per torch step here with bias = True against
# train.py's 5.43 ms, and with them the MFU each printed)
TRAIN_BIAS = False

# op family <- substrings of (lower-cased) kernel or op names, tried in this order
FAMILY_PATTERNS = (
    ("attention", ("flash", "fmha", "attention", "attn", "sdpa", "tk::", "bwd_dkdv", "bwd_dq",
                   "bwd_delta")),
    ("GEMM", ("gemm", "cutlass", "sm90_xmma", "xmma", "nvjet", "cublas",
              "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("loss", ("nll", "log_softmax", "cross_entropy")),
    ("optimizer", ("adam", "foreach", "multi_tensor")),
    ("LayerNorm", ("layer_norm", "layernorm", "tk_ln::")),
    ("fused (triton)", ("triton_",)),
    ("elementwise", ("elementwise", "reduce_kernel", "aten::")),
)
FAMILIES = tuple(name for name, _ in FAMILY_PATTERNS) + ("other",)


def classify(name: str) -> str:
    """The op family of a kernel (or aten op) name."""
    lower = name.lower()
    for family, patterns in FAMILY_PATTERNS:
        if any(p in lower for p in patterns):
            return family
    return "other"


def model_specs(tiny: bool) -> dict[str, dict]:
    """name -> GPTConfig arguments and batch size of each benchmarked model."""
    if tiny:
        return {"tiny": dict(n_layer=2, n_head=2, n_embd=128, block_size=64, vocab_size=256, bias=True,
                             batch_size=4)}
    char = {}
    with open(CHAR_CONFIG) as f:
        exec(f.read(), {}, char)  # a plain file of assignments, as configurator.py reads it
    return {
        "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304, bias=True,
                     batch_size=16),
        "gpt2-medium": dict(n_layer=24, n_head=16, n_embd=1024, block_size=1024, vocab_size=50304, bias=True,
                            batch_size=16),
        "shakespeare_char": dict(n_layer=char["n_layer"], n_head=char["n_head"],
                                 n_embd=char["n_embd"], block_size=char["block_size"],
                                 vocab_size=CHAR_VOCAB, batch_size=char["batch_size"],
                                 # what train.py trains with that config: its bias unless the config sets one
                                 bias=char.get("bias", TRAIN_BIAS)),
    }


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parse_power_samples(text: str) -> dict | None:
    """Means of `nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits` lines ("1755, 698.52"):
    {"sm_mhz", "watts", "samples"}, or None without a usable line ([N/A] fields and other lines are skipped)."""
    clocks, watts = [], []
    for line in text.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 2:
            continue
        try:
            c, w = float(parts[0]), float(parts[1])
        except ValueError:
            continue
        clocks.append(c)
        watts.append(w)
    if not clocks:
        return None
    return dict(sm_mhz=round(sum(clocks) / len(clocks), 1), watts=round(sum(watts) / len(watts), 1),
                samples=len(clocks))


class PowerSampler:
    """With `with PowerSampler(device) as ps: ...`, ps.result is parse_power_samples() of what nvidia-smi sampled
    meanwhile (every 50 ms, the device picked by its PCI bus id), or None (no CUDA device, no nvidia-smi, no sample),
    with the reason in ps.note."""

    def __init__(self, device: torch.device):
        self.device, self.proc, self.result, self.note = device, None, None, ""

    def _gpu_id(self) -> str:
        props = torch.cuda.get_device_properties(self.device)
        bus = getattr(props, "pci_bus_id", None)
        if bus is None:  # an older torch: nvidia-smi's index (its order may differ from CUDA's)
            return str(self.device.index or 0)
        return f"{getattr(props, 'pci_domain_id', 0):08X}:{bus:02X}:{getattr(props, 'pci_device_id', 0):02X}.0"

    def __enter__(self):
        import shutil
        import subprocess
        smi = shutil.which("nvidia-smi")
        if self.device.type != "cuda" or smi is None:
            self.note = "needs a CUDA device and nvidia-smi"
            return self
        self.proc = subprocess.Popen([smi, "-i", self._gpu_id(), "--query-gpu=clocks.sm,power.draw",
                                      "--format=csv,noheader,nounits", "-lms", "50"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return self

    def __exit__(self, *exc):
        if self.proc is None:
            return False
        self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=10)
        except Exception:  # noqa: BLE001 (a hung nvidia-smi must not end the benchmark)
            self.proc.kill()
            out, _ = self.proc.communicate()
        self.result = parse_power_samples(out or "")
        if self.result is None:
            self.note = "nvidia-smi gave no sample: " + " ".join((out or "").split())[:120]
        return False


def profile_step(step, device: torch.device, steps: int = 3, trace: str | None = None,
                 top: int = 0) -> tuple[dict[str, float], list]:
    """ms per step of each op family over `steps` profiled steps: GPU kernel time on CUDA,
    self CPU time of the ops on a CPU. With `trace`, also writes the profile as a Chrome trace there.
    Also returns the `top` kernels (ops on a CPU) by time: [name, family, ms per step, calls per step]."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        sync(device)
    if trace:
        prof.export_chrome_trace(trace)
    totals = dict.fromkeys(FAMILIES, 0.0)
    per_name: dict[str, list] = {}
    for e in prof.events():
        if getattr(e, "is_user_annotation", False):
            # a record_function range (Optimizer.step#AdamW.step, ...) mirrored on the GPU timeline: its span
            # covers kernels counted on their own, and the gaps between them
            continue
        if device.type == "cuda":
            if e.device_type != DeviceType.CUDA:
                continue
            us = getattr(e, "device_time_total", None)
            if us is None:
                us = e.cuda_time_total  # older torch
        else:
            if e.device_type != DeviceType.CPU or not e.name.startswith("aten::"):
                continue
            us = e.self_cpu_time_total
        totals[classify(e.name)] += us / 1000.0 / steps
        row = per_name.setdefault(e.name, [0.0, 0])
        row[0] += us / 1000.0 / steps
        row[1] += 1
    ranked = sorted(per_name.items(), key=lambda kv: -kv[1][0])[:top]
    return totals, [[n, classify(n), round(ms, 4), round(c / steps, 1)] for n, (ms, c) in ranked]


COMPILE_MODES = ("eager", "compile", "graphs")  # graphs: torch.compile(mode="reduce-overhead"), CUDA graphs


def run_mode(name: str, spec: dict, kernels: str, compile_mode: str, args, device: torch.device,
             ptdtype: torch.dtype) -> dict:
    """Benchmark one (model, kernels, eager/compile/graphs) mode; the result dict (with 'error' if it
    failed)."""
    result = dict(model=name, kernels=kernels, compile=compile_mode, batch_size=spec["batch_size"],
                  block_size=spec["block_size"])
    cfg = {k: v for k, v in spec.items() if k != "batch_size"}
    B, T = spec["batch_size"], spec["block_size"]
    model = optimizer = step_model = None
    try:
        torch.manual_seed(0)
        with contextlib.redirect_stdout(io.StringIO()):  # GPT's and the optimizer's set-up prints
            model = GPT(GPTConfig(**cfg, dropout=args.dropout, kernels=kernels)).to(device)
            optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), device.type)
        result["params_M"] = round(model.get_num_params() / 1e6, 2)
        result["fused_adamw"] = bool(optimizer.defaults.get("fused"))
        result["optimizer"] = type(optimizer).__module__.split(".")[0] + "." + type(optimizer).__name__
        plan = model.plan_kernels(device, ptdtype, dropout_p=args.dropout, warn=False)  # tk: raises if it cannot run
        result["plan"] = plan.describe()
        result["weight16"] = model.keep_weight16(optimizer)  # as train.py: 16-bit weight copies from the step
        graphs = compile_mode == "graphs" and device.type == "cuda"
        step_model = (model if compile_mode == "eager" else
                      torch.compile(model, mode="reduce-overhead" if compile_mode == "graphs" else None))
        ctx = contextlib.nullcontext() if ptdtype == torch.float32 else torch.autocast(device.type, dtype=ptdtype)
        X = torch.randint(cfg["vocab_size"], (B, T), device=device)
        Y = torch.randint(cfg["vocab_size"], (B, T), device=device)

        def step():
            if graphs:  # the previous step's graph outputs are dead: their memory may be reused
                torch.compiler.cudagraph_mark_step_begin()
            with ctx:
                _, loss = step_model(X, Y)
            loss.backward()
            dispatch.clip_grad_norm_(optimizer, model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss

        t0 = time.perf_counter()
        for _ in range(args.warmup):
            loss = step()
        sync(device)
        result["warmup_s"] = round(time.perf_counter() - t0, 2)
        with PowerSampler(device) if args.power else contextlib.nullcontext() as power:
            t0 = time.perf_counter()
            for _ in range(args.iters):
                loss = step()
            sync(device)
            dt = (time.perf_counter() - t0) / args.iters
        if power is not None:
            result["power"] = power.result
            if power.result is not None:
                result["power"]["joules_per_step"] = round(power.result["watts"] * dt, 3)
            else:
                result["power_note"] = power.note
        result["loss"] = round(loss.item(), 4)
        result["ms_per_iter"] = round(dt * 1000, 3)
        result["tokens_per_s"] = round(B * T / dt, 1)
        mfu = model.estimate_mfu(B, dt, device)
        result["mfu"] = None if mfu is None else round(mfu, 4)
        if device.type == "cuda":
            result["max_mem_GiB"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        if args.profile:
            trace = None
            if args.trace:
                os.makedirs(args.trace, exist_ok=True)
                trace = os.path.join(args.trace, f"{name}_{kernels}_{compile_mode}.json")
            totals, kernels_top = profile_step(step, device, trace=trace, top=args.top)
            result["profile_ms"] = {k: round(v, 3) for k, v in totals.items()}
            if args.top:
                result["profile_top"] = kernels_top
    except TKUnsupportedError as e:
        result["error"] = str(e)
    except Exception as e:  # out of memory, a compile failure, a kernel error: report, go on
        result["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        if args.verbose:
            traceback.print_exc()
    finally:
        del model, optimizer, step_model
        torch._dynamo.reset()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
    return result


def mode_label(r: dict) -> str:
    return f"{r['kernels']}/{r['compile']}"


def print_table(results: list[dict]) -> None:
    print()
    print(f"{'model':<18}{'mode':<15}{'tok/s':>12}{'ms/iter':>10}{'MFU':>8}{'vs torch':>10}")
    for r in results:
        if "error" in r:
            print(f"{r['model']:<18}{mode_label(r):<15}  error: {r['error']}")
            continue
        base = next((b for b in results if b["model"] == r["model"] and b["compile"] == r["compile"]
                     and b["kernels"] == "torch" and "error" not in b), None)
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.3f}x" if base else "-"
        mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "n/a"
        print(f"{r['model']:<18}{mode_label(r):<15}{r['tokens_per_s']:>12,.0f}{r['ms_per_iter']:>10.2f}"
              f"{mfu:>8}{ratio:>10}")
    powered = [r for r in results if "power" in r]
    if powered:
        print("\nwhile the timed steps ran (nvidia-smi every 50 ms)")
        print(f"{'model':<18}{'mode':<15}{'SM MHz':>10}{'watts':>10}{'J/step':>10}{'samples':>9}")
        for r in powered:
            p = r["power"]
            if p is None:
                print(f"{r['model']:<18}{mode_label(r):<15}  n/a: {r.get('power_note', '')}")
            else:
                print(f"{r['model']:<18}{mode_label(r):<15}{p['sm_mhz']:>10.0f}{p['watts']:>10.1f}"
                      f"{p['joules_per_step']:>10.3f}{p['samples']:>9}")
    profiled = [r for r in results if "profile_ms" in r]
    if profiled:
        unit = "GPU" if any(r.get("device", "").startswith("cuda") for r in profiled) else "CPU"
        print(f"\n{unit} ms per step by op family (torch.profiler)")
        print(f"{'model':<18}{'mode':<15}" + "".join(f"{f[:11]:>12}" for f in FAMILIES) + f"{'total':>10}")
        for r in profiled:
            p = r["profile_ms"]
            print(f"{r['model']:<18}{mode_label(r):<15}" + "".join(f"{p[f]:>12.2f}" for f in FAMILIES)
                  + f"{sum(p.values()):>10.2f}")
        for r in profiled:
            if r.get("profile_top"):
                print(f"\ntop kernels, {r['model']} {mode_label(r)} (ms per step, calls per step, family)")
                for name, family, ms, calls in r["profile_top"]:
                    print(f"  {ms:8.3f} {calls:6.1f}  {family:<15} {name[:110]}")


def save_png(results: list[dict], path: str) -> bool:
    """Bar chart of tokens/s per model and mode; False if matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    models = list(dict.fromkeys(r["model"] for r in results))
    modes = list(dict.fromkeys(mode_label(r) for r in results))
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.5), squeeze=False)
    for ax, m in zip(axes[0], models):
        rows = {mode_label(r): r for r in results if r["model"] == m}
        values = [rows[k].get("tokens_per_s", 0.0) if k in rows else 0.0 for k in modes]
        bars = ax.bar(range(len(modes)), values, color=["#888" if k.startswith("torch") else "#c33"
                                                        for k in modes])
        for b, k in zip(bars, modes):
            if k in rows and "error" in rows[k]:
                ax.text(b.get_x() + b.get_width() / 2, 0, "error", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(modes)), modes, rotation=30, fontsize=8)
        ax.set_title(m)
        ax.set_ylabel("tokens/s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    p.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"],
                   help="autocast dtype (default: bfloat16 on CUDA, float32 on a CPU)")
    p.add_argument("--models", default=None,
                   help="comma-separated subset of gpt2,gpt2-medium,shakespeare_char (default: all)")
    p.add_argument("--kernels", default="torch,tk", help="comma-separated kernels modes (default torch,tk)")
    p.add_argument("--compile", default="eager,compile",
                   help="comma-separated eager, compile, graphs (torch.compile mode=reduce-overhead: "
                        "CUDA graphs); default eager,compile")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5; tiny 1)")
    p.add_argument("--iters", type=int, default=None, help="timed steps (default 20; tiny 2)")
    p.add_argument("--tiny", action="store_true", help="a tiny model only: a smoke run, CPU included")
    p.add_argument("--profile", action="store_true", help="per-op-family time from torch.profiler")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "train"),
                   help="directory for bench_train.json and bench_train.png")
    p.add_argument("--trace", default=None, help="with --profile: a folder for each mode's Chrome trace")
    p.add_argument("--power", action="store_true",
                   help="the GPU's mean SM clock, power and energy per step over the timed steps (nvidia-smi)")
    p.add_argument("--top", type=int, default=0, help="with --profile: list the N kernels that take the most time")
    p.add_argument("--batch_size", type=int, default=None,
                   help="override every model's batch size (e.g. 1 with a short --block_size: a step with little "
                        "GPU work, whose time is then the host's time per step)")
    p.add_argument("--block_size", type=int, default=None, help="override every model's sequence length")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="every model's dropout (default 0; config/train_shakespeare_char.py trains with 0.2)")
    p.add_argument("--verbose", action="store_true", help="print tracebacks of failing modes")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"error: --device={args.device} but no CUDA GPU is usable here; use --device=cpu",
              file=sys.stderr)
        return 1
    ptdtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    args.warmup = args.warmup if args.warmup is not None else (1 if args.tiny else 5)
    args.iters = args.iters if args.iters is not None else (2 if args.tiny else 20)
    if args.iters < 1 or args.warmup < 0:
        print("error: --iters must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 1
    specs = model_specs(args.tiny)
    for spec in specs.values():
        if args.batch_size is not None:
            spec["batch_size"] = args.batch_size
        if args.block_size is not None:
            spec["block_size"] = args.block_size
    names = list(specs) if args.tiny or not args.models else args.models.split(",")
    kernels_modes = args.kernels.split(",")
    compile_modes = args.compile.split(",")
    bad = ([n for n in names if n not in specs] + [k for k in kernels_modes if k not in ("torch", "tk", "auto")]
           + [c for c in compile_modes if c not in COMPILE_MODES])
    if bad:
        print(f"error: unknown {', '.join(bad)} (models: {', '.join(specs)}; kernels: torch, tk, auto; "
              f"compile: {', '.join(COMPILE_MODES)})", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    env = dict(torch=torch.__version__, device=str(device), dtype=str(ptdtype).removeprefix("torch."),
               gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
               warmup=args.warmup, iters=args.iters, dropout=args.dropout)
    print(f"bench_train: torch {env['torch']}, {env['gpu'] or 'cpu'}, {env['dtype']}, "
          f"warm-up {args.warmup}, timed {args.iters} steps, dropout {args.dropout}")
    results = []
    for name in names:
        for kernels in kernels_modes:
            for c in compile_modes:
                r = run_mode(name, specs[name], kernels, c, args, device, ptdtype)
                r["device"] = str(device)
                results.append(r)
                status = r.get("error") or (f"{r['tokens_per_s']:,.0f} tok/s, {r['ms_per_iter']:.2f} ms/iter "
                                            f"(warm-up {r['warmup_s']} s)")
                print(f"  {name} {mode_label(r)}: {status}", flush=True)
    print_table(results)

    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "bench_train.json")
    with open(json_path, "w") as f:
        json.dump(dict(env=env, results=results), f, indent=1)
    print(f"\nwrote {json_path}")
    png_path = os.path.join(args.out, "bench_train.png")
    if save_png(results, png_path):
        print(f"wrote {png_path}")
    else:
        print("matplotlib is not installed: no PNG")
    return 0


if __name__ == "__main__":
    sys.exit(main())
