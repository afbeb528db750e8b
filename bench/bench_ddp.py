"""
train.py on several GPUs under DDP (issue 13) in one command: scaling, the loss check and the resume check.

    python bench/bench_ddp.py                                  # N = 1 and all visible GPUs, kernels torch,tk
    python bench/bench_ddp.py --gpus 1,2,4,8 --kernels torch,tk
    python bench/bench_ddp.py --checks scaling --kernels tk    # a part of it (each part is independent)
    python bench/bench_ddp.py --merge A.json B.json            # one report from the parts' JSON files
    python bench/bench_ddp.py --device cpu --data_dir data/shakespeare_char   # CPU: gloo, a tiny model, N = 1,2

Every run is a real train.py process, started as `python -m torch.distributed.run --standalone
--nproc_per_node=N train.py ...` (only the 1-process references of the loss check are a plain
`python train.py ...`), with NVLink multicast off in its environment (NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1). Model: GPT-2 124M (12 x 768, 12 heads),
block 1024, micro-batch 16, bf16 on CUDA (--model tiny: 2 x 32, block 32, micro-batch 4, float32: the
CPU default). Data: --data_dir, else synthetic tokens written to the work directory: documents of 512 to
4096 tokens, each drawn from a Zipf law with its own exponent (1.1 to 2.0), so that a model learns within
a few steps and different batches have clearly different losses.

(a) scaling, per kernels setting and N: the same work per GPU (gradient_accumulation_steps = N x --accum),
    torch.compile on, --warmup + --iters iterations; tokens/s is the median of train.py's logged tok_per_s
    (its JSON log_file) over the iterations after the warm-up; per GPU = / N; efficiency = tokens/s per GPU
    at N / tokens/s per GPU at N = 1 (torchrun with one process). DDP all-reduces the gradients in its
    buckets (25 MB) during the backward of the last micro-step; the only other host-device syncs are
    train.py's own (the master's loss.item() at each logged iteration, every iteration here, as at N = 1).
(b) loss check, per --check_kernels setting (default tk; cpu: torch): the same global batch (gradient_accumulation_steps = lcm of
    the N's) and seed, dropout 0, --check_iters iterations: the logged losses of N processes against the
    1-process run without torchrun; max relative difference, pass if <= --tol. train.py makes the batches
    independent of N (the master logs the loss of the 1-process run's last micro-batch), so what remains
    is the order of the gradient sums (all-reduce vs one process's accumulation). Default tolerance:
    1e-5 in float32, 2^-8 = 3.9e-3 in bf16/fp16 (bf16's relative spacing: a loss computed from bf16
    activations is not claimed to better than one bf16 step; the reduction-order differences are far
    smaller: Adam's first step is sign(grad), later steps move the weights by lr x ~1e-7 relative). A
    control run (1 process, the same model and seed, the data rotated by half its length: other batches)
    must differ by more than the tolerance, else the check could not fail and says so (inconclusive).
(c) resume, per --check_kernels setting, on the largest N: train to k = check_iters / 2 with a checkpoint,
    resume to 2k: the losses k..2k and the val loss at 2k must be bitwise those of the uninterrupted run of
    (b). The same checkpoint resumed on the next smaller N must print train.py's RNG warning and continue
    the same batches (losses k..k+2 within --tol of the uninterrupted run). Check runs are eager (compile:
    --check_compile) with TK_DETERMINISTIC=1 (our attention backward without atomics).
Kernel builds: train.py's ranks print one line per kernel family (tk_kernels/build.py): the rank that took
the build lock and built it ("built in S s"), or loaded it after waiting for the lock ("cached ... waited
S s"). --fresh_build points TORCH_EXTENSIONS_DIR at a new directory for a first N-process run, which then
shows one build per machine and the other ranks' waits.

Output: tables on stdout; bench_ddp_<gpu>_<date>[_<tag>].json, .png (if matplotlib is installed) and .md (a
block for bench/RESULTS.md: date, GPU, versions, commit, the command and the train.py command lines) in --out.
Exit status 0 if every run finished and every check passed. Each run's log stays in --work DIR/logs if
--work is given (else the temporary work directory is removed).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pickle
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/, when imported from elsewhere
from run_all import git_commit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "train.py")
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
MODELS = {  # train.py settings of each benchmarked model
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, batch_size=16, learning_rate=6e-4),
    "tiny": dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4, learning_rate=3e-3),
}
SYNTHETIC_VOCAB = {"gpt2": 50257, "tiny": 256}
BUILD_LINE = re.compile(r"tk_kernels: (\w+): (?:built in ([\d.]+) s|cached: \S+) \((?:rank (\d+), )?"
                        r"waited ([\d.]+) s for the build lock\)")


class RunError(Exception):
    """A train.py run that did not finish (its message is the reason)."""


# -----------------------------------------------------------------------------
# data

def write_synthetic(out_dir: str, vocab: int, n_train: int, n_val: int, seed: int = 0) -> None:
    """train.bin / val.bin of Zipf documents (see the module docstring); meta.pkl for a small vocabulary."""
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("val", n_val)):
        parts, total = [], 0
        while total < n:
            length = int(rng.integers(512, 4097))
            doc = (rng.zipf(rng.uniform(1.1, 2.0), length) - 1) % vocab
            parts.append(doc.astype(np.uint16))
            total += length
        np.concatenate(parts)[:n].tofile(os.path.join(out_dir, f"{split}.bin"))
    if vocab < 50257:  # train.py takes the vocabulary from meta.pkl, else GPT-2's 50304
        with open(os.path.join(out_dir, "meta.pkl"), "wb") as f:
            pickle.dump({"vocab_size": vocab}, f)


def write_rotated(src: str, out_dir: str, max_tokens: int = 1 << 25) -> None:
    """The control data set: src's training tokens (at most the first max_tokens) rotated by half their
    length, so that the same generator draws give other batches; val.bin and meta.pkl copied."""
    os.makedirs(out_dir, exist_ok=True)
    data = np.memmap(os.path.join(src, "train.bin"), dtype=np.uint16, mode="r")[:max_tokens]
    np.roll(np.asarray(data), len(data) // 2).tofile(os.path.join(out_dir, "train.bin"))
    for name in ("val.bin", "meta.pkl"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(out_dir, name))


# -----------------------------------------------------------------------------
# running train.py

class Runner:
    def __init__(self, args, work: str):
        self.args, self.work = args, work
        self.log_dir = os.path.join(work, "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        self.runs: list[dict] = []  # every run: name, command, rc, seconds

    def train_args(self, kernels: str, accum: int, out: str, log: str, data_dir: str, **over) -> list[str]:
        a = self.args
        settings = dict(MODELS[a.model], device="cuda" if a.device == "cuda" else "cpu", dtype=a.dtype,
                        kernels=kernels, compile=a.compile, dataset="bench", data_dir=data_dir, out_dir=out,
                        log_file=log, gradient_accumulation_steps=accum, dropout=0.0, bias=False,
                        decay_lr=False, log_interval=1, eval_interval=10**9, eval_iters=0, seed=a.seed,
                        always_save_checkpoint=True, wandb_log=False, overwrite=True)
        if a.batch_size:
            settings["batch_size"] = a.batch_size
        if a.block_size:
            settings["block_size"] = a.block_size
        settings.update(over)
        return [f"--{k}={v}" for k, v in settings.items()]

    def run(self, name: str, nproc: int | None, train_args: list[str], deterministic: bool = False) -> dict:
        """Run train.py (torchrun with nproc processes, or plain python if nproc is None) in the work
        directory; the run's record with its stdout, stderr and JSON log. Raises RunError if it failed."""
        if nproc is None:
            cmd = [sys.executable, TRAIN, *train_args]
        else:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                   TRAIN, *train_args]
        env = {**os.environ, **NO_MULTICAST}
        env.setdefault("OMP_NUM_THREADS", "1")
        if deterministic:
            env["TK_DETERMINISTIC"] = "1"
        shown = ("TK_DETERMINISTIC=1 " if deterministic else "") + shlex.join(
            ["python" if c == sys.executable else os.path.relpath(c, ROOT) if c == TRAIN else c for c in cmd])
        log = os.path.join(self.work, _arg(train_args, "log_file"))
        if os.path.exists(log):  # train.py appends: a log of an earlier bench run in this work dir goes first
            os.remove(log)
        t0 = time.time()
        print(f"  {name} ({f'torchrun, {processes(nproc)}' if nproc else 'plain python'}) ...", end="", flush=True)
        # its own session: on a timeout or an interrupt the whole group (torchrun and its workers) is ended
        proc = subprocess.Popen(cmd, cwd=self.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        interrupted = False
        try:
            stdout, stderr = proc.communicate(timeout=self.args.timeout)
            rc = proc.returncode
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            interrupted = isinstance(e, KeyboardInterrupt)
            stdout, stderr = stop_group(proc)
            rc = "interrupted" if interrupted else "timeout"
            stderr += f"\n[{'interrupted' if interrupted else f'timed out after {self.args.timeout} s'}]"
        seconds = round(time.time() - t0, 1)
        with open(os.path.join(self.log_dir, f"{name}.log"), "w") as f:
            f.write(f"$ {shown}\n{stdout}\n[stderr]\n{stderr}")
        record = dict(name=name, command=shown, rc=rc, seconds=seconds, builds=parse_builds(stderr))
        self.runs.append(record)
        print(f" {seconds:.0f} s" + ("" if rc == 0 else f", FAILED (rc {rc})"), flush=True)
        if interrupted:
            raise KeyboardInterrupt
        if rc != 0:
            errors = [line for line in stderr.splitlines() if line.startswith("error:")]
            reason = errors[0] if errors else "\n".join(stderr.strip().splitlines()[-15:])
            record["error"] = reason
            raise RunError(f"{name} failed (rc {rc}): {reason}")
        return dict(record, stdout=stdout, stderr=stderr, log=read_log(log))


def stop_group(proc: subprocess.Popen) -> tuple[str, str]:
    """End a run's process group (SIGTERM, then SIGKILL after 20 s); its output so far."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 20)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            stdout, stderr = proc.communicate(timeout=wait)
            return stdout or "", stderr or ""
        except subprocess.TimeoutExpired:
            continue
    stdout, stderr = proc.communicate()
    return stdout or "", stderr or ""


def processes(n: int) -> str:
    return f"{n} process" + ("" if n == 1 else "es")


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _arg(train_args: list[str], key: str) -> str:
    return next(a.split("=", 1)[1] for a in train_args if a.startswith(f"--{key}="))


def read_log(path: str) -> dict:
    """train.py's JSON log: {'steps': {iter: record}, 'evals': {iter: record}}."""
    steps, evals = {}, {}
    if os.path.isfile(path):
        with open(path) as f:
            for r in map(json.loads, f):
                (steps if "loss" in r else evals)[r["iter"]] = r
    return dict(steps=steps, evals=evals)


def parse_builds(text: str) -> list[dict]:
    """tk_kernels/build.py's per-family lines: family, rank, built (bool), build_s, wait_s."""
    return [dict(family=m[1], rank=int(m[3]) if m[3] is not None else None, built=m[2] is not None,
                 build_s=float(m[2]) if m[2] else None, wait_s=float(m[4])) for m in BUILD_LINE.finditer(text)]


def rel_diffs(a: dict, b: dict, iters) -> list[float]:
    """|a - b| / |b| of the logged losses at the iterations iters."""
    return [abs(a[i]["loss"] - b[i]["loss"]) / abs(b[i]["loss"]) for i in iters]


# -----------------------------------------------------------------------------
# the three parts

def run_scaling(runner: Runner, kernels: str, gpus: list[int], data_dir: str, rows: list[dict]) -> None:
    """The scaling runs of one kernels setting, appended to rows as they finish."""
    a = runner.args
    for n in gpus:
        name = f"scaling_{kernels}_n{n}"
        row = dict(kernels=kernels, n=n, accum_per_gpu=a.accum)
        try:
            r = runner.run(name, n, runner.train_args(kernels, n * a.accum, f"out_{name}", f"{name}.jsonl", data_dir,
                                                      max_iters=a.warmup + a.iters - 1))
            timed = [r["log"]["steps"][i] for i in range(a.warmup, a.warmup + a.iters)]
            row.update(tokens_per_s=statistics.median(t["tok_per_s"] for t in timed),
                       ms_per_iter=statistics.median(t["time_ms"] for t in timed),
                       plan=next((line for line in r["stdout"].splitlines() if line.startswith("kernels=")), None),
                       command=r["command"])
            row["tokens_per_s_per_gpu"] = row["tokens_per_s"] / n
        except (RunError, KeyError) as e:
            row["error"] = str(e) if isinstance(e, RunError) else f"iteration {e} missing in the log"
        rows.append(row)


def add_efficiency(rows: list[dict]) -> None:
    """efficiency = tokens/s per GPU / that of the N = 1 run of the same kernels setting."""
    for r in rows:
        base = next((b for b in rows if b["kernels"] == r["kernels"] and b["n"] == 1 and "error" not in b), None)
        if base and "error" not in r:
            r["efficiency"] = r["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]


def run_checks(runner: Runner, kernels: str, gpus: list[int], data_dir: str, control_dir: str,
               with_resume: bool = True) -> tuple[dict, dict]:
    """The loss check and the resume check (which continues the loss check's largest-N run) of one kernels
    setting."""
    a = runner.args
    k = (a.check_iters + 1) // 2
    accum = math.lcm(*gpus) * a.check_accum
    iters = range(a.check_iters)
    check = dict(compile=a.check_compile, max_iters=2 * k, eval_interval=k, eval_iters=2)
    loss = dict(kernels=kernels, global_accum=accum, iters=a.check_iters, tol=a.tol, seed=a.seed,
                compile=a.check_compile, rows=[])
    resume = dict(kernels=kernels, k=k)

    def check_run(name, nproc, out, data=data_dir, **over):
        return runner.run(f"{name}_{kernels}", nproc, runner.train_args(kernels, accum, out, f"{name}_{kernels}.jsonl",
                                                                        data, **dict(check, **over)),
                          deterministic=True)

    no_eval = dict(eval_interval=10**9, eval_iters=0)  # only the largest N's run writes checkpoints (resume check)
    try:
        ref_run = check_run("loss_ref", None, f"out_loss_ref_{kernels}", **no_eval)
        ref = ref_run["log"]["steps"]
        control = check_run("loss_control", None, f"out_loss_control_{kernels}", data=control_dir,
                            **no_eval)["log"]["steps"]
        loss["control_max_rel"] = max(rel_diffs(control, ref, iters))
        loss["command_ref"] = ref_run["command"]
    except (RunError, KeyError) as e:
        loss["error"] = str(e)
        return loss, dict(resume, error="no reference run")
    full = {}
    for n in gpus:
        row = dict(n=n)
        try:
            r = check_run(f"loss_n{n}", n, f"out_loss_n{n}_{kernels}", **({} if n == max(gpus) else no_eval))
            full[n] = r
            d = rel_diffs(r["log"]["steps"], ref, iters)
            row.update(max_rel=max(d), at_iter=int(np.argmax(d)) if max(d) > 0 else None, bitwise=max(d) == 0.0,
                       ok=max(d) <= a.tol,
                       command=r["command"])
        except (RunError, KeyError) as e:
            row.update(error=str(e), ok=False)
        loss["rows"].append(row)
    loss["discriminates"] = loss["control_max_rel"] > a.tol
    loss["ok"] = all(r["ok"] for r in loss["rows"]) and loss["discriminates"]

    n = max(gpus)
    resume["n"] = n
    if not with_resume:
        return loss, resume
    if n not in full:
        resume["error"] = f"no uninterrupted {n}-process run"
        return loss, resume
    uninterrupted = full[n]["log"]
    part = f"out_resume_n{n}_{kernels}"
    try:
        check_run("resume_part", n, part, max_iters=k)
        other = [m for m in gpus if m < n]
        if other:  # the same checkpoint, on another number of processes
            shutil.copytree(os.path.join(runner.work, part), os.path.join(runner.work, part + "_other"),
                            dirs_exist_ok=True)
        r = check_run("resume_same_n", n, part, init_from="resume")
        same = [r["log"]["steps"][i]["loss"] == uninterrupted["steps"][i]["loss"] for i in range(k, 2 * k + 1)]
        val_same = r["log"]["evals"][2 * k]["val_loss"] == uninterrupted["evals"][2 * k]["val_loss"]
        resume.update(same_n_bitwise=all(same) and val_same, same_n_iters=[k, 2 * k], command=r["command"])
        if not resume["same_n_bitwise"]:
            resume["same_n_max_rel"] = max(rel_diffs(r["log"]["steps"], uninterrupted["steps"], range(k, 2 * k + 1)))
        if other:
            m = max(other)
            r = check_run("resume_other_n", m, part + "_other", init_from="resume", max_iters=k + 2)
            warning = next((line for line in r["stdout"].splitlines()
                            if line.startswith(f"warning: the checkpoint's RNG states are for {n} process(es)")), None)
            d = rel_diffs(r["log"]["steps"], uninterrupted["steps"], range(k, k + 3))
            resume.update(other_n=m, warning=warning, other_n_max_rel=max(d), other_n_first_bitwise=d[0] == 0.0,
                          other_n_ok=warning is not None and max(d) <= a.tol, command_other=r["command"])
        resume["ok"] = resume["same_n_bitwise"] and resume.get("other_n_ok", True)
    except (RunError, KeyError) as e:
        resume.update(error=str(e), ok=False)
    return loss, resume


# -----------------------------------------------------------------------------
# reporting

def environment(device: str) -> dict:
    """Versions and GPU, read in a child process (this one keeps no CUDA context while train.py runs)."""
    code = ("import json, sys, torch\n"
            "cuda = torch.cuda.is_available()\n"
            "v = torch.cuda.nccl.version() if cuda else None\n"
            "nccl = '.'.join(map(str, v)) if isinstance(v, tuple) else None if v is None else str(v)\n"
            "cudnn = torch.backends.cudnn.version() if cuda else None\n"
            "print(json.dumps(dict(torch=torch.__version__, cuda=torch.version.cuda if cuda else None, nccl=nccl,\n"
            "    cudnn=f'{cudnn // 10000}.{cudnn // 100 % 100}' if cudnn else None, gpus=torch.cuda.device_count(),\n"
            "    gpu=torch.cuda.get_device_name(0) if cuda else None, python=sys.version.split()[0])))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    env = json.loads(r.stdout.strip().splitlines()[-1])
    if device == "cpu":
        env.update(gpu=None, cuda=None, cudnn=None, nccl=None)
    env.update(date=datetime.date.today().isoformat(), commit=git_commit(), device=device)
    return env


def fmt_rel(x) -> str:
    return "-" if x is None else "0" if x == 0 else f"{x:.2e}"


def report(res: dict) -> str:
    """The tables (markdown, also printed to stdout)."""
    a, lines = res["scaling_info"], []
    if res["scaling"]:
        lines += [f"Scaling: {a['model_desc']}, {a['accum']} micro-step(s) per GPU per iteration, compile "
                  f"{'on' if a['compile'] else 'off'}, {a['dtype']}; median tok/s over iterations {a['warmup']}.."
                  f"{a['warmup'] + a['iters'] - 1}", "",
                  "| kernels | N | tok/s | tok/s per GPU | ms/iter | efficiency |", "|---|---|---|---|---|---|"]
        for r in res["scaling"]:
            if "error" in r:
                lines.append(f"| {r['kernels']} | {r['n']} | error: {r['error'].splitlines()[0]} | | | |")
                continue
            eff = f"{100 * r['efficiency']:.1f}%" if "efficiency" in r else "n/a"
            lines.append(f"| {r['kernels']} | {r['n']} | {r['tokens_per_s']:,.0f} | {r['tokens_per_s_per_gpu']:,.0f} | "
                         f"{r['ms_per_iter']:.2f} | {eff} |")
        lines.append("")
    for loss in res["loss"]:
        if "error" in loss:
            lines += [f"Loss check, kernels={loss['kernels']}: error: {loss['error']}", ""]
            continue
        lines += [f"Loss check, kernels={loss['kernels']}: {loss['global_accum']} micro-batches per iteration over "
                  f"all processes, seed {loss['seed']}, dropout 0, {'compiled' if loss['compile'] else 'eager'}, "
                  f"TK_DETERMINISTIC=1; iterations 0..{loss['iters'] - 1} against 1 process without torchrun; "
                  f"tolerance {loss['tol']:.2g} relative", "",
                  "| N | max rel diff | at iter | bitwise | verdict |", "|---|---|---|---|---|"]
        for r in loss["rows"]:
            if "error" in r:
                lines.append(f"| {r['n']} | error: {r['error'].splitlines()[0]} | | | FAIL |")
            else:
                lines.append(f"| {r['n']} | {fmt_rel(r['max_rel'])} | {'-' if r['at_iter'] is None else r['at_iter']} | "
                             f"{'yes' if r['bitwise'] else 'no'} | "
                             f"{'pass' if r['ok'] else 'FAIL'} |")
        lines += ["", f"Control (1 process, same model and seed, other batches): max rel diff "
                      f"{fmt_rel(loss['control_max_rel'])}: " +
                  ("the check tells other batches apart." if loss["discriminates"] else
                   "INCONCLUSIVE: not above the tolerance, the check could not fail."), ""]
    for rs in res["resume"]:
        head = f"Resume, kernels={rs['kernels']}, N={rs.get('n')}: "
        if "error" in rs:
            lines += [head + f"error: {rs['error']}", ""]
            continue
        same = (f"trained to {rs['k']}, resumed to {2 * rs['k']}: losses and final val loss "
                + ("bitwise equal to the uninterrupted run" if rs["same_n_bitwise"] else
                   f"NOT bitwise equal (max rel diff {fmt_rel(rs.get('same_n_max_rel'))})"))
        lines.append(head + same + ".")
        if "other_n" in rs:
            lines.append(f"On {processes(rs['other_n'])}: " +
                         (f"warning printed (\"{rs['warning']}\")" if rs["warning"] else "NO warning") +
                         f"; losses {rs['k']}..{rs['k'] + 2}: max rel diff {fmt_rel(rs['other_n_max_rel'])} to the "
                         f"uninterrupted run (iteration {rs['k']} " +
                         ("bitwise" if rs["other_n_first_bitwise"] else "not bitwise") + "): " +
                         ("pass" if rs["other_n_ok"] else "FAIL") + ".")
        lines.append("")
    if res["builds"]:
        lines += ["Kernel builds (tk_kernels/build.py's lines" +
                  (", fresh TORCH_EXTENSIONS_DIR" if res["builds_fresh"] else "") + f", run {res['builds_run']}):", ""]
        by_family: dict[str, list] = {}
        for b in res["builds"]:
            by_family.setdefault(b["family"], []).append(b)
        for fam, bs in by_family.items():
            built = [b for b in bs if b["built"]]
            waits = [b["wait_s"] for b in bs if not b["built"]]
            lines.append(f"- {fam}: " + (", ".join(f"built by rank {b['rank']} in {b['build_s']:.1f} s" for b in built)
                                         or "no build (cached)") +
                         (f"; {len(waits)} rank(s) loaded it after waiting {min(waits):.1f}-{max(waits):.1f} s for the "
                          f"lock" if waits else "") + ("" if len(built) <= 1 else " (MORE THAN ONE BUILD)"))
        lines.append("")
    lines += ["Issue 13's criteria:", ""]
    for k in dict.fromkeys(r["kernels"] for r in res["scaling"]):
        effs = [(r["n"], r.get("efficiency")) for r in res["scaling"] if r["kernels"] == k and r["n"] > 1]
        if effs:
            worst = min((e for _, e in effs if e is not None), default=None)
            lines.append(f"- scaling efficiency >= 90%, kernels={k}: " +
                         ("n/a (a run failed or no N = 1 run)" if worst is None or None in (e for _, e in effs) else
                          f"{'yes' if worst >= 0.9 else 'NO'} (lowest {100 * worst:.1f}%, N = "
                          f"{', '.join(str(n) for n, _ in effs)})"))
    for loss in res["loss"]:
        lines.append(f"- loss check, kernels={loss['kernels']}: " + ("pass" if loss.get("ok") else "FAIL"))
    for rs in res["resume"]:
        lines.append(f"- resume check, kernels={rs['kernels']}: " + ("pass" if rs.get("ok") else "FAIL"))
    lines.append("")
    return "\n".join(lines)


def results_block(res: dict, tables: str) -> str:
    env = res["env"]
    gpu = f"{env['gpu']} x {max(res['gpus'])}" if env["gpu"] else "CPU (gloo)"
    lines = [f"## DDP: scaling, loss check, resume (bench/bench_ddp.py), {gpu}, {env['date']}, commit {env['commit']}",
             f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, NCCL {env['nccl']}, Python "
             f"{env['python']}; NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1",
             "Command" + ("s" if len(res["commands"]) > 1 else "") + ": " +
             ", ".join(f"`{c}` ({sec:.0f} s)" for c, sec in res["commands"]), "", tables,
             "train.py command lines (one of each kind):", ""]
    seen = set()
    for run in res["runs"]:
        kind = re.sub(r"_(torch|tk|auto)(?=_|$)|_n\d+", "", run["name"])
        if kind not in seen:
            seen.add(kind)
            lines.append(f"    {run['command']}")
    lines += ["", "(the other runs of each kind differ in --nproc_per_node, kernels, gradient_accumulation_steps, "
                  "out_dir and log_file; bench_ddp's JSON has every command line)"]
    return "\n".join(lines) + "\n"


def save_png(res: dict, path: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in res["scaling"] if "error" not in r]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for kernels in dict.fromkeys(r["kernels"] for r in rows):
        rs = [r for r in rows if r["kernels"] == kernels]
        ax.plot([r["n"] for r in rs], [r["tokens_per_s_per_gpu"] for r in rs], "o-", label=f"kernels={kernels}")
        for r in rs:
            if "efficiency" in r:
                ax.annotate(f"{100 * r['efficiency']:.0f}%", (r["n"], r["tokens_per_s_per_gpu"]), fontsize=7,
                            textcoords="offset points", xytext=(0, 5), ha="center")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["n"] for r in rows}), [str(n) for n in sorted({r["n"] for r in rows})])
    ax.set_xlabel("processes (GPUs)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_ylim(bottom=0)
    ax.set_title(f"train.py under DDP, {res['scaling_info']['model_desc']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# -----------------------------------------------------------------------------

def parse_list(text: str, what: str, allowed=None) -> list:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"--{what} is empty")
    if allowed is not None:
        bad = [t for t in items if t not in allowed]
        if bad:
            raise ValueError(f"unknown --{what} {', '.join(bad)} (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda (NCCL) or cpu (gloo)")
    p.add_argument("--gpus", default=None, help="process counts, e.g. 1,2,4,8 (default: 1 and every visible GPU; "
                                                "cpu: 1,2)")
    p.add_argument("--kernels", default=None, help="kernels settings of the scaling runs (default torch,tk; cpu: torch)")
    p.add_argument("--check_kernels", default=None, help="kernels settings of the loss and resume checks "
                                                         "(default tk; cpu: torch)")
    p.add_argument("--checks", default="scaling,loss,resume", help="which parts to run (loss and resume share runs)")
    p.add_argument("--model", default=None, choices=sorted(MODELS), help="gpt2 (default) or tiny (cpu default)")
    p.add_argument("--batch_size", type=int, default=None, help="micro-batch per process (default: the model's)")
    p.add_argument("--block_size", type=int, default=None)
    p.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"],
                   help="default bfloat16 on cuda, float32 on cpu")
    p.add_argument("--accum", type=int, default=1, help="micro-steps per GPU per iteration in the scaling runs (default 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed first iterations (default 5; cpu 1)")
    p.add_argument("--iters", type=int, default=None, help="timed iterations (default 20; cpu 3)")
    p.add_argument("--check_accum", type=int, default=1, help="the checks' global accumulation is this times the lcm "
                                                              "of the N's (default 1)")
    p.add_argument("--check_iters", type=int, default=20, help="iterations compared by the loss check (default 20); "
                                                               "the resume check stops at half of them")
    p.add_argument("--tol", type=float, default=None, help="loss check relative tolerance (default 2^-8 in bf16/fp16, "
                                                           "1e-5 in float32)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile in the scaling runs (default on for cuda, off for cpu)")
    p.add_argument("--check_compile", action=argparse.BooleanOptionalAction, default=False,
                   help="torch.compile in the check runs too (default off)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--data_dir", default=None, help="train.bin / val.bin (default: synthetic tokens in the work dir)")
    p.add_argument("--fresh_build", action="store_true", help="build the kernels into a new TORCH_EXTENSIONS_DIR "
                                                              "in a first N-process run (shows one build per machine)")
    p.add_argument("--out", default=None, help="directory for the JSON / PNG / .md (default bench/results; "
                                               "cpu: bench/out/ddp)")
    p.add_argument("--work", default=None, help="work directory for the runs (default: a temporary one, removed)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per train.py run (default 1800)")
    p.add_argument("--tag", default=None, help="appended to the output files' names (default: the --checks, "
                                               "unless all three run)")
    p.add_argument("--merge", nargs="+", metavar="JSON", help="run nothing: one report (.json, .md, .png) from the "
                                                              "JSON files of earlier runs, into --out/--tag")
    a = p.parse_args(argv)
    # A time limit's SIGINT must end the runs with a report even where this process inherited SIGINT as
    # ignored (started as a background job of a non-interactive shell: Python then leaves it ignored, and a
    # SIGINT did nothing in session 11's CI run of tests/bench/test_bench_ddp.py started that way).
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if a.merge:
        stem = None
        if a.out or a.tag:
            stem = os.path.join(os.path.abspath(a.out or os.path.dirname(a.merge[0])),
                                os.path.splitext(os.path.basename(a.merge[0]))[0] + f"_{a.tag or 'merged'}")
        return merge(a.merge, stem)
    cpu = a.device == "cpu"
    try:
        checks = parse_list(a.checks, "checks", ("scaling", "loss", "resume"))
        kernels = parse_list(a.kernels or ("torch" if cpu else "torch,tk"), "kernels", ("torch", "tk", "auto"))
        check_kernels = parse_list(a.check_kernels or ("torch" if cpu else "tk"), "check_kernels", ("torch", "tk", "auto"))
        gpus = None if a.gpus is None else sorted({int(t) for t in parse_list(a.gpus, "gpus")})
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    a.model = a.model or ("tiny" if cpu else "gpt2")
    a.dtype = a.dtype or ("float32" if cpu else "bfloat16")
    a.compile = (not cpu) if a.compile is None else a.compile
    a.warmup = a.warmup if a.warmup is not None else (1 if cpu else 5)
    a.iters = a.iters if a.iters is not None else (3 if cpu else 20)
    a.tol = a.tol if a.tol is not None else (1e-5 if a.dtype == "float32" else 2.0 ** -8)
    if cpu and ("tk" in kernels or ("tk" in check_kernels and {"loss", "resume"} & set(checks))):
        print("error: kernels=tk needs CUDA GPUs; on --device cpu use --kernels torch --check_kernels torch",
              file=sys.stderr)
        return 2
    if a.iters < 1 or a.warmup < 0 or a.check_iters < 2 or a.accum < 1 or a.check_accum < 1:
        print("error: need --iters >= 1, --warmup >= 0, --check_iters >= 2, --accum >= 1 and --check_accum >= 1",
              file=sys.stderr)
        return 2
    if a.data_dir and not all(os.path.isfile(os.path.join(a.data_dir, f"{s}.bin")) for s in ("train", "val")):
        print(f"error: --data_dir {a.data_dir} has no train.bin and val.bin", file=sys.stderr)
        return 2
    env = environment(a.device)
    visible = env["gpus"] if not cpu else os.cpu_count()
    if gpus is None:
        gpus = [1, 2] if cpu else sorted({1, max(visible, 1)})
    if not cpu and visible < 1:
        print("error: no CUDA GPU is visible; use --device cpu for the CPU run", file=sys.stderr)
        return 2
    if gpus[0] < 1 or (not cpu and gpus[-1] > visible):
        print(f"error: --gpus must be between 1 and the {visible} visible GPU(s); got {a.gpus}", file=sys.stderr)
        return 2
    model = dict(MODELS[a.model], **{k: v for k, v in (("batch_size", a.batch_size), ("block_size", a.block_size)) if v})
    a.model_desc = (("GPT-2 124M" if a.model == "gpt2" else "tiny GPT") +
                    f" ({model['n_layer']} x {model['n_embd']}), block {model['block_size']}, micro-batch {model['batch_size']}")
    slug = (env["gpu"] or "cpu").lower().replace("nvidia", "").strip().split()[0]
    out = os.path.abspath(a.out or os.path.join(ROOT, "bench", "out" if cpu else "results", *(["ddp"] if cpu else [])))
    tag = a.tag if a.tag is not None else ("" if len(checks) == 3 else "-".join(checks))
    stem = os.path.join(out, f"bench_ddp_{slug}_{env['date']}" + (f"_{tag}" if tag else ""))
    command = shlex.join(["python", "bench/bench_ddp.py", *(sys.argv[1:] if argv is None else argv)])

    work = os.path.abspath(a.work) if a.work else tempfile.mkdtemp(prefix="bench_ddp_")
    os.makedirs(work, exist_ok=True)
    print(f"bench_ddp: {env['gpu'] or 'cpu'} ({visible} visible), torch {env['torch']}, CUDA {env['cuda']}, "
          f"NCCL {env['nccl']}; N = {','.join(map(str, gpus))}; {a.model_desc}; work dir {work}", flush=True)
    t0 = time.time()
    data_dir = os.path.abspath(a.data_dir) if a.data_dir else os.path.join(work, "data")
    if not a.data_dir:
        n = 8_000_000 if a.model == "gpt2" else 1_000_000
        write_synthetic(data_dir, SYNTHETIC_VOCAB[a.model], n, n // 8)
    runner = Runner(a, work)
    res = dict(env=env, gpus=gpus, config=dict(vars(a), kernels=kernels, check_kernels=check_kernels, checks=checks,
                                               data_dir=a.data_dir or "synthetic"),
               scaling_info=dict(model_desc=a.model_desc, accum=a.accum, compile=a.compile, dtype=a.dtype,
                                 warmup=a.warmup, iters=a.iters),
               scaling=[], loss=[], resume=[], builds=[], builds_run=None, builds_fresh=False)

    try:
        if a.fresh_build and ("tk" in kernels or "tk" in check_kernels):
            ext_dir = os.path.join(work, "torch_extensions")
            shutil.rmtree(ext_dir, ignore_errors=True)
            print(f"fresh kernel build into {ext_dir} under {processes(max(gpus))}", flush=True)
            os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir  # every later run loads what this one builds
            try:
                r = runner.run(f"build_n{max(gpus)}", max(gpus), runner.train_args(
                    "tk", max(gpus), "out_build", "build.jsonl", data_dir, max_iters=0, compile=False))
                res.update(builds=r["builds"], builds_run=r["name"], builds_fresh=True)
            except RunError as e:
                print(f"  {e}", flush=True)
        if "scaling" in checks:
            for k in kernels:
                print(f"scaling, kernels={k}:", flush=True)
                run_scaling(runner, k, gpus, data_dir, res["scaling"])
        if {"loss", "resume"} & set(checks):
            control_dir = os.path.join(work, "control_data")
            write_rotated(data_dir, control_dir)
            for k in check_kernels:
                print(f"loss and resume checks, kernels={k}:", flush=True)
                loss, resume = run_checks(runner, k, gpus, data_dir, control_dir, with_resume="resume" in checks)
                if "loss" in checks:
                    res["loss"].append(loss)
                if "resume" in checks:
                    res["resume"].append(resume)
    except KeyboardInterrupt:  # e.g. a time limit's SIGINT: report the runs that finished
        print("\ninterrupted: the report has the runs that finished", flush=True)
    if not res["builds"]:  # the run with the most kernel lines (the most processes)
        most = max(runner.runs, key=lambda r: len(r["builds"]), default=None)
        if most and most["builds"]:
            res["builds"], res["builds_run"] = most["builds"], most["name"]
    add_efficiency(res["scaling"])
    res["commands"] = [[command, time.time() - t0]]
    res["runs"] = runner.runs
    rc = finish(res, stem)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"logs of every run: {runner.log_dir}")
    return rc


