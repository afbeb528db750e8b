"""Helpers shared by the GPU test modules (tests/conftest.py puts this directory on sys.path).

new_seed()                      a fresh seed from os.urandom for each test's random inputs (printed
                                by the tests, so that a failure can be reproduced)
poison(*(shape, dtype))         leaves NaN-filled (0xFF) blocks of exactly these sizes in PyTorch's
                                caching allocator: an op that then requests the same sizes in the same
                                order gets them back, so any element its kernels fail to write stays NaN
                                (tests/attention/test_attention_gpu.py, test_poison_trick_works)
poison_free_memory(blocks, max_block_bytes)
                                fills up to `blocks` blocks of free GPU memory with NaN and frees them:
                                for ops whose allocations are too many to list
"""

import math
import os

import torch


def new_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def poison(*shapes_dtypes):
    blocks = []
    for shape, dtype in shapes_dtypes:
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if nbytes:
            blocks.append(torch.full((nbytes,), 255, dtype=torch.uint8, device="cuda"))
    del blocks


def poison_free_memory(blocks: int, max_block_bytes: int):
    block_bytes = min(torch.cuda.mem_get_info()[0] // 8, max_block_bytes)
    held = []
    try:
        for _ in range(blocks):
            held.append(torch.full((block_bytes // 2,), float("nan"), dtype=torch.float16, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    del held
