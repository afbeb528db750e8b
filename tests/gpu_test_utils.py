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
attention_reference(q, k, v, causal, scale), attention_reference_grads(q, k, v, dout, causal, scale)
                                float64 attention (o, lse) and its gradients, for the attention tests
rel_err(x, ref)                 the relative L2 error the attention tests compare with
row_err(x, ref)                 the worst (b, h, t) row's error, relative to the rms row norm of ref
gen(seed), randn(shape, g, dtype), qkv_split(B, H, T, D, dtype, g)
                                the attention tests' random inputs: a CUDA generator, normal values in
                                `dtype`, and nanoGPT's q, k, v as strided views of one fused projection
ATTENTION_FLOOR                 the dtype floors of the attention tests' relative L2 errors
capture(step)                   step() captured once in a CUDA graph: (graph, the captured call's outputs)
generator_state(), rng_pair(rng)
                                (seed, offset) of the default CUDA generator, and of an op's returned
                                (2,) int64 rng_state, as unsigned 64-bit integers (the dropout tests)
"""

import math
import os
import struct

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


def attention_reference(q, k, v, causal, scale):
    """float64 attention and lse (natural log) from the given tensors (any dtype, upcast)."""
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        T = q.shape[-2]
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v, lse


def attention_reference_grads(q, k, v, dout, causal, scale):
    """(o, lse, (dq, dk, dv)) of attention_reference in float64."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o, lse = attention_reference(q64, k64, v64, causal, scale)
    grads = torch.autograd.grad(o, (q64, k64, v64), dout.double())
    return o.detach(), lse, grads


def rel_err(x, ref):
    """||x - ref|| / ||ref|| (ref is float64; the denominator has a tiny floor for all-zero refs,
    e.g. dq of a causal T=1 attention, which is exactly 0)."""
    x = x.double()
    denom = max(ref.norm().item(), 1e-3 * math.sqrt(ref.numel()))
    return (x - ref).norm().item() / denom


def row_err(x, ref):
    """Worst (b, h, t) row: max_r ||x_r - ref_r|| / rms-row-norm of ref (ref float64; the same tiny floor
    as rel_err for all-zero refs)."""
    x = x.double()
    rows = ref.reshape(-1, ref.shape[-1])
    denom = max(rows.norm().item() / math.sqrt(rows.shape[0]), 1e-3 * math.sqrt(rows.shape[1]))
    return ((x - ref).reshape(-1, ref.shape[-1]).norm(dim=-1).max().item()) / denom


# floors of the attention tests' relative L2 errors (a correct kernel is ~ the output rounding, 1e-3 bf16 /
# 1.5e-4 fp16)
ATTENTION_FLOOR = {torch.bfloat16: 4e-3, torch.float16: 6e-4}


def gen(seed: int) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(seed)


def randn(shape, g, dtype, scale=1.0):
    """Normal values drawn in fp32 from generator g (times scale), then rounded to dtype."""
    return (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(dtype)


def qkv_split(B, H, T, D, dtype, g):
    """q, k, v exactly like nanoGPT: (B, H, T, D) views of a fused (B, T, 3, H, D) projection."""
    qkv = randn((B, T, 3, H, D), g, dtype)
    return qkv.permute(2, 0, 3, 1, 4).unbind(0)


def capture(step):
    """step() captured once in a CUDA graph after two warm-up calls on a side stream: (graph, the captured
    call's outputs; every graph.replay() writes its results into those tensors again)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()
    return graph, outputs


def generator_state() -> tuple[int, int]:
    """(seed, offset) of the current device's default CUDA generator (its 16-byte state)."""
    seed, offset = struct.unpack("<QQ", bytes(torch.cuda.get_rng_state().tolist()))
    return seed, offset


def rng_pair(rng: torch.Tensor) -> tuple[int, int]:
    """An op's (2,) int64 rng_state as the unsigned (seed, offset) it stands for."""
    s, o = (int(x) for x in rng.tolist())
    return s & (2**64 - 1), o & (2**64 - 1)
