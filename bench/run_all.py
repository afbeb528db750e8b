"""
Every benchmark in one command, and bench/RESULTS.md's "latest full run" section rewritten from it.

    python bench/run_all.py                          # all benchmarks on the GPU (about 10 minutes)
    python bench/run_all.py --benches attention,train --train-args "--models gpt2"

    python bench/run_all.py --benches train --merge  # re-run one, keep the others' sections

Runs, one after the other and each in its own process (a crash or a timeout in one is recorded and
the others still run): bench_attention.py, bench_attention_dropout.py, bench_mlp.py, bench_layernorm.py,
bench_layernorm_dropout.py, bench_classifier.py and bench_train.py --profile. Their logs, JSON files and plots go to
--out (default bench/out/run_all); the plots are also copied to bench/plots/, which RESULTS.md links.

RESULTS.md keeps its hand-written sections; this script owns only the block between the markers
<!-- run_all:begin --> and <!-- run_all:end --> (inserted at the top of the results the first time)
and replaces it on every run: the command, and for each benchmark its date, GPU, torch / CUDA / cuDNN
versions, commit and printed tables verbatim. With --merge the sections of benchmarks not run this time
are kept from the block as it was (each still names the GPU and commit it came from), so a full run can
be split over several sessions of a time-limited machine.
"""

import argparse
import datetime
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"
ANCHOR = "<!-- results below, newest first -->"

# name -> (script, arguments; {out} is the output directory)
BENCHES = {
    "attention": ("bench_attention.py", ["--rounds", "3", "--json", "{out}/bench_attention.json", "--png",
                                        "{out}/bench_attention.png"]),
    "dropout": ("bench_attention_dropout.py", ["--json", "{out}/bench_attention_dropout.json"]),
    "mlp": ("bench_mlp.py", ["--json", "{out}/bench_mlp.json", "--png", "{out}/bench_mlp.png"]),
    "layernorm": ("bench_layernorm.py", ["--json", "{out}/bench_layernorm.json", "--png", "{out}/bench_layernorm.png"]),
    "layernorm_dropout": ("bench_layernorm_dropout.py", ["--json", "{out}/bench_layernorm_dropout.json"]),
    "classifier": ("bench_classifier.py", ["--json", "{out}/bench_classifier.json", "--png", "{out}/bench_classifier.png"]),
    "train": ("bench_train.py", ["--profile", "--out", "{out}"]),
}


def environment() -> dict:
    """Versions and GPU of this process's torch (what the benchmarks run with)."""
    import torch
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU (cpu)"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return dict(date=datetime.date.today().isoformat(), gpu=gpu, torch=torch.__version__,
                cuda=torch.version.cuda, cudnn=cudnn, commit=git_commit())


def git_commit() -> str:
    """The checkout's short commit, with a + when tracked files differ from it ("unknown" without git)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        commit, dirty = "", ""
    return (commit or "unknown") + ("+" if dirty else "")


def run_bench(name: str, out: str, extra: list[str], timeout: int, env: dict) -> dict:
    script, args = BENCHES[name]
    cmd = [sys.executable, os.path.join("bench", script), *[a.format(out=out) for a in args], *extra]
    t0 = time.time()
    print(f"== {name}: {shlex.join(cmd)}", flush=True)
    try:
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = r.stdout + (f"\n[stderr]\n{r.stderr.strip()}" if r.returncode and r.stderr.strip() else ""), r.returncode
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        text, rc = text + f"\n[timed out after {timeout} s]", "timeout"
    with open(os.path.join(out, f"{name}.log"), "w") as f:
        f.write(text)
    print(text.rstrip() + f"\n== {name}: rc {rc}, {time.time() - t0:.0f} s\n", flush=True)
    return dict(name=name, cmd=shlex.join(cmd[1:]), rc=rc, text=text.strip(), seconds=round(time.time() - t0), env=env)


def env_line(env: dict) -> str:
    cudnn = f"{env['cudnn'] // 10000}.{env['cudnn'] // 100 % 100}" if env["cudnn"] else "n/a"
    return f"{env['gpu']}, {env['date']}, commit {env['commit']}; torch {env['torch']}, CUDA {env['cuda']}, cuDNN {cudnn}"


def bench_section(r: dict) -> str:
    """One benchmark's part of the block, starting with its marker line (what --merge finds it by)."""
    status = "" if r["rc"] == 0 else f" — FAILED (rc {r['rc']})"
    return "\n".join([f"<!-- bench:{r['name']} -->", f"### {r['name']}: `python {r['cmd']}` ({r['seconds']} s){status}",
                      env_line(r["env"]), "", "```", r["text"], "```", ""])


