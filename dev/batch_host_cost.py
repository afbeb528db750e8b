"""
Host microseconds per get_batch call: train.py's batch loader against the previous one (a copy below),
and a check that both return bitwise the same batches for the same generator state.

    python dev/batch_host_cost.py                      # CPU, shapes 64x256 (shakespeare_char) and 16x1024
    python dev/batch_host_cost.py --device cuda        # with the pinned-memory copies to the GPU

train.py is run once (a tiny model, eval_only, one evaluation batch) through runpy on a random-token
dataset written to a temporary directory (or --data_dir), and its own get_batch is timed by changing its
batch_size / block_size globals. Calls of the old and the new function are interleaved in rounds; the
table shows the median round's microseconds per call (host time until the call returns: the copies to
the GPU are asynchronous in both, a synchronize after each round is not timed).
"""

import argparse
import contextlib
import io
import os
import runpy
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # train.py imports configurator, model, tk_kernels


def old_get_batch(g: dict, split: str, gen: torch.Generator):
    """train.py's get_batch before the one-gather rewrite (per-sample slices, two stacks, two copies)."""
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


def load_train_globals(data_dir: str, device: str) -> dict:
    """train.py's module globals after a tiny eval_only run."""
    argv = ['train.py', f'--device={device}', '--compile=False', f'--data_dir={data_dir}', '--eval_only=True',
            '--eval_iters=1', '--n_layer=1', '--n_head=1', '--n_embd=16', '--block_size=64', '--batch_size=2',
            '--dtype=float32', '--out_dir=' + os.path.join(data_dir, 'out')]
    saved = sys.argv
    sys.argv = argv
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            g = runpy.run_path(os.path.join(ROOT, 'train.py'), run_name='__main__')
    finally:
        sys.argv = saved
    return g['get_batch'].__globals__  # the functions' own globals (run_path returns a copy)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument('--device', default='cpu')
    p.add_argument('--shapes', default='64x256,16x1024', help='comma-separated BxT (default 64x256,16x1024)')
    p.add_argument('--calls', type=int, default=200, help='calls per round (default 200)')
    p.add_argument('--rounds', type=int, default=9, help='interleaved rounds (default 9)')
    p.add_argument('--data_dir', default=None, help='train.bin/val.bin of uint16 tokens (default: random)')
    args = p.parse_args(argv)
    tmp = None
    if args.data_dir is None:
        tmp = tempfile.TemporaryDirectory()
        rng = np.random.default_rng(0)
        for split, n in (('train', 1_000_000), ('val', 100_000)):
            rng.integers(0, 50257, n, dtype=np.uint16).tofile(os.path.join(tmp.name, f'{split}.bin'))
        args.data_dir = tmp.name
    g = load_train_globals(args.data_dir, args.device)
    sync = (lambda: torch.cuda.synchronize()) if g['device_type'] == 'cuda' else (lambda: None)
    print(f"get_batch host cost: torch {torch.__version__}, numpy {np.__version__}, device {g['device']}, "
          f"{args.rounds} rounds x {args.calls} calls, median round")
    print(f"{'B x T':<10}{'old us':>10}{'new us':>10}{'old/new':>10}  bitwise")
    for shape in args.shapes.split(','):
        B, T = map(int, shape.split('x'))
        g['batch_size'], g['block_size'] = B, T
        same = True
        for seed in range(20):
            a = old_get_batch(g, 'train', torch.Generator().manual_seed(seed))
            b = g['get_batch']('train', torch.Generator().manual_seed(seed))
            same &= all(u.dtype == v.dtype and u.shape == v.shape and v.is_contiguous() and torch.equal(u, v)
                        for u, v in zip(a, b))
        times = {'old': [], 'new': []}
        for _ in range(args.rounds):
            for name, fn in (('old', lambda gen: old_get_batch(g, 'train', gen)), ('new', lambda gen: g['get_batch']('train', gen))):
                gen = torch.Generator().manual_seed(1)
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn(gen)
                times[name].append((time.perf_counter() - t0) / args.calls * 1e6)
                sync()
        old, new = statistics.median(times['old']), statistics.median(times['new'])
        print(f"{shape:<10}{old:>10.1f}{new:>10.1f}{old / new:>9.2f}x  {'yes' if same else 'NO'}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == '__main__':
    sys.exit(main())
