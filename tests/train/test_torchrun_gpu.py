"""train.py under torchrun with one process on one GPU (issue 13's single-GPU part): with kernels=tk
it trains, checkpoints and resumes exactly as the same run without torchrun.

DDP over one NCCL rank all-reduces each gradient with itself, so every loss must be bitwise the one of
the plain run. The kernels are made deterministic for that (TK_DETERMINISTIC=1: the attention
backward's dQ without atomics); the attention dropout draws the same masks in both runs (same seed,
the same sequence of generator offsets). NVLink multicast stays off in every process started here."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "train.py")
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1"]
ENV = {"PYTHONPATH": REPO, "TK_DETERMINISTIC": "1", "NCCL_NVLS_ENABLE": "0",
       "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def args(data_dir, out_dir, log_file, **overrides):
    a = dict(device="cuda", dtype="bfloat16", compile=False, kernels="tk", dataset="shakespeare_char",
             data_dir=data_dir, out_dir=out_dir, log_file=log_file, n_layer=2, n_head=2, n_embd=128,
             block_size=64, batch_size=8, gradient_accumulation_steps=2, eval_iters=2, eval_interval=5,
             log_interval=1, learning_rate=3e-3, warmup_iters=2, lr_decay_iters=10, min_lr=3e-4,
             dropout=0.1, bias=False, always_save_checkpoint=True, max_iters=10)
    a.update(overrides)
    return [f"--{k}={v}" for k, v in a.items()]


def run(cmd, cwd):
    r = subprocess.run([sys.executable, *cmd], cwd=cwd, env={**os.environ, **ENV}, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def records(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f]
    return ({r["iter"]: r["loss"] for r in rows if "loss" in r},
            {r["iter"]: r["val_loss"] for r in rows if "val_loss" in r})


def test_torchrun_one_gpu_trains_checkpoints_and_resumes_like_a_plain_run(char_data, tmp_path):
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("kernels=tk needs compute capability >= 8.0")
    plain = run([TRAIN, *args(char_data, "plain", "plain.jsonl")], tmp_path)
    assert "kernels=tk: attention=tk" in plain.stdout
    ddp = run([*TORCHRUN, TRAIN, *args(char_data, "ddp", "ddp.jsonl")], tmp_path)
    steps_plain, evals_plain = records(tmp_path / "plain.jsonl")
    steps_ddp, evals_ddp = records(tmp_path / "ddp.jsonl")
    assert sorted(steps_plain) == list(range(11)) and set(evals_plain) == {0, 5, 10}  # iterations 0 .. max_iters
    assert steps_ddp == steps_plain and evals_ddp == evals_plain  # bitwise
    ckpt = torch.load(tmp_path / "ddp" / "ckpt.pt", weights_only=True)
    assert ckpt["iter_num"] == 10 and ckpt["world_size"] == 1

    # stop at 5 under torchrun, resume under torchrun: the rest of the run is the uninterrupted one
    run([*TORCHRUN, TRAIN, *args(char_data, "part", "part.jsonl", max_iters=5)], tmp_path)
    shutil.copytree(tmp_path / "part", tmp_path / "part_plain")
    run([*TORCHRUN, TRAIN, *args(char_data, "part", "resumed.jsonl", init_from="resume")], tmp_path)
    # ... and the same torchrun checkpoint resumed without torchrun
    run([TRAIN, *args(char_data, "part_plain", "resumed_plain.jsonl", init_from="resume")], tmp_path)
    for log in ("resumed.jsonl", "resumed_plain.jsonl"):
        steps_resumed, evals_resumed = records(tmp_path / log)
        assert steps_resumed == {i: steps_plain[i] for i in range(5, 11)}, log  # iterations 5 .. max_iters
        assert evals_resumed[10] == evals_plain[10], log