def kept_sections(results: str) -> dict:
    """{name: section text} of the benchmarks in RESULTS.md's current block (for --merge)."""
    if not os.path.isfile(results):
        return {}
    text = open(results).read()
    if BEGIN not in text or END not in text:
        return {}
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    parts = re.split(r"(?m)^(?=<!-- bench:)", block)
    found = {}
    for part in parts:
        m = re.match(r"<!-- bench:(\w+) -->", part)
        if m and m.group(1) in BENCHES:
            found[m.group(1)] = part.split("\n![", 1)[0].rstrip() + "\n"
    return found


def section(env: dict, sections: dict, plots: list[str], command: str) -> str:
    """The block: a header, the benchmarks' sections in BENCHES order, then the plots."""
    lines = [BEGIN, f"## latest full run (bench/run_all.py), {env['gpu']}, {env['date']}, commit {env['commit']}",
             f"command: `{command}` (this block is rewritten by every run; each benchmark's section names the GPU, "
             "versions and commit it ran with; the dated sections below are kept by hand)", ""]
    lines += [sections[n] for n in BENCHES if n in sections]
    lines += [f"![{os.path.splitext(p)[0]}](plots/{p})" for p in plots]
    lines.append(END)
    return "\n".join(lines)


def plot_names(name: str) -> list[str]:
    """The PNG files benchmark `name` writes (bench_train.py writes bench_train.png into its --out)."""
    script, args = BENCHES[name]
    pngs = [os.path.basename(args[i + 1]) for i, a in enumerate(args) if a == "--png"]
    return pngs or (["bench_train.png"] if name == "train" else [])


def rewrite_results(path: str, block: str) -> None:
    """Replace the run_all block of RESULTS.md (or insert it after the anchor line), atomically."""
    text = open(path).read() if os.path.isfile(path) else "# Benchmark results\n\n" + ANCHOR + "\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    elif ANCHOR in text:
        text = text.replace(ANCHOR, ANCHOR + "\n\n" + block + "\n", 1)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--benches", default=",".join(BENCHES), help=f"comma-separated subset of {','.join(BENCHES)}")
    for name in BENCHES:
        ap.add_argument(f"--{name}-args", default="", help=f"extra arguments for {BENCHES[name][0]}")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "out", "run_all"))
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "RESULTS.md"))
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per benchmark (default 1800)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the block's sections of the benchmarks not run this time (default: replace the block)")
    args = ap.parse_args(argv)
    names = args.benches.split(",")
    bad = [n for n in names if n not in BENCHES]
    if bad:
        print(f"error: unknown benchmark {', '.join(bad)} (choose from {', '.join(BENCHES)})", file=sys.stderr)
        return 2
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    env = environment()
    print(f"run_all: {env['gpu']}, torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, "
          f"commit {env['commit']}", flush=True)
    sections = kept_sections(args.results) if args.merge else {}
    runs = [run_bench(n, out, shlex.split(getattr(args, f"{n}_args")), args.timeout, env) for n in names]
    sections.update({r["name"]: bench_section(r) for r in runs})
    plots_dir = os.path.join(os.path.dirname(os.path.abspath(args.results)), "plots")
    for png in (png for r in runs for png in plot_names(r["name"])):  # this run's plots only, never a stale one
        if os.path.isfile(os.path.join(out, png)):
            os.makedirs(plots_dir, exist_ok=True)
            shutil.copyfile(os.path.join(out, png), os.path.join(plots_dir, png))
    plots = [png for n in BENCHES if n in sections for png in plot_names(n)
             if os.path.isfile(os.path.join(plots_dir, png))]
    command = shlex.join(["python", "bench/run_all.py", *(sys.argv[1:] if argv is None else argv)])
    rewrite_results(args.results, section(env, sections, plots, command))
    failed = [r["name"] for r in runs if r["rc"] != 0]
    print(f"rewrote the run_all block of {args.results}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
