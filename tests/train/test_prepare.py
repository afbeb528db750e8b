"""The data prepare scripts, run as a user runs them (subprocess), into temp dirs."""

import json
import os
import pickle
import random
import subprocess
import sys

import numpy as np
import pytest

from data.gpt2_bpe import ENV_VAR, get_gpt2_encoding


def run(repo_root, script, *args, env=None):
    return subprocess.run([sys.executable, os.path.join(repo_root, "data", script, "prepare.py"), *args],
                          capture_output=True, text=True, cwd=repo_root, env=env, timeout=600)


def test_shakespeare_char(repo_root, shakespeare_path, tmp_path):
    r = run(repo_root, "shakespeare_char", "--input", shakespeare_path, "--out_dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    assert (len(train), len(val)) == (1_003_854, 111_540)  # nanoGPT's published counts
    with open(tmp_path / "meta.pkl", "rb") as f:
        meta = pickle.load(f)
    assert meta["vocab_size"] == 65 == len(meta["itos"]) == len(meta["stoi"])
    text = open(shakespeare_path, encoding="utf-8").read()
    decoded = "".join(meta["itos"][int(i)] for i in np.concatenate([train, val]))
    assert decoded == text
    assert all(meta["stoi"][c] == i for i, c in meta["itos"].items())
    assert sorted(os.listdir(tmp_path)) == ["meta.pkl", "train.bin", "val.bin"]  # no temp files left


def test_shakespeare_char_small_random_input(repo_root, tmp_path):
    rng = random.Random()
    text = "".join(rng.choice("abcXYZ \n!é") for _ in range(rng.randint(50, 500)))
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    r = run(repo_root, "shakespeare_char", "--input", str(src), "--out_dir", str(out))
    assert r.returncode == 0, r.stderr
    meta = pickle.load(open(out / "meta.pkl", "rb"))
    ids = np.concatenate([np.fromfile(out / "train.bin", dtype=np.uint16),
                          np.fromfile(out / "val.bin", dtype=np.uint16)])
    assert len(np.fromfile(out / "train.bin", dtype=np.uint16)) == int(len(text) * 0.9)
    assert "".join(meta["itos"][int(i)] for i in ids) == text
    assert meta["vocab_size"] == len(set(text))


@pytest.mark.parametrize("script", ["shakespeare_char", "shakespeare", "openwebtext"])
def test_unreadable_input(repo_root, tmp_path, script):
    if script == "openwebtext":
        pytest.importorskip("datasets")
    missing = str(tmp_path / "does-not-exist.txt")
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.bin").write_bytes(b"keep")  # an earlier result must survive
    args = ["--input", missing, "--out_dir", str(out)]
    if script != "shakespeare_char":
        bpe = os.path.join(os.path.dirname(repo_root), "shared", "data", "gpt2", "r50k_base.tiktoken")
        if not os.path.isfile(bpe):
            pytest.skip(f"shared data file {bpe} is absent")
        args += ["--bpe", bpe]
    r = run(repo_root, script, *args)
    assert r.returncode != 0
    assert missing in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert (out / "train.bin").read_bytes() == b"keep"


def test_shakespeare_bpe(repo_root, shakespeare_path, bpe_path, tmp_path):
    r = run(repo_root, "shakespeare", "--input", shakespeare_path, "--out_dir", str(tmp_path),
            "--bpe", bpe_path)
    assert r.returncode == 0, r.stderr
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "val.bin", dtype=np.uint16)
    assert (len(train), len(val)) == (301_966, 36_059)  # nanoGPT's published counts
    enc = get_gpt2_encoding(bpe_path)
    text = open(shakespeare_path, encoding="utf-8").read()
    n = int(len(text) * 0.9)
    assert enc.decode(train.tolist()) == text[:n]
    assert enc.decode(val.tolist()) == text[n:]


