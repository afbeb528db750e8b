"""
Tiny shakespeare, shared by data/shakespeare_char/prepare.py and
data/shakespeare/prepare.py: find (or download) the text, read it, and write
outputs atomically (temporary file, fsync, rename), so an interrupted run
never leaves a half-written file behind.
"""

import os
import sys
import urllib.request

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
    """Download tiny shakespeare to path unless it is already there."""
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


def load_text(input_path: str | None, download_dir: str) -> str:
    """The text of input_path; without one, of download_dir/input.txt (downloaded
    first if missing). One clear error and exit for a missing, unreadable or empty file."""
    if input_path is None:
        input_path = os.path.join(download_dir, "input.txt")
        download_input(input_path)
    data = read_text(input_path)
    if not data:
        sys.exit(f"error: input file {input_path} is empty")
    return data
