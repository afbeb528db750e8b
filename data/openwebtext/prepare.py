"""
Prepare OpenWebText with the GPT-2 BPE tokenizer (needs the `datasets` package).

    python data/openwebtext/prepare.py                       # downloads from the HF hub
    python data/openwebtext/prepare.py --input DIR_OR_FILES  # offline
    python data/openwebtext/prepare.py --num_proc=16 --bpe r50k_base.tiktoken

--input takes either a directory written by Dataset.save_to_disk /
DatasetDict.save_to_disk (its "train" split is used), or text documents as
files or a directory of files: .txt (one document per file), .json/.jsonl,
.parquet, .csv or .arrow (with a "text" column).

The documents are split into train and a small val part (test_size=0.0005,
seed=2357, shuffled), tokenized in --num_proc processes with the end-of-text
token appended to each document, and written as uint16 ids to train.bin and
val.bin next to this script (or into --out_dir). Each .bin is filled through a
memmap in batches of documents and renamed into place only when complete.
For the full dataset expect about 9B train tokens (~17GB) and 4M val tokens.
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # repo root, for data.gpt2_bpe
from data.gpt2_bpe import get_gpt2_encoding  # noqa: E402

HF_NAME = "openwebtext"
BUILDERS = {".txt": "text", ".text": "text", ".json": "json", ".jsonl": "json",
            ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


def die(msg: str) -> None:
    sys.exit(f"error: {msg}")


def _data_files(paths: list[str]) -> list[str]:
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                files += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
        else:
            files.append(p)
    for f in files:
        if not os.path.isfile(f) or not os.access(f, os.R_OK):
            die(f"cannot read input {f}: no such readable file or directory")
    if not files:
        die(f"no input files found in {' '.join(paths)}")
    return files


def load_documents(inputs: list[str] | None, num_proc: int, cache_dir: str):
    """Return a datasets.Dataset with a "text" column. Local files are converted
    to arrow under cache_dir; the hub download uses the usual HF cache."""
    import datasets

    if not inputs:
        try:
            return datasets.load_dataset(HF_NAME, split="train", num_proc=num_proc)
        except Exception as e:
            die(f"cannot load the '{HF_NAME}' dataset ({type(e).__name__}: {e}); "
                "without network access pass a local copy with --input")
    saved = len(inputs) == 1 and os.path.isdir(inputs[0]) and any(
        os.path.exists(os.path.join(inputs[0], n))
        for n in ("dataset_dict.json", "state.json", "dataset_info.json"))
    if saved:
        try:
            ds = datasets.load_from_disk(inputs[0])
        except Exception as e:
            die(f"cannot load the saved dataset in {inputs[0]} ({type(e).__name__}: {e})")
        if isinstance(ds, datasets.DatasetDict):
            if "train" not in ds:
                die(f"{inputs[0]} holds splits {list(ds)}, but no 'train' split")
            ds = ds["train"]
    else:
        files = _data_files(inputs)
        exts = {os.path.splitext(f)[1].lower() for f in files}
        kinds = {BUILDERS.get(e) for e in exts}
        if None in kinds or len(kinds) != 1:
            die(f"input files must all be one of {', '.join(sorted(BUILDERS))}; got {', '.join(sorted(exts))}")
        kind = kinds.pop()
        extra = {"sample_by": "document"} if kind == "text" else {}
        try:
            ds = datasets.load_dataset(kind, data_files=files, split="train",
                                      cache_dir=cache_dir, **extra)
        except Exception as e:
            die(f"cannot load {kind} input files ({type(e).__name__}: {e})")
    if "text" not in ds.column_names:
        die(f"the input dataset has columns {ds.column_names}, but no 'text' column")
    if len(ds) < 2:
        die(f"the input holds {len(ds)} document(s); at least 2 are needed for a train/val split")
    return ds


def write_split(dset, filename: str) -> int:
    """Write the concatenated 'ids' of dset to filename (uint16) through a memmap."""
    arr_len = int(np.sum(dset["len"], dtype=np.uint64))
    tmp = filename + ".tmp"
    arr = np.memmap(tmp, dtype=np.uint16, mode="w+", shape=(max(arr_len, 1),))
    total_batches = max(1, min(1024, len(dset)))
    idx = 0
    for batch_idx in tqdm(range(total_batches), desc=f"writing {filename}"):
        batch = dset.shard(num_shards=total_batches, index=batch_idx, contiguous=True).with_format("numpy")
        if len(batch) == 0:
            continue
        arr_batch = np.concatenate(batch["ids"])
        arr[idx: idx + len(arr_batch)] = arr_batch
        idx += len(arr_batch)
    assert idx == arr_len, (idx, arr_len)
    arr.flush()
    del arr
    if arr_len == 0:
        os.truncate(tmp, 0)
    os.replace(tmp, filename)
    return arr_len


def prepare(inputs: list[str] | None = None, out_dir: str | None = None,
            bpe_path: str | None = None, num_proc: int = 8) -> dict[str, int]:
    try:
        import datasets
    except ImportError:
        die("the openwebtext prepare step needs the `datasets` package: pip install datasets")
    out_dir = out_dir or HERE
    os.makedirs(out_dir, exist_ok=True)
    try:
        enc = get_gpt2_encoding(bpe_path)
    except RuntimeError as e:
        die(str(e))

    # intermediate arrow files go to a scratch directory inside out_dir (never
    # into the input dataset's directory) and are removed at the end
    work = tempfile.mkdtemp(prefix=".prepare-", dir=out_dir)
    try:
        ds = load_documents(inputs, num_proc, os.path.join(work, "hf"))
        split_dataset = ds.train_test_split(
            test_size=0.0005, seed=2357, shuffle=True,
            train_indices_cache_file_name=os.path.join(work, "train-indices.arrow"),
            test_indices_cache_file_name=os.path.join(work, "val-indices.arrow"))
        split_dataset["val"] = split_dataset.pop("test")

        def process(example):
            ids = enc.encode_ordinary(example["text"])
            ids.append(enc.eot_token)  # documents are delimited by <|endoftext|>
            return {"ids": ids, "len": len(ids)}

        features = datasets.Features({"ids": datasets.Sequence(datasets.Value("uint16")),
                                      "len": datasets.Value("int64")})
        tokenized = split_dataset.map(
            process,
            remove_columns=split_dataset["train"].column_names,
            features=features,
            cache_file_names={s: os.path.join(work, f"{s}.arrow") for s in split_dataset},
            desc="tokenizing the splits",
            num_proc=num_proc if num_proc > 1 else None,
        )
        counts = {}
        for split, dset in tokenized.items():
            counts[split] = write_split(dset, os.path.join(out_dir, f"{split}.bin"))
            print(f"{split} has {counts[split]:,} tokens")
        del ds, split_dataset, tokenized
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--input", nargs="+", metavar="PATH",
                        help="a saved dataset directory, or text/json/parquet/csv/arrow files or directories")
    parser.add_argument("--out_dir", help="where to write the outputs (default: next to this script)")
    parser.add_argument("--bpe", help="local GPT-2 BPE ranks file (r50k_base.tiktoken)")
    parser.add_argument("--num_proc", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)),
                        help="worker processes for tokenization")
    args = parser.parse_args(argv)
    if args.num_proc < 1:
        parser.error("--num_proc must be at least 1")
    prepare(args.input, args.out_dir, args.bpe, args.num_proc)


if __name__ == "__main__":
    main()
