"""Fixtures of the train.py / sample.py tests."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def char_data(tmp_path_factory, shakespeare_path):
    """tiny shakespeare, char-level, prepared by the real prepare script into a temp dir (read only:
    the tests write their checkpoints elsewhere)."""
    out = tmp_path_factory.mktemp("shakespeare_char")
    r = subprocess.run([sys.executable, os.path.join(REPO, "data", "shakespeare_char", "prepare.py"),
                        "--input", shakespeare_path, "--out_dir", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(out)
