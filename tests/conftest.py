"""Shared pytest setup: the repo root on sys.path, the `gpu` marker, and fixtures
for the shared data that lives beside the repository in ../shared/data/."""

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data")
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))  # gpu_test_utils.py, host_code.py: shared helpers
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
        for item in gpu_items:
            item.add_marker(skip)


def _shared_file(*parts: str) -> str:
    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.isfile(path):
        pytest.skip(f"shared data file {path} is absent (expected at <repo>/../shared/data/)")
    return path


@pytest.fixture(scope="session")
def repo_root() -> str:
    """Absolute path of the repository root."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shakespeare_path() -> str:
    """Path of tiny shakespeare: $SHAKESPEARE_INPUT if set (a GPU machine without ../shared), else
    ../shared/data/shakespeare/input.txt; skips if absent."""
    given = os.environ.get("SHAKESPEARE_INPUT")
    if given:
        if not os.path.isfile(given):
            pytest.fail(f"SHAKESPEARE_INPUT={given} is not a file")
        return os.path.abspath(given)
    return _shared_file("shakespeare", "input.txt")


@pytest.fixture(scope="session")
def char_data(tmp_path_factory, shakespeare_path) -> str:
    """tiny shakespeare, char-level, prepared by the real prepare script into a temp dir (read only:
    the tests write their checkpoints elsewhere)."""
    import subprocess
    out = tmp_path_factory.mktemp("shakespeare_char")
    r = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "data", "shakespeare_char", "prepare.py"),
                        "--input", shakespeare_path, "--out_dir", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return str(out)


@pytest.fixture(scope="session")
def bpe_path() -> str:
    """Path of GPT-2's BPE ranks (../shared/data/gpt2/r50k_base.tiktoken); skips if absent."""
    return _shared_file("gpt2", "r50k_base.tiktoken")


@pytest.fixture
def fresh_dispatch():
    """tk_kernels.dispatch's once-per-process state (plans, one-time warnings, support verdicts) reset before
    and after a test, so that each one sees its own stand-ins and warnings. Use with
    pytest.mark.usefixtures("fresh_dispatch") (tests/attention/test_dispatch.py has its own, which also
    resets torch._dynamo)."""
    from tk_kernels import dispatch
    dispatch.reset()
    yield
    dispatch.reset()


@pytest.fixture(scope="module")
def one_torch_thread():
    """Run a module's tests on one torch thread: tiny ops run fastest that way and don't
    stall on a busy 2-core CI machine. Use with pytest.mark.usefixtures("one_torch_thread")."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
