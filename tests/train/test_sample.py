"""sample.py end to end on the CPU: from a trained char-level checkpoint (meta.pkl),
from a GPT-2-vocabulary checkpoint (local BPE ranks), and its errors."""

import os
import pickle
import re
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(REPO, "sample.py")
SEP = "---------------"


def run(args, cwd, env=None):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def char_run(tmp_path_factory, shakespeare_path):
    """A tiny char-level model trained for a few iterations by train.py."""
    d = tmp_path_factory.mktemp("sample_char")
    r = run([os.path.join(REPO, "data", "shakespeare_char", "prepare.py"), "--input",
             shakespeare_path, "--out_dir", str(d / "data")], d)
    assert r.returncode == 0, r.stderr
    r = run([os.path.join(REPO, "train.py"), "--device=cpu", "--compile=False",
             "--dataset=shakespeare_char", f"--data_dir={d / 'data'}", "--out_dir=out",
             "--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=8",
             "--gradient_accumulation_steps=1", "--max_iters=30", "--eval_interval=30",
             "--eval_iters=2", "--learning_rate=3e-3", "--warmup_iters=2", "--lr_decay_iters=30",
             "--log_interval=10"], d)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(d / "data" / "meta.pkl", "rb") as f:
        meta = pickle.load(f)
    return d, meta


def samples(stdout):
    """The generated texts: what is printed before each separator line."""
    body = stdout.split("assuming GPT-2 encodings...\n")[-1]
    body = body.split("...\n", 1)[-1] if "Loading meta from" in body else body
    return [s.strip("\n") for s in body.split(SEP)[:-1]]


def test_sample_prints_text_from_a_char_checkpoint(char_run):
    d, meta = char_run
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_samples=2", "--max_new_tokens=50",
             "--start=ROMEO:", "--top_k=20", "--top_p=0.95"], d)
    assert r.returncode == 0, r.stderr[-3000:]
    texts = samples(r.stdout)
    assert len(texts) == 2
    for text in texts:
        assert text.startswith("ROMEO:")
        assert len(text) == len("ROMEO:") + 50
        assert set(text) <= set(meta["stoi"])
    # the same seed gives the same samples; greedy decoding is deterministic too
    again = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_samples=2", "--max_new_tokens=50",
                 "--start=ROMEO:", "--top_k=20", "--top_p=0.95"], d)
    assert samples(again.stdout) == texts


def test_sample_start_from_file_and_greedy_with_and_without_cache(char_run):
    d, _ = char_run
    (d / "prompt.txt").write_text("First Citizen:\n")
    outs = []
    for cache in (True, False):
        r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_samples=1",
                 "--max_new_tokens=40", "--start=FILE:prompt.txt", "--temperature=0",
                 f"--use_kv_cache={cache}"], d)
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(samples(r.stdout))
    assert outs[0] == outs[1] and outs[0][0].startswith("First Citizen:\n")


def test_sample_with_gpt2_bpe(tmp_path, bpe_path):
    """A checkpoint without meta.pkl is decoded with GPT-2's BPE (local ranks file)."""
    sys.path.insert(0, REPO)
    from model import GPT, GPTConfig
    args = dict(n_layer=1, n_head=2, n_embd=16, block_size=16, bias=False, vocab_size=50304,
                dropout=0.0)
    model = GPT(GPTConfig(**args))
    (tmp_path / "out").mkdir()
    torch.save({"model": model.state_dict(), "model_args": args,
                "config": {"dataset": "openwebtext", "data_dir": str(tmp_path / "nodata")}},
               tmp_path / "out" / "ckpt.pt")
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_samples=1", "--max_new_tokens=5",
             "--start=Hello world", "--top_k=50"], tmp_path, env={"TIKTOKEN_GPT2_BPE": bpe_path})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "assuming GPT-2 encodings" in r.stdout
    texts = samples(r.stdout)
    assert len(texts) == 1 and texts[0].startswith("Hello world") and len(texts[0]) > len("Hello world")


def test_sample_errors(char_run, tmp_path):
    d, _ = char_run
    r = run([SAMPLE, "--out_dir=nowhere", "--device=cpu"], d)
    assert r.returncode == 1 and "no checkpoint at nowhere" in r.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "ckpt.pt").write_bytes(b"\x00" * 100)
    r = run([SAMPLE, f"--out_dir={tmp_path / 'bad'}", "--device=cpu"], d)
    assert r.returncode == 1 and "corrupt" in r.stderr and "Traceback" not in r.stderr
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--kernels=tk"], d)
    assert r.returncode == 1 and "kernels=tk" in r.stderr and "Traceback" not in r.stderr
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--start=FILE:missing.txt"], d)
    assert r.returncode == 1 and "missing.txt" in r.stderr
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_sample=3"], d)
    assert r.returncode == 2 and "num_samples" in r.stderr


def test_sample_reports_tokens_per_second_and_float32_on_cpu(char_run):
    d, _ = char_run
    r = run([SAMPLE, "--out_dir=out", "--device=cpu", "--num_samples=2", "--max_new_tokens=30",
             "--dtype=float16"], d)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "note: float16 autocast is not used on the CPU; sampling in float32" in r.stdout
    m = re.search(r"^generated (\d+) tokens in ([\d.]+)s: ([\d.]+) tokens/s$", r.stdout, re.M)
    assert m and int(m[1]) == 2 * 30 and float(m[3]) > 0
    assert len(samples(r.stdout)) == 2


def test_sample_from_a_save_pretrained_directory_and_offline_hub(tmp_path, bpe_path):
    transformers = pytest.importorskip("transformers")
    with torch.random.fork_rng():  # leave the global RNG of this pytest process alone
        hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            n_layer=1, n_head=2, n_embd=8, n_positions=16, vocab_size=50257))
    hf.save_pretrained(tmp_path / "tiny-gpt2")
    env = {"TIKTOKEN_GPT2_BPE": bpe_path, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    r = run([SAMPLE, f"--init_from={tmp_path / 'tiny-gpt2'}", "--device=cpu", "--num_samples=1",
             "--max_new_tokens=4", "--start=Hello"], tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    texts = samples(r.stdout)
    assert len(texts) == 1 and texts[0].startswith("Hello")
    # a hub model that is not in the (empty) cache, offline: one message, with the ways on
    r = run([SAMPLE, "--init_from=gpt2", "--device=cpu"], tmp_path, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "HF_HUB_OFFLINE is set" in r.stderr and "init_from=PATH" in r.stderr
