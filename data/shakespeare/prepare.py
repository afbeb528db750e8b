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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for data.gpt2_bpe
from data.gpt2_bpe import get_gpt2_encoding  # noqa: E402
from data.tiny_shakespeare import load_text, write_atomic  # noqa: E402


def prepare(input_path: str | None = None, out_dir: str | None = None,
            bpe_path: str | None = None) -> None:
    out_dir = out_dir or HERE
    os.makedirs(out_dir, exist_ok=True)
    data = load_text(input_path, HERE)
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
