"""train.py end to end on the CPU, each run a real subprocess: falling loss,
exact resume, crash-safe checkpoints, 2-process gloo DDP, and bad input."""

import hashlib
import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "train.py")


def tiny_args(data_dir, out_dir, **overrides):
    args = dict(device="cpu", compile=False, dataset="shakespeare_char", data_dir=data_dir,
                out_dir=out_dir, n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4,
                gradient_accumulation_steps=2, eval_iters=2, eval_interval=10, log_interval=1,
                learning_rate=3e-3, warmup_iters=2, lr_decay_iters=20, min_lr=3e-4, dropout=0.1,
                bias=False, always_save_checkpoint=True, wandb_log=False, max_iters=20)
    args.update(overrides)
    return [f"--{k}={v}" for k, v in args.items() if v is not None]  # None: leave the default


def run(args, cwd, prefix=(), timeout=300, env=None):
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, *prefix, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def losses(stdout):
    """{iter: loss} from the `iter N: loss X, ...` log lines."""
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^iter (\d+): loss ([\d.]+),", stdout, re.M)}


def json_losses(path):
    with open(path) as f:
        return {r["iter"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_loss_falls_and_resume_reproduces_the_uninterrupted_run(char_data, tmp_path):
    # the uninterrupted run: iterations 0..20
    full = run([TRAIN, *tiny_args(char_data, "full", log_file="full.jsonl")], tmp_path)
    assert full.returncode == 0, full.stderr[-3000:]
    seen = losses(full.stdout)
    assert sorted(seen) == list(range(21))
    first, last = sum(seen[i] for i in range(3)) / 3, sum(seen[i] for i in range(18, 21)) / 3
    assert last < first - 0.3, seen  # learning
    assert re.search(r"^iter 5: loss [\d.]+, time [\d.]+ms, tok/s \d+, mfu n/a, "
                     r"elapsed \d+s, eta \d+s$", full.stdout, re.M)
    assert "step 10: train loss" in full.stdout and "kernels=torch" in full.stdout
    assert "no CUDA GPU found" not in full.stdout  # --device=cpu was asked for
    # the end of the run: the best val loss and where the checkpoint is
    assert re.search(r"^best val loss [\d.]+$", full.stdout, re.M)
    end = re.search(r"^checkpoint \(iter 20\): (.+)$", full.stdout, re.M)
    assert end and os.path.isabs(end[1]) and os.path.samefile(end[1], tmp_path / "full" / "ckpt.pt")
    with open(tmp_path / "full.jsonl") as f:
        records = [json.loads(line) for line in f]
    steps, evals = [r for r in records if "loss" in r], [r for r in records if "val_loss" in r]
    assert [r["iter"] for r in evals] == [0, 10, 20]
    assert all(set(r) == {"iter", "loss", "lr", "time_ms", "tok_per_s"} for r in steps)
    assert all(abs(r["tok_per_s"] - 256 / (r["time_ms"] / 1000)) < 1e-6 * r["tok_per_s"] for r in steps)
    ckpt = torch.load(tmp_path / "full" / "ckpt.pt", weights_only=True)
    assert ckpt["iter_num"] == 20 and ckpt["model_args"]["n_layer"] == 2
    assert {"model", "optimizer", "config", "rng", "best_val_loss"} <= set(ckpt)

    # a run stopped after its iteration-10 checkpoint ...
    part = run([TRAIN, *tiny_args(char_data, "part", max_iters=10)], tmp_path)
    assert part.returncode == 0, part.stderr[-3000:]
    assert torch.load(tmp_path / "part" / "ckpt.pt", weights_only=True)["iter_num"] == 10
    # ... and resumed to iteration 20 continues exactly like the uninterrupted run
    resumed = run([TRAIN, *tiny_args(char_data, "part", max_iters=20, init_from="resume",
                                     log_file="resumed.jsonl")], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    full_json, resumed_json = json_losses(tmp_path / "full.jsonl"), json_losses(tmp_path / "resumed.jsonl")
    assert sorted(resumed_json) == list(range(10, 21))
    assert resumed_json == {i: full_json[i] for i in range(10, 21)}  # bit-exact floats
    assert losses(resumed.stdout) == {i: seen[i] for i in range(10, 21)}


SAVE_KILLER = """
import os, runpy, sys
import torch
real_save, calls = torch.save, []
def save(obj, f, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:  # die in the middle of writing the second checkpoint
        f.write(b"half a checkpoint")
        f.flush()
        os._exit(17)
    return real_save(obj, f, *args, **kwargs)
torch.save = save
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_interrupted_checkpoint_write_keeps_the_previous_checkpoint(char_data, tmp_path):
    (tmp_path / "killer.py").write_text(SAVE_KILLER)
    r = run(["killer.py", TRAIN, *tiny_args(char_data, "out", max_iters=20, eval_interval=5)],
            tmp_path)
    assert r.returncode == 17, r.stderr[-3000:]
    assert "saving checkpoint" in r.stdout
    ckpt = torch.load(tmp_path / "out" / "ckpt.pt", weights_only=True)
    assert ckpt["iter_num"] == 5  # the first one, intact
    assert (tmp_path / "out" / "ckpt.pt.tmp").read_bytes() == b"half a checkpoint"
    # and training resumes from it
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=6, init_from="resume")], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(losses(r.stdout)) == [5, 6]


def test_ddp_two_processes_gloo_and_exact_resume(char_data, tmp_path):
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    common = dict(max_iters=6, eval_interval=3, lr_decay_iters=6, gradient_accumulation_steps=4)
    full = run([TRAIN, *tiny_args(char_data, "full", log_file="full.jsonl", **common)], tmp_path,
               prefix=torchrun)
    assert full.returncode == 0, full.stderr[-3000:]
    assert sorted(losses(full.stdout)) == list(range(7))  # logged once, by the master
    assert "tokens per iteration will be: 512" in full.stdout  # 2 micro-steps x 2 processes x 4 x 32
    ckpt = torch.load(tmp_path / "full" / "ckpt.pt", weights_only=True)
    assert ckpt["iter_num"] == 6 and len(ckpt["rng"]) == 2 and ckpt["world_size"] == 2

    part = run([TRAIN, *tiny_args(char_data, "part", **dict(common, max_iters=3))], tmp_path,
               prefix=torchrun)
    assert part.returncode == 0, part.stderr[-3000:]
    resumed = run([TRAIN, *tiny_args(char_data, "part", init_from="resume",
                                     log_file="resumed.jsonl", **common)], tmp_path, prefix=torchrun)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    full_json = json_losses(tmp_path / "full.jsonl")
    assert json_losses(tmp_path / "resumed.jsonl") == {i: full_json[i] for i in range(3, 7)}


def json_evals(path):
    with open(path) as f:
        return {r["iter"]: r["val_loss"] for r in map(json.loads, f) if "val_loss" in r}


def max_rel(a, b):
    return max(abs(a[i] - b[i]) / abs(b[i]) for i in a)


def test_ddp_losses_are_the_one_process_losses_with_the_same_global_batch(char_data, tmp_path):
    """The training batches do not depend on the number of processes: with the same seed and global batch
    (gradient_accumulation_steps counts over all processes) 2 gloo processes average the gradients of the
    same samples as 1 process, so in float32 without dropout the losses agree up to the order of the
    gradient sums (measured on this CPU: at most 1.2e-7 relative, one float32 ulp; iteration 0 and most
    others bitwise). A checkpoint of the 2-process run resumed on 1 process continues the same batches."""
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    common = dict(max_iters=6, eval_interval=3, lr_decay_iters=6, gradient_accumulation_steps=4, dropout=0.0)
    one = run([TRAIN, *tiny_args(char_data, "one", log_file="one.jsonl", **common)], tmp_path)
    assert one.returncode == 0, one.stderr[-3000:]
    two = run([TRAIN, *tiny_args(char_data, "two", log_file="two.jsonl", **dict(common, max_iters=3))],
              tmp_path, prefix=torchrun)
    assert two.returncode == 0, two.stderr[-3000:]
    one_json, two_json = json_losses(tmp_path / "one.jsonl"), json_losses(tmp_path / "two.jsonl")
    assert sorted(two_json) == [0, 1, 2, 3]
    assert two_json[0] == one_json[0]  # the same first batch on the same initial model
    assert max_rel(two_json, one_json) < 1e-5, (two_json, one_json)
    assert json_evals(tmp_path / "two.jsonl")[3] == pytest.approx(json_evals(tmp_path / "one.jsonl")[3], rel=1e-5)

    # the 2-process checkpoint (iteration 3) resumed on 1 process: a warning, then the same batches
    resumed = run([TRAIN, *tiny_args(char_data, "two", init_from="resume", log_file="resumed.jsonl",
                                     **common)], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert ("warning: the checkpoint's RNG states are for 2 process(es), this run has 1; the batches "
            "continue in the original order") in resumed.stdout
    resumed_json = json_losses(tmp_path / "resumed.jsonl")
    assert sorted(resumed_json) == [3, 4, 5, 6]
    assert resumed_json[3] == two_json[3]  # the checkpoint's model on the batch the 2 processes had next
    assert max_rel(resumed_json, one_json) < 1e-5, (resumed_json, one_json)
    assert "step 3:" not in resumed.stdout  # its evaluation ran before the checkpoint was written
    assert json_evals(tmp_path / "resumed.jsonl")[6] == pytest.approx(json_evals(tmp_path / "one.jsonl")[6],
                                                                      rel=1e-5)


# -----------------------------------------------------------------------------
# bad input: one clear message, non-zero exit, nothing already written is lost

@pytest.fixture(scope="module")
def trained(char_data, tmp_path_factory):
    """A directory holding a small trained checkpoint in out/ckpt.pt."""
    d = tmp_path_factory.mktemp("trained")
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=5, eval_interval=5)], d)
    assert r.returncode == 0, r.stderr[-3000:]
    return d


def error_line(r):
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert lines, r.stdout[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return lines[-1]


@pytest.mark.parametrize("override,code,words", [
    ("--batchsize=8", 2, ["unknown config key", "batch_size"]),
    ("--batch_size=eight", 2, ["batch_size", "int"]),
    ("--compile=maybe", 2, ["compile", "bool"]),
    ("--kernels=tk", 1, ["kernels=tk", "GPU"]),
    ("--kernels=fast", 1, ["kernels must be one of"]),
    ("--compile_mode=graphs", 1, ["compile_mode", "reduce-overhead"]),
    ("--init_from=gpt3", 1, ["init_from"]),
])
def test_bad_overrides(trained, override, code, words):
    before = digest(trained / "out" / "ckpt.pt")
    data_dir = str(trained)  # not even looked at: these fail first
    r = run([TRAIN, *tiny_args(data_dir, "out", init_from="resume"), override], trained)
    assert r.returncode == code, (r.stdout[-2000:], r.stderr[-2000:])
    line = error_line(r)
    for w in words:
        assert w in line, line
    assert digest(trained / "out" / "ckpt.pt") == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_device_without_gpu(trained):
    r = run([TRAIN, *tiny_args(str(trained), "out", init_from="resume", device="cuda")], trained)
    assert r.returncode == 1 and "no CUDA GPU" in error_line(r)


def test_eval_only_resume_leaves_the_checkpoint_alone(char_data, trained):
    before = digest(trained / "out" / "ckpt.pt")
    r = run([TRAIN, *tiny_args(char_data, "out", init_from="resume", eval_only=True)], trained)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"^step 5: train loss [\d.]+, val loss [\d.]+ \(eval [\d.]+s\)$", r.stdout, re.M)
    assert not losses(r.stdout)  # no training step
    assert digest(trained / "out" / "ckpt.pt") == before


def test_missing_dataset(char_data, tmp_path):
    r = run([TRAIN, *tiny_args("", "out", dataset="no_such_dataset")], tmp_path)
    assert r.returncode == 1 and "no_such_dataset" in error_line(r)
    (tmp_path / "empty").mkdir()
    r = run([TRAIN, *tiny_args(str(tmp_path / "empty"), "out", dataset="openwebtext")], tmp_path)
    assert r.returncode == 1
    assert "data/openwebtext/prepare.py" in error_line(r)


@pytest.mark.parametrize("content", ["garbage", "truncated", "foreign", "wrong_shape", "missing"])
def test_bad_checkpoint(char_data, trained, tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    good = (trained / "out" / "ckpt.pt").read_bytes()
    if content == "garbage":
        (out / "ckpt.pt").write_bytes(b"this is not a checkpoint\n" * 10)
    elif content == "truncated":
        (out / "ckpt.pt").write_bytes(good[: len(good) // 2])
    elif content == "foreign":
        torch.save({"weights": torch.zeros(3)}, out / "ckpt.pt")
    elif content == "wrong_shape":
        ckpt = torch.load(trained / "out" / "ckpt.pt", weights_only=True)
        ckpt["model"]["lm_head.weight"] = torch.zeros(3, 3)
        torch.save(ckpt, out / "ckpt.pt")
    before = digest(out / "ckpt.pt") if content != "missing" else None
    r = run([TRAIN, *tiny_args(char_data, "out", init_from="resume")], tmp_path)
    assert r.returncode == 1, (r.stdout[-2000:], r.stderr[-2000:])
    line = error_line(r)
    assert "ckpt.pt" in line
    if content == "missing":
        assert "no checkpoint" in line
    else:
        assert digest(out / "ckpt.pt") == before


def test_wandb_offline(char_data, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=2, eval_interval=2, wandb_log=True)],
            tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]


def test_missing_dataset_or_checkpoint_leaves_no_out_dir(char_data, tmp_path):
    """A failed start creates no empty out_dir (out_dir appears with its first checkpoint)."""
    for data_dir, bad in (("", dict(dataset="no_such_dataset")),  # no data
                          (char_data, dict(init_from="resume")),  # no checkpoint to resume
                          (char_data, dict(n_embd=33)),  # not divisible by n_head
                          (char_data, dict(block_size=10**9))):  # longer than the data
        r = run([TRAIN, *tiny_args(data_dir, "out", **bad)], tmp_path)
        assert r.returncode == 1, (bad, r.stdout[-2000:], r.stderr[-2000:])
        error_line(r)
        assert not (tmp_path / "out").exists(), bad


# -----------------------------------------------------------------------------
# first runs: nothing already written is lost, progress is shown, failures are one message

def copy_trained(trained, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ckpt.pt").write_bytes((trained / "out" / "ckpt.pt").read_bytes())
    return tmp_path / "out" / "ckpt.pt"


def test_fresh_run_refuses_to_replace_a_checkpoint(char_data, trained, tmp_path):
    ckpt = copy_trained(trained, tmp_path)
    before = digest(ckpt)
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=2, eval_interval=2)], tmp_path)
    assert r.returncode == 1, (r.stdout[-2000:], r.stderr[-2000:])
    line = error_line(r)
    for words in (str(ckpt.resolve()), "--init_from=resume", "--out_dir", "--overwrite=True"):
        assert words in line, line
    assert "found vocab_size" not in r.stdout and "Initializing" not in r.stdout  # before any work
    assert digest(ckpt) == before
    # eval_only writes nothing, so it may use the directory
    r = run([TRAIN, *tiny_args(char_data, "out", eval_only=True)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert digest(ckpt) == before
    # under DDP every process takes the master's decision: one error, no hang
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=2, eval_interval=2)], tmp_path,
            prefix=["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"], timeout=120)
    assert r.returncode != 0 and r.stderr.count("already holds a checkpoint") == 2  # both ranks
    assert digest(ckpt) == before
    # --overwrite=True replaces it
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=2, eval_interval=2, overwrite=True)],
            tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert torch.load(ckpt, weights_only=True)["iter_num"] == 2


def test_resume_says_the_checkpoints_shape_wins(char_data, trained, tmp_path):
    ckpt = copy_trained(trained, tmp_path)  # n_layer=2, n_embd=32, block_size=32, bias=False, iter 5
    r = run([TRAIN, *tiny_args(char_data, "out", init_from="resume", max_iters=6, n_layer=3,
                               n_embd=48, bias=True, block_size=64)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    warning = [line for line in r.stdout.splitlines() if "shape wins" in line]
    assert warning == ["warning: the checkpoint's shape wins over the given settings "
                       "(n_layer: 3 -> 2, n_embd: 48 -> 32, bias: True -> False, block_size: 64 -> 32)"]
    assert "tokens per iteration will be: 256" in r.stdout  # 2 x 4 x the checkpoint's 32
    # a smaller block_size crops the model, as before, without a warning
    r = run([TRAIN, *tiny_args(char_data, "out", init_from="resume", max_iters=10, eval_interval=5,
                               block_size=16)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "shape wins" not in r.stdout
    assert torch.load(ckpt, weights_only=True)["model_args"]["block_size"] == 16


FAKE_COMPILE = """
import runpy, sys
import torch
torch.compile = lambda model, *args, **kwargs: model  # the messages around it, without the wait
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_cpu_fallback_and_progress(char_data, tmp_path):
    """No GPU and no --device: say so, point a GPU-sized config (compile=True) at the CPU
    config, show the compile, each evaluation, an estimate of the run and the checkpoint."""
    (tmp_path / "fake_compile.py").write_text(FAKE_COMPILE)
    r = run(["fake_compile.py", TRAIN, *tiny_args(char_data, "out", device=None, compile=True)],
            tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "no CUDA GPU found: training on the CPU\n" in out
    assert re.search(r"^note: .*compile=True.*config/train_shakespeare_char_cpu\.py", out, re.M)
    assert out.count("evaluating: 2 batches x 2 splits") == 3  # iterations 0, 10, 20
    assert re.search(r"^step 10: train loss [\d.]+, val loss [\d.]+ \(eval [\d.]+s\)$", out, re.M)
    # the compile is announced before the first step and timed after it
    compiling = out.index("compiling the model for training: the first step may take a minute")
    timed = re.search(r"^first training step \(with compilation\) took [\d.]+s$", out, re.M)
    assert timed and compiling < timed.start() < out.index("iter 0: loss")
    # after the first timed steps: the whole run's duration
    estimate = re.search(r"^estimated run time (\d+)s, (\d+)s left: 17 iterations at [\d.]+s, plus evals$",
                         out, re.M)
    assert estimate and out.index("iter 2: loss") < estimate.start() < out.index("iter 3: loss")
    assert re.search(r"^iter 0: .*, mfu n/a, elapsed \d+s, eta n/a$", out, re.M)
    assert re.search(r"^checkpoint \(iter 20\): /.*ckpt\.pt$", out, re.M)


def test_a_disabled_bytecode_cache_is_pointed_out_when_compiling(char_data, tmp_path):
    """PYTHONDONTWRITEBYTECODE makes every start compile torch.compile's Python sources again (16 s instead of
    5 s of imports on the H200 machine): train.py says so when it compiles, and only then."""
    (tmp_path / "fake_compile.py").write_text(FAKE_COMPILE)
    env = {"CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"}
    note = "note: Python's bytecode cache is off (PYTHONDONTWRITEBYTECODE is set)"
    for compile_ in (True, False):
        r = run(["fake_compile.py", TRAIN, *tiny_args(char_data, "out", device="cpu", compile=compile_,
                                                     max_iters=0, overwrite=True)], tmp_path, env=env)
        assert r.returncode == 0, r.stderr[-3000:]
        assert (note in r.stdout) == compile_, r.stdout[-2000:]


def test_max_iters_zero_trains_nothing(char_data, tmp_path):
    r = run([TRAIN, *tiny_args(char_data, "out", max_iters=0)], tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "step 0: train loss" in r.stdout and not losses(r.stdout)
    assert "no checkpoint written by this run" in r.stdout and not (tmp_path / "out").exists()


FAKE_WANDB = '''
from . import errors
def init(*args, **kwargs):
    raise errors.UsageError("No API key configured. Use `wandb login` to log in.")
'''


def test_wandb_without_login_is_one_message(char_data, tmp_path):
    """A stand-in wandb package whose init fails the way wandb does without a login."""
    fake = tmp_path / "fake" / "wandb"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_WANDB)
    (fake / "errors.py").write_text("class Error(Exception): pass\nclass UsageError(Error): pass\n")
    r = run([TRAIN, *tiny_args(char_data, "out", wandb_log=True)], tmp_path,
            env={"PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{REPO}"})
    assert r.returncode == 1, (r.stdout[-2000:], r.stderr[-2000:])
    line = error_line(r)
    for words in ("UsageError: No API key configured", "wandb login", "WANDB_MODE=offline"):
        assert words in line, line
    assert "found vocab_size" not in r.stdout and not (tmp_path / "out").exists()


def test_pretrained_offline_fails_fast(char_data, tmp_path):
    """init_from=gpt2 with an unreachable hub and an empty cache: one message in seconds
    (transformers alone retries for about 30 s), naming HF_HUB_OFFLINE and the local option."""
    pytest.importorskip("transformers")
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    t0 = time.time()
    r = run([TRAIN, *tiny_args(char_data, "out", init_from="gpt2", eval_only=True)], tmp_path, env=env)
    seconds = time.time() - t0
    assert r.returncode == 1, (r.stdout[-2000:], r.stderr[-2000:])
    line = error_line(r)
    for words in ("cannot load pretrained gpt2", "unreachable", "HF_HUB_OFFLINE=1", "save_pretrained",
                  "init_from=PATH"):
        assert words in line, line
    assert "Retrying" not in r.stderr and seconds < 25, seconds


def test_init_from_a_save_pretrained_directory(char_data, tmp_path):
    transformers = pytest.importorskip("transformers")
    with torch.random.fork_rng():  # leave the global RNG of this pytest process alone
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=1, n_head=2, n_embd=16, n_positions=32, vocab_size=65))
    hf.save_pretrained(tmp_path / "tiny-gpt2")
    r = run([TRAIN, *tiny_args(char_data, "out", init_from=str(tmp_path / "tiny-gpt2"), max_iters=2,
                               eval_interval=2, n_layer=None, n_head=None, n_embd=None, bias=None)],
            tmp_path, env={"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"loading weights from pretrained gpt: {tmp_path / 'tiny-gpt2'}" in r.stdout
    ckpt = torch.load(tmp_path / "out" / "ckpt.pt", weights_only=True)
    assert ckpt["iter_num"] == 2 and ckpt["model_args"]["n_embd"] == 16 and ckpt["model_args"]["bias"]