def finish(res: dict, stem: str) -> int:
    """Verdict, tables, the JSON / .md / .png files; the exit status."""
    failed = ([r["name"] for r in res["runs"] if r["rc"] != 0] +
              [f"loss_{x['kernels']}" for x in res["loss"] if not x.get("ok")] +
              [f"resume_{x['kernels']}" for x in res["resume"] if not x.get("ok")])
    res["ok"] = not failed
    tables = report(res)
    print("\n" + tables)
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump(res, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(results_block(res, tables))
    print(f"wrote {stem}.json and {stem}.md (the block for bench/RESULTS.md)")
    if save_png(res, stem + ".png"):
        print(f"wrote {stem}.png")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print(f"all runs finished and all checks passed ({sum(sec for _, sec in res['commands']):.0f} s)")
    return 0


def merge(paths: list[str], stem: str | None) -> int:
    """One report from the JSON files of several bench_ddp runs (e.g. the parts of a time-limited session)."""
    parts = []
    for path in paths:
        try:
            with open(path) as f:
                parts.append(json.load(f))
        except (OSError, ValueError) as e:
            print(f"error: cannot read {path}: {e}", file=sys.stderr)
            return 2
    res = dict(env=parts[0]["env"], gpus=sorted({n for p in parts for n in p["gpus"]}),
               scaling_info=next((p["scaling_info"] for p in parts if p["scaling"]), parts[0]["scaling_info"]),
               config=[p["config"] for p in parts], commands=[c for p in parts for c in p["commands"]],
               runs=[r for p in parts for r in p["runs"]],
               **{k: [x for p in parts for x in p[k]] for k in ("scaling", "loss", "resume")})
    add_efficiency(res["scaling"])
    best = max(parts, key=lambda p: len(p["builds"]))
    res.update(builds=best["builds"], builds_run=best["builds_run"], builds_fresh=best["builds_fresh"])
    if stem is None:
        stem = os.path.splitext(os.path.abspath(paths[0]))[0] + "_merged"
    return finish(res, stem)


if __name__ == "__main__":
    sys.exit(main())
