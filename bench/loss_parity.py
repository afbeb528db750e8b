"""
Loss parity: does flipping kernels=tk train the same model? Issue 12's check: the same seed, 300 steps of
shakespeare_char and of GPT-2 124M on a fixed token file, and the eval losses of kernels=tk and kernels=torch
agree within 1% at every eval.

    python bench/loss_parity.py                                  # both runs, 300 steps each, on the GPU
    python bench/loss_parity.py --runs shakespeare_char --iters 300 --eval_interval 50
    python bench/loss_parity.py --device cpu --tiny --kernels torch,auto   # CPU smoke run of the code path

Each run is train.py, twice (once per --kernels value), with the same seed, so both see the same batches
(train.py's batch generator) and start from the same weights; the two go at once on the same GPU unless
--serial (the losses do not depend on timing). The runs:
  shakespeare_char  config/train_shakespeare_char.py as it is (dropout 0.2, its learning-rate schedule), its
                    first --iters steps, evaluated every --eval_interval steps (its 200 eval batches)
  gpt2              GPT-2 124M (train.py's defaults: 12 x 768, no bias, dropout 0) at block 1024, batch 16,
                    no gradient accumulation, on tiny shakespeare in GPT-2 BPE (data/shakespeare: the fixed
                    token file), 20 eval batches per split, with --schedule:
                      config  (default) config/train_gpt2.py's learning rate: 6e-4 warmed up over 2000 steps,
                              so these are the first --iters steps of a real GPT-2 run
                      short   6e-4 warmed up over a tenth of --iters and decayed to 6e-5 at --iters: a whole
                              schedule in 300 steps, far more chaotic; two identical kernels=torch runs part by
                              up to 2.1% there (bench/RESULTS.md, session 7), so run a torch,torch control beside it
With dropout the two runs draw different masks (PyTorch's and our kernel's generators), so their losses agree
only as closely as two seeds do; the gpt2 run has none. The data are prepared first if missing (offline: give
--input PATH/TO/input.txt and, for gpt2, --bpe PATH/TO/r50k_base.tiktoken, or the SHAKESPEARE_INPUT and
TIKTOKEN_GPT2_BPE environment variables).
Output: each train.py's log in --out (its checkpoints go to a temporary folder, removed), a table per run (train and val loss of both at every eval, relative difference), loss_parity.json in
--out, and exit status 1 if any eval differs by more than --tol (default 1%) or a run failed.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/, when imported from elsewhere
from bench_ddp import read_log  # noqa: E402  train.py's JSON log, read the same way

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNS = {
    "shakespeare_char": dict(dataset="shakespeare_char", args=["config/train_shakespeare_char.py"]),
    "gpt2": dict(dataset="shakespeare", args=[
        "--dataset=shakespeare", "--batch_size=16", "--block_size=1024", "--gradient_accumulation_steps=1",
        "--learning_rate=6e-4", "--min_lr=6e-5", "--eval_iters=20", "--log_interval=10"]),
}
TINY = ["--n_layer=2", "--n_head=2", "--n_embd=64", "--block_size=64", "--batch_size=8", "--eval_iters=4",
        "--dropout=0.0"]


def train_args(run: str, iters: int, eval_interval: int, schedule: str = "config") -> list[str]:
    """train.py's arguments for `run` (without --kernels, --out_dir and --log_file)."""
    args = list(RUNS[run]["args"]) + [f"--max_iters={iters}", f"--eval_interval={eval_interval}",
                                      "--always_save_checkpoint=False", "--overwrite=True"]
    if run == "gpt2":
        if schedule == "short":
            args += [f"--lr_decay_iters={iters}", f"--warmup_iters={max(1, iters // 10)}"]
        else:  # config/train_gpt2.py's schedule, stated rather than left to train.py's defaults
            args += ["--warmup_iters=2000", "--lr_decay_iters=600000"]
    return args


