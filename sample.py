"""
Sample from a trained model.

$ python sample.py --out_dir=out-shakespeare-char
$ python sample.py --init_from=gpt2-xl --start="What is the answer to life?" --num_samples=3
$ python sample.py --out_dir=out-shakespeare-char --start=FILE:prompt.txt --top_k=50 --top_p=0.9
"""

import os
import pickle
import sys
import time
from contextlib import nullcontext

import torch

from configurator import configure_globals
from model import GPTConfig, GPT
from tk_kernels import dispatch

ROOT = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
init_from = 'resume'  # 'resume' (from an out_dir), a gpt2 variant (e.g. 'gpt2-xl') or a save_pretrained directory
out_dir = 'out'  # ignored if init_from is not 'resume'
start = "\n"  # or "<|endoftext|>" or etc. Can also specify a file, use as: "FILE:prompt.txt"
num_samples = 10  # number of samples to draw
max_new_tokens = 500  # number of tokens generated in each sample
temperature = 0.8  # 1.0 = no change, < 1.0 = less random, > 1.0 = more random, 0 = greedy
top_k = 200  # retain only the top_k most likely tokens (0 = all)
top_p = 1.0  # retain the smallest set of tokens whose probability reaches top_p (1.0 = all)
seed = 1337
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # examples: 'cpu', 'cuda', 'cuda:0', etc.
dtype = ('bfloat16' if torch.cuda.is_bf16_supported() else 'float16') if torch.cuda.is_available() \
    else 'float32'  # 'float32' or 'bfloat16' or 'float16'
compile = False  # use PyTorch 2.0 to compile the model's forward to be faster
kernels = 'torch'  # 'torch', 'tk' or 'auto': see tk_kernels/dispatch.py
use_kv_cache = True  # cache past keys/values while generating
bpe = ''  # local GPT-2 BPE ranks file (r50k_base.tiktoken), else $TIKTOKEN_GPT2_BPE or tiktoken's
# -----------------------------------------------------------------------------
config = configure_globals(globals(), sys.argv[1:])  # config files and --key=value overrides
# -----------------------------------------------------------------------------


def fail(msg: str, code: int = 1):
    print(f"error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


if kernels not in dispatch.KERNEL_MODES:
    fail(f"kernels must be one of {', '.join(dispatch.KERNEL_MODES)}; got {kernels!r}")
if dtype not in ('float32', 'bfloat16', 'float16'):
    fail(f"dtype must be 'float32', 'bfloat16' or 'float16'; got {dtype!r}")
if init_from != 'resume' and not init_from.startswith('gpt2') and not os.path.isdir(init_from):
    fail(f"init_from must be 'resume', a gpt2 model (gpt2, gpt2-medium, gpt2-large, gpt2-xl) or a "
         f"directory saved by save_pretrained; got {init_from!r}")
device_type = 'cuda' if 'cuda' in device else 'cpu'  # for later use in torch.autocast
if device_type == 'cuda' and not torch.cuda.is_available():
    fail(f"device={device!r} but no CUDA GPU is usable here; use --device=cpu")
if device_type == 'cpu' and dtype == 'float16':
    print("note: float16 autocast is not used on the CPU; sampling in float32")
    dtype = 'float32'

torch.manual_seed(seed)
torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if ptdtype == torch.float32 else \
    torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# model
checkpoint = None
if init_from == 'resume':
    # init from a model saved in a specific directory
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        fail(f"no checkpoint at {ckpt_path}: train one first (python train.py ...) and pass its "
             f"--out_dir, or sample from a pretrained model with --init_from=gpt2")
    try:
        checkpoint = torch.load(ckpt_path, map_location='cpu', weights_only=True)
        model_args = dict(checkpoint['model_args'])
        model_args['dropout'] = 0.0
        model = GPT(GPTConfig(**model_args, kernels=kernels))
        model.load_checkpoint_state(checkpoint['model'])
    except Exception as e:
        fail(f"cannot load checkpoint {ckpt_path}: it is corrupt or not a nanoGPT-TK checkpoint "
             f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
else:
    # init from a given GPT-2 model
    try:
        model = GPT.from_pretrained(init_from, dict(dropout=0.0, kernels=kernels))
    except Exception as e:
        fail(f"cannot load pretrained {init_from}: {type(e).__name__}: {e}")

model.eval()
model.to(device)
try:  # which implementation each op family runs, decided once; describe() says why
    print(model.plan_kernels(device, ptdtype, warn=False).describe())
except dispatch.TKUnsupportedError as e:
    fail(str(e))
if compile:
    model.forward = torch.compile(model.forward, dynamic=True)  # requires PyTorch 2.0 (optional)

# look for the meta pickle in case it is available in the dataset folder
meta_path = None
if checkpoint is not None and 'dataset' in checkpoint.get('config', {}):
    ckpt_config = checkpoint['config']
    data_dir = ckpt_config.get('data_dir') or os.path.join(ROOT, 'data', ckpt_config['dataset'])
    if os.path.exists(os.path.join(data_dir, 'meta.pkl')):
        meta_path = os.path.join(data_dir, 'meta.pkl')
checkpoint = None  # free up memory
if meta_path is not None:
    print(f"Loading meta from {meta_path}...")
    with open(meta_path, 'rb') as f:
        meta = pickle.load(f)
    stoi, itos = meta['stoi'], meta['itos']

    def encode(s):
        unknown = sorted(set(c for c in s if c not in stoi))
        if unknown:
            fail(f"the start text has characters that are not in the vocabulary of {meta_path}: "
                 f"{''.join(unknown)!r}")
        return [stoi[c] for c in s]

    def decode(ids):
        return ''.join([itos[i] for i in ids])
else:
    # ok let's assume gpt-2 encodings by default
    print("No meta.pkl found, assuming GPT-2 encodings...")
    sys.path.insert(0, os.path.join(ROOT, 'data'))
    from gpt2_bpe import get_gpt2_encoding
    try:
        enc = get_gpt2_encoding(bpe or None)
    except RuntimeError as e:
        fail(str(e))

    def encode(s):
        return enc.encode(s, allowed_special={"<|endoftext|>"})

    def decode(ids):
        return enc.decode(ids)

# encode the beginning of the prompt
if start.startswith('FILE:'):
    try:
        with open(start[5:], 'r', encoding='utf-8') as f:
            start = f.read()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read the start file {start[5:]}: {e}")
start_ids = encode(start)
if not start_ids:
    fail("the start text is empty: give at least one character/token with --start=...")
x = (torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...])

# run generation
t0 = time.time()
n_new = 0  # tokens generated
with torch.no_grad():
    with ctx:
        for k in range(num_samples):
            y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k or None,
                               top_p=top_p, use_kv_cache=use_kv_cache)
            n_new += y.size(1) - x.size(1)
            print(decode(y[0].tolist()))
            print('---------------', flush=True)
dt = time.time() - t0
print(f"generated {n_new} tokens in {dt:.2f}s: {n_new / max(dt, 1e-9):.1f} tokens/s")
