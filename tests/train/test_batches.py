"""train.py's data path against the code it replaced: get_batch (one gather, one pinned tensor, one copy)
returns bitwise the batches of the per-sample loader for the same generator state, and estimate_loss (the
losses kept on the device, one transfer per split) returns exactly the old means. train.py runs for real
(a tiny eval_only run through runpy in a subprocess); the old functions are copies of the previous code."""

import os
import subprocess
import sys

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(REPO, "train.py")

CHECK = r'''
import os, runpy, sys
import numpy as np
import torch

def old_get_batch(g, split, gen):  # train.py's get_batch before the one-gather rewrite
    block_size, batch_size, device, device_type = g['block_size'], g['batch_size'], g['device'], g['device_type']
    data = np.memmap(os.path.join(g['data_dir'], f'{split}.bin'), dtype=np.uint16, mode='r')
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=gen)
    x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y

@torch.no_grad()
def old_estimate_loss(g):  # train.py's estimate_loss before the losses stayed on the device
    out = {}
    g['eval_model'].eval()
    for split in ['train', 'val']:
        losses = torch.zeros(g['eval_iters'])
        for k in range(g['eval_iters']):
            X, Y = g['get_batch'](split, g['eval_gen'])
            g['new_graph_step']()
            with g['ctx']:
                logits, loss = g['eval_model'](X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    g['eval_model'].train()
    return out

sys.argv = sys.argv[1:]
g = runpy.run_path(sys.argv[0], run_name='__main__')['get_batch'].__globals__  # train.py's own globals
checked = 0
for B, T in ((g['batch_size'], g['block_size']), (3, 17), (1, 1)):
    g['batch_size'], g['block_size'] = B, T
    for split in ('train', 'val'):
        for seed in range(10):
            old = old_get_batch(g, split, torch.Generator().manual_seed(seed))
            new = g['get_batch'](split, torch.Generator().manual_seed(seed))
            for a, b in zip(old, new):
                assert b.dtype == torch.int64 and b.shape == (B, T) and b.is_contiguous(), (b.dtype, b.shape)
                assert b.device == a.device and torch.equal(a, b), (B, T, split, seed)
            checked += 1
# one process: the training batches are the old get_batch's from train_gen's state
g['batch_size'], g['block_size'] = 4, 32
g['train_gen'].manual_seed(7)
gen = torch.Generator().manual_seed(7)
for _ in range(5):
    new, old = g['get_train_batch'](), old_get_batch(g, 'train', gen)
    assert all(torch.equal(a, b) for a, b in zip(old, new))
    # batch_state (what a checkpoint stores) is train_gen's state before this batch: it draws it again
    g['train_gen'].set_state(g['batch_state'])
    assert all(torch.equal(a, b) for a, b in zip(g['get_train_batch'](), new))
# estimate_loss: the same floats as the old one from the same eval_gen state
state = g['eval_gen'].get_state()
new = g['estimate_loss']()
after = g['eval_gen'].get_state()
g['eval_gen'].set_state(state)
old = old_estimate_loss(g)
assert torch.equal(after, g['eval_gen'].get_state())
assert new == old and all(isinstance(v, float) for v in new.values()), (new, old)
print(f"CHECKED {checked} batches, eval losses {new}")
'''


def run_check(char_data, tmp_path, device, dtype):
    (tmp_path / "check.py").write_text(CHECK)
    args = dict(device=device, dtype=dtype, compile=False, dataset="shakespeare_char", data_dir=char_data,
                out_dir="out", n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=4, eval_iters=3,
                dropout=0.0, eval_only=True)
    env = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "check.py", TRAIN, *[f"--{k}={v}" for k, v in args.items()]],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "CHECKED 60 batches" in r.stdout, r.stdout[-2000:]


def test_batches_and_eval_losses_match_the_old_code_cpu(char_data, tmp_path):
    run_check(char_data, tmp_path, "cpu", "float32")


@pytest.mark.gpu
def test_batches_and_eval_losses_match_the_old_code_cuda(char_data, tmp_path):
    run_check(char_data, tmp_path, "cuda", "bfloat16" if torch.cuda.is_bf16_supported() else "float16")