def prepare_data(dataset: str, input_path: str | None, bpe_path: str | None) -> None:
    """data/<dataset>/{train,val}.bin, made by its prepare.py if missing."""
    here = os.path.join(ROOT, "data", dataset)
    if all(os.path.exists(os.path.join(here, f"{s}.bin")) for s in ("train", "val")):
        return
    cmd = [sys.executable, os.path.join(here, "prepare.py")]
    if input_path:
        cmd += ["--input", input_path]
    if bpe_path and dataset == "shakespeare":
        cmd += ["--bpe", bpe_path]
    print(f"preparing {dataset}: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


def read_evals(log_file: str) -> dict[int, tuple[float, float]]:
    """iteration -> (train loss, val loss) of the eval records in a train.py log_file."""
    return {int(it): (float(r["train_loss"]), float(r["val_loss"])) for it, r in read_log(log_file)["evals"].items()}


def compare(a: dict[int, tuple[float, float]], b: dict[int, tuple[float, float]], tol: float) -> dict:
    """The evals of run b (kernels B) against run a (kernels A): per common iteration the relative
    differences |b - a| / |a| of the train and val losses, the largest one, and whether it is within tol.
    Iterations that only one run has fail the comparison."""
    rows, worst = [], 0.0
    for it in sorted(set(a) | set(b)):
        if it not in a or it not in b:
            rows.append(dict(iter=it, missing="A" if it not in a else "B"))
            worst = float("inf")
            continue
        (ta, va), (tb, vb) = a[it], b[it]
        rt, rv = abs(tb - ta) / abs(ta), abs(vb - va) / abs(va)
        worst = max(worst, rt, rv)
        rows.append(dict(iter=it, train_a=ta, train_b=tb, val_a=va, val_b=vb, rel_train=rt, rel_val=rv))
    return dict(rows=rows, max_rel=worst, ok=bool(rows) and worst <= tol)


def run_env(items: list[str]) -> dict[str, str]:
    """--a_env / --b_env's NAME=VALUE items as a dict (ValueError naming a bad item)."""
    env = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise ValueError(f"environment setting {item!r} is not NAME=VALUE")
        env[name] = value
    return env


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--runs", default="shakespeare_char,gpt2", help=f"comma-separated, of {', '.join(RUNS)}")
    p.add_argument("--kernels", default="torch,tk", help="the two kernels settings compared (default torch,tk)")
    p.add_argument("--iters", type=int, default=300, help="training steps per run (default 300)")
    p.add_argument("--eval_interval", type=int, default=50, help="steps between evals (default 50)")
    p.add_argument("--schedule", default="config", choices=("config", "short"),
                   help="the gpt2 run's learning-rate schedule (default config: config/train_gpt2.py's)")
    p.add_argument("--tol", type=float, default=0.01, help="largest relative loss difference (default 0.01)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--compile", default="True", help="train.py's --compile (default True)")
    p.add_argument("--tiny", action="store_true", help="a 2-layer model, 4 eval batches: a smoke run")
    p.add_argument("--serial", action="store_true", help="one train.py at a time (default: both at once)")
    p.add_argument("--input", default=os.environ.get("SHAKESPEARE_INPUT"), help="local tiny shakespeare")
    p.add_argument("--bpe", default=os.environ.get("TIKTOKEN_GPT2_BPE"), help="local r50k_base.tiktoken")
    p.add_argument("--b_args", default="", help="more train.py arguments for the second run only, e.g. "
                   "--kernels torch,torch --b_args=--compile=False: a control pair, two PyTorch runs that differ "
                   "only in their rounding")
    for ab, which in (("a", "first"), ("b", "second")):
        p.add_argument(f"--{ab}_env", action="append", default=[], metavar="NAME=VALUE",
                       help=f"an environment variable for the {which} run only (repeatable), e.g. --kernels tk,tk "
                       "--a_env TK_TORCH_FAMILIES=mlp: one family off against on")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "loss_parity"))
    args = p.parse_args(argv)
    runs, kernels = args.runs.split(","), args.kernels.split(",")
    bad = [r for r in runs if r not in RUNS]
    if bad or len(kernels) != 2:
        print(f"error: {'unknown runs ' + ', '.join(bad) if bad else '--kernels needs two values'} "
              f"(runs: {', '.join(RUNS)})", file=sys.stderr)
        return 2
    try:
        envs = [dict(os.environ, **run_env(args.a_env)), dict(os.environ, **run_env(args.b_env))]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    results, failed = {}, False
    for run in runs:
        prepare_data(RUNS[run]["dataset"], args.input, args.bpe)
        base = train_args(run, args.iters, args.eval_interval, args.schedule) + [f"--device={args.device}",
                                                                   f"--compile={args.compile}"]
        if args.tiny:
            base += TINY
        procs, logs, t0 = [], {}, time.time()
        ckpt_dir = tempfile.mkdtemp(prefix=f"loss_parity_{run}_")  # the runs' checkpoints: not kept
        names = kernels if kernels[0] != kernels[1] else [f"{kernels[0]}_a", f"{kernels[1]}_b"]
        for i, (name, k) in enumerate(zip(names, kernels)):
            logs[name] = os.path.join(args.out, f"{run}_{name}.jsonl")
            if os.path.exists(logs[name]):
                os.remove(logs[name])
            extra = args.b_args.split() if i == 1 else []
            cmd = [sys.executable, "train.py", *base, f"--kernels={k}", *extra,
                   f"--out_dir={os.path.join(ckpt_dir, name)}", f"--log_file={logs[name]}"]
            stdout = open(os.path.join(args.out, f"{run}_{name}.log"), "w")
            print(f"{run}, {name}: {' '.join(cmd)}", flush=True)
            procs.append((name, subprocess.Popen(cmd, cwd=ROOT, env=envs[i], stdout=stdout, stderr=subprocess.STDOUT),
                          stdout))
            if args.serial:
                procs[-1][1].wait()
        codes = {}
        for k, proc, stdout in procs:
            codes[k] = proc.wait()
            stdout.close()
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        a, b = read_evals(logs[names[0]]), read_evals(logs[names[1]])
        res = compare(a, b, args.tol)
        res.update(returncodes=codes, wall_s=round(time.time() - t0, 1), kernels=kernels,
                   command=" ".join(base), b_args=args.b_args, schedule=args.schedule if run == "gpt2" else "config")
        res["ok"] = res["ok"] and all(c == 0 for c in codes.values())
        results[run] = res
        failed |= not res["ok"]
        A, B = kernels
        B += f" {args.b_args}" if args.b_args else ""
        print(f"\n{run}: {args.iters} steps ({res['schedule']} schedule), kernels={A} (A) vs kernels={B} (B), "
              f"return codes {codes}, {res['wall_s']} s")
        print(f"{'iter':>6}{'train A':>10}{'train B':>10}{'rel':>9}{'val A':>10}{'val B':>10}{'rel':>9}")
        for r in res["rows"]:
            if "missing" in r:
                print(f"{r['iter']:>6}  only in {'B' if r['missing'] == 'A' else 'A'}")
                continue
            print(f"{r['iter']:>6}{r['train_a']:>10.4f}{r['train_b']:>10.4f}{100 * r['rel_train']:>8.2f}%"
                  f"{r['val_a']:>10.4f}{r['val_b']:>10.4f}{100 * r['rel_val']:>8.2f}%")
        verdict = "within" if res["ok"] else "NOT within"
        print(f"largest relative difference {100 * res['max_rel']:.2f}%: {verdict} {100 * args.tol:g}%")
    with open(os.path.join(args.out, "loss_parity.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nwrote {os.path.join(args.out, 'loss_parity.json')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