def test_shakespeare_bpe_via_env(repo_root, bpe_path, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("Hello world\nHello world\n" * 10)
    env = dict(os.environ, **{ENV_VAR: bpe_path})
    r = run(repo_root, "shakespeare", "--input", str(src), "--out_dir", str(tmp_path / "o"), env=env)
    assert r.returncode == 0, r.stderr
    assert np.fromfile(tmp_path / "o" / "train.bin", dtype=np.uint16)[:2].tolist() == [15496, 995]


def test_bad_bpe_file(repo_root, shakespeare_path, tmp_path):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not a ranks file\n")
    r = run(repo_root, "shakespeare", "--input", shakespeare_path, "--out_dir", str(tmp_path / "o"),
            "--bpe", str(bad))
    assert r.returncode != 0 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o" / "train.bin").exists()


def test_gpt2_encoding_known_ids(bpe_path):
    enc = get_gpt2_encoding(bpe_path)
    assert enc.name == "gpt2" and enc.n_vocab == 50257 and enc.eot_token == 50256
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    assert enc.encode_ordinary(" the") == [262]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [50256]
    assert enc.encode_ordinary("<|endoftext|>") != [50256]
    # contractions and whitespace runs follow GPT-2's split pattern
    assert [enc.decode([t]) for t in enc.encode_ordinary("I'll go  now\n\n")] == \
        ["I", "'ll", " go", " ", " now", "\n\n"]
    rng = random.Random()
    words = ["Hello", " world", "'s", " 123", "!!", "\n", "  ", "naïve", "日本"]
    text = "".join(rng.choice(words) for _ in range(200))
    assert enc.decode(enc.encode_ordinary(text)) == text


def test_gpt2_encoding_matches_tiktoken_when_cached(bpe_path, shakespeare_path):
    """Where tiktoken's own gpt2 files are already cached, ours must agree exactly."""
    import tempfile

    import tiktoken
    cache = (os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
             or os.path.join(tempfile.gettempdir(), "data-gym-cache"))
    if not os.path.isdir(cache) or len(os.listdir(cache)) < 2:
        pytest.skip(f"tiktoken's own gpt2 files are not cached in {cache}; "
                    "test_gpt2_encoding_known_ids checks known ids instead")
    try:
        ref = tiktoken.get_encoding("gpt2")
    except Exception as e:
        pytest.skip(f"tiktoken.get_encoding('gpt2') is unavailable: {e}")
    text = open(shakespeare_path, encoding="utf-8").read()
    assert get_gpt2_encoding(bpe_path).encode_ordinary(text) == ref.encode_ordinary(text)


def test_gpt2_encoding_env_and_errors(bpe_path, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, bpe_path)
    assert get_gpt2_encoding().encode_ordinary("Hello world") == [15496, 995]
    missing = str(tmp_path / "missing.tiktoken")
    with pytest.raises(RuntimeError, match="missing.tiktoken"):
        get_gpt2_encoding(missing)
    monkeypatch.setenv(ENV_VAR, missing)
    with pytest.raises(RuntimeError, match="missing.tiktoken"):
        get_gpt2_encoding()
    # with nothing local and tiktoken unable to fetch: one error saying how to supply it
    import tiktoken
    monkeypatch.delenv(ENV_VAR)

    def offline(name):
        raise ConnectionError("no network")
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(RuntimeError) as e:
        get_gpt2_encoding()
    assert "--bpe" in str(e.value) and ENV_VAR in str(e.value)


def _random_docs(n):
    rng = random.Random()
    vocab = ["the", "cat", "sat", "on", "mat", "Hello", "world", "!", "'s", "42", "é", "\n"]
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def _check_owt_output(out, docs, bpe_path):
    enc = get_gpt2_encoding(bpe_path)
    got = []
    for split in ("train", "val"):
        ids = np.fromfile(out / f"{split}.bin", dtype=np.uint16)
        assert len(ids) > 0 and ids[-1] == enc.eot_token
        pieces = np.split(ids, np.flatnonzero(ids == enc.eot_token) + 1)[:-1]
        split_docs = [enc.decode(p[:-1].tolist()) for p in pieces]
        assert all(p[-1] == enc.eot_token for p in pieces)
        got.append(split_docs)
    train_docs, val_docs = got
    assert len(val_docs) >= 1 and len(train_docs) >= 1
    assert sorted(train_docs + val_docs) == sorted(docs)
    assert not [n for n in os.listdir(out) if n not in ("train.bin", "val.bin")]  # no leftovers


def test_openwebtext_saved_dataset(repo_root, bpe_path, tmp_path):
    datasets = pytest.importorskip("datasets")
    docs = _random_docs(60)
    src = tmp_path / "owt"
    datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(src))
    before = sorted(os.listdir(src))
    out = tmp_path / "out"
    r = run(repo_root, "openwebtext", "--input", str(src), "--out_dir", str(out),
            "--num_proc=2", "--bpe", bpe_path)
    assert r.returncode == 0, r.stderr
    _check_owt_output(out, docs, bpe_path)
    assert sorted(os.listdir(src)) == before  # nothing written into the input dataset


def test_openwebtext_json_and_text_files(repo_root, bpe_path, tmp_path):
    pytest.importorskip("datasets")
    docs = _random_docs(30)
    src = tmp_path / "jsonl"
    src.mkdir()
    for k in range(2):
        with open(src / f"part{k}.jsonl", "w") as f:
            for d in docs[k::2]:
                f.write(json.dumps({"text": d}) + "\n")
    out = tmp_path / "out"
    r = run(repo_root, "openwebtext", "--input", str(src), "--out_dir", str(out),
            "--num_proc=2", "--bpe", bpe_path)
    assert r.returncode == 0, r.stderr
    _check_owt_output(out, docs, bpe_path)

    txt_docs = [d + "\nsecond line" for d in _random_docs(5)]  # one document per .txt file
    files = []
    for k, d in enumerate(txt_docs):
        files.append(tmp_path / f"doc{k}.txt")
        files[-1].write_text(d)
    out2 = tmp_path / "out2"
    r = run(repo_root, "openwebtext", "--input", *map(str, files), "--out_dir", str(out2),
            "--num_proc=1", "--bpe", bpe_path)
    assert r.returncode == 0, r.stderr
    _check_owt_output(out2, txt_docs, bpe_path)


def test_openwebtext_bad_inputs(repo_root, bpe_path, tmp_path):
    datasets = pytest.importorskip("datasets")
    src = tmp_path / "notext"
    datasets.Dataset.from_dict({"body": ["a", "b", "c"]}).save_to_disk(str(src))
    r = run(repo_root, "openwebtext", "--input", str(src), "--out_dir", str(tmp_path / "o"),
            "--bpe", bpe_path, "--num_proc=1")
    assert r.returncode != 0 and "'text'" in r.stderr and "Traceback" not in r.stderr
    weird = tmp_path / "x.docx"
    weird.write_text("hi")
    r = run(repo_root, "openwebtext", "--input", str(weird), "--out_dir", str(tmp_path / "o"),
            "--bpe", bpe_path, "--num_proc=1")
    assert r.returncode != 0 and ".docx" in r.stderr and "Traceback" not in r.stderr
