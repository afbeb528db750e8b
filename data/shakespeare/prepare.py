"""
Prepare tiny shakespeare with the GPT-2 BPE tokenizer.

    python data/shakespeare/prepare.py                      # downloads input.txt
    python data/shakespeare/prepare.py --input input.txt --bpe r50k_base.tiktoken

The text is split 90/10 by characters, each part is tokenized with GPT-2's BPE,
and the ids are written as uint16 to train.bin and val.bin next to this script
(or into --out_dir), each through a temporary file and a rename.
The tokenizer is tiktoken's "gpt2"; without network access give the ranks
file with --bpe PATH or the TIKTOKEN_GPT2_BPE environment variable.
"""

import argparse
import os
import sys
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for data.gpt2_bpe
from data.gpt2_bpe import get_gpt2_encoding  # noqa: E402

DATA_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"


def write_atomic(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        sys.exit(f"error: cannot read input file {path}: {e}")


def download_input(path: str) -> None:
    if os.path.exists(path):
        return
    print(f"downloading {DATA_URL}")
    try:
        with urllib.request.urlopen(DATA_URL, timeout=60) as r:
            data = r.read()
    except Exception as e:
        sys.exit(f"error: cannot download tiny shakespeare ({e}); "
                 "pass a local copy with --input PATH")
    write_atomic(path, data)


def prepare(input_path: str | None = None, out_dir: str | None = None,
            bpe_path: str | None = None) -> None:
    out_dir = out_dir or HERE
    os.makedirs(out_dir, exist_ok=True)
    if input_path is None:
        input_path = os.path.join(HERE, "input.txt")
        download_input(input_path)
    data = read_text(input_path)
    if not data:
        sys.exit(f"error: input file {input_path} is empty")
    try:
        enc = get_gpt2_encoding(bpe_path)
    except RuntimeError as e:
        sys.exit(f"error: {e}")

    n = len(data)
    train_ids = np.array(enc.encode_ordinary(data[: int(n * 0.9)]), dtype=np.uint16)
    val_ids = np.array(enc.encode_ordinary(data[int(n * 0.9):]), dtype=np.uint16)
    print(f"train has {len(train_ids):,} tokens")
    print(f"val has {len(val_ids):,} tokens")
    write_atomic(os.path.join(out_dir, "train.bin"), train_ids.tobytes())
    write_atomic(os.path.join(out_dir, "val.bin"), val_ids.tobytes())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--input", help="local tiny shakespeare text file (default: download)")
    parser.add_argument("--out_dir", help="where to write the outputs (default: next to this script)")
    parser.add_argument("--bpe", help="local GPT-2 BPE ranks file (r50k_base.tiktoken)")
    args = parser.parse_args(argv)
    prepare(args.input, args.out_dir, args.bpe)


if __name__ == "__main__":
    main()
