"""
Prepare tiny shakespeare for character-level language modeling.

    python data/shakespeare_char/prepare.py                   # downloads input.txt
    python data/shakespeare_char/prepare.py --input input.txt # offline

Writes train.bin and val.bin (uint16 token ids, first 90% / last 10% of the text)
and meta.pkl (vocab_size, itos, stoi) next to this script, or into --out_dir.
Each output is written to a temporary file and renamed into place, so an
interrupted run never leaves a half-written file behind.
"""

import argparse
import os
import pickle
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for data.tiny_shakespeare
from data.tiny_shakespeare import load_text, write_atomic  # noqa: E402


def prepare(input_path: str | None = None, out_dir: str | None = None) -> dict:
    out_dir = out_dir or HERE
    os.makedirs(out_dir, exist_ok=True)
    data = load_text(input_path, HERE)
    print(f"length of dataset in characters: {len(data):,}")

    chars = sorted(set(data))
    vocab_size = len(chars)
    if vocab_size > 65536:
        sys.exit(f"error: {vocab_size} distinct characters do not fit in uint16")
    print("all the unique characters:", "".join(chars))
    print(f"vocab size: {vocab_size:,}")
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}

    n = len(data)
    train_ids = np.array([stoi[c] for c in data[: int(n * 0.9)]], dtype=np.uint16)
    val_ids = np.array([stoi[c] for c in data[int(n * 0.9):]], dtype=np.uint16)
    print(f"train has {len(train_ids):,} tokens")
    print(f"val has {len(val_ids):,} tokens")

    write_atomic(os.path.join(out_dir, "train.bin"), train_ids.tobytes())
    write_atomic(os.path.join(out_dir, "val.bin"), val_ids.tobytes())
    meta = {"vocab_size": vocab_size, "itos": itos, "stoi": stoi}
    write_atomic(os.path.join(out_dir, "meta.pkl"), pickle.dumps(meta))
    return meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--input", help="local tiny shakespeare text file (default: download)")
    parser.add_argument("--out_dir", help="where to write the outputs (default: next to this script)")
    args = parser.parse_args(argv)
    prepare(args.input, args.out_dir)


if __name__ == "__main__":
    main()
