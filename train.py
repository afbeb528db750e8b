"""
This training script can be run both on a single GPU (or CPU) in debug mode,
and also in a larger training run with distributed data parallel (DDP).

To run on a single GPU (or the CPU), example:
$ python train.py --batch_size=32 --compile=False
$ python train.py config/train_shakespeare_char.py --device=cpu --compile=False

To run with DDP on 4 gpus on 1 node, example:
$ torchrun --standalone --nproc_per_node=4 train.py

To run with DDP on 4 gpus across 2 nodes, example:
- Run on the first (master) node with example IP 123.456.123.456:
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=0 --master_addr=123.456.123.456 --master_port=1234 train.py
- Run on the worker node:
$ torchrun --nproc_per_node=8 --nnodes=2 --node_rank=1 --master_addr=123.456.123.456 --master_port=1234 train.py
(If your cluster does not have Infiniband interconnect prepend NCCL_IB_DISABLE=1)

On CPUs, DDP uses the gloo backend:
$ torchrun --standalone --nproc_per_node=2 train.py config/train_shakespeare_char_cpu.py

Resuming (init_from='resume') continues exactly like the uninterrupted run: the
checkpoint holds the model, optimizer, grad scaler and every process's RNG
states, including the generator that picks the training batches.

The training batches do not depend on the number of processes: with the same
seed and gradient_accumulation_steps (a count over all processes), iteration i
averages the gradients of the same samples on 1, 2, 4 or 8 processes, and a
checkpoint resumed on another number of processes continues the same batches
(with a warning: the dropout masks differ).
"""

import gc
import json
import math
import os
import pickle
import random
import subprocess
import sys
import time
from collections import deque
from contextlib import nullcontext

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
import torch.distributed as dist

from configurator import configure_globals
from model import GPTConfig, GPT
from tk_kernels import dispatch

ROOT = os.path.dirname(os.path.abspath(__file__))

# -----------------------------------------------------------------------------
# default config values designed to train a gpt2 (124M) on OpenWebText
# I/O
out_dir = 'out'
eval_interval = 2000
log_interval = 1
eval_iters = 200
eval_only = False  # if True, script exits right after the first eval
always_save_checkpoint = True  # if True, always save a checkpoint after each eval
init_from = 'scratch'  # 'scratch', 'resume', 'gpt2*' or a directory saved by HF save_pretrained
overwrite = False  # if True, a fresh run may replace an existing out_dir/ckpt.pt
log_file = ''  # if set, append JSON lines {"iter", "loss", ...} to this file (see plot_log.py)
# wandb logging
wandb_log = False  # disabled by default
wandb_project = 'owt'
wandb_run_name = 'gpt2'  # 'run' + str(time.time())
# data
dataset = 'openwebtext'
data_dir = ''  # '' means data/<dataset>
gradient_accumulation_steps = 5 * 8  # used to simulate larger batch sizes
batch_size = 12  # if gradient_accumulation_steps > 1, this is the micro-batch size
block_size = 1024
# model
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0  # for pretraining 0 is good, for finetuning try 0.1+
bias = False  # do we use bias inside LayerNorm and Linear layers?
kernels = 'torch'  # 'torch', 'tk' or 'auto': see tk_kernels/dispatch.py
# adamw optimizer
learning_rate = 6e-4  # max learning rate
max_iters = 600000  # total number of training iterations
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0  # clip gradients at this value, or disable if == 0.0
# learning rate decay settings
decay_lr = True  # whether to decay the learning rate
warmup_iters = 2000  # how many steps to warm up for
lr_decay_iters = 600000  # should be ~= max_iters per Chinchilla
min_lr = 6e-5  # minimum learning rate, should be ~= learning_rate/10 per Chinchilla
# DDP settings
backend = ''  # '' picks 'nccl' on cuda and 'gloo' on cpu
# system
device = 'cuda' if torch.cuda.is_available() else 'cpu'  # 'cpu', 'cuda', 'cuda:0', 'mps', ...
dtype = ('bfloat16' if torch.cuda.is_bf16_supported() else 'float16') if torch.cuda.is_available() \
    else 'float32'  # 'float32', 'bfloat16', or 'float16' (the latter with a GradScaler)
compile = True  # use PyTorch 2.0 to compile the model to be faster
# torch.compile mode: 'default'; 'reduce-overhead' replays the compiled forward and backward as CUDA
# graphs (far fewer kernel launches: pays for small, launch-bound models such as shakespeare_char);
# 'max-autotune' also tunes the GEMMs (long compile)
compile_mode = 'default'
seed = 1337
# -----------------------------------------------------------------------------
given = set()  # the keys that config files or overrides set
config = configure_globals(globals(), sys.argv[1:], given=given)  # config files and --key=value overrides
# -----------------------------------------------------------------------------


def fail(msg: str, code: int = 1):
    """One clear error message and a non-zero exit."""
    print(f"error: {msg}", file=sys.stderr, flush=True)
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    sys.exit(code)


def fmt_time(s: float) -> str:
    """A duration for people: 42s, 3m20s, 29h10m."""
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    return f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s // 60 % 60:02d}m"


pretrained = init_from.startswith('gpt2') or os.path.isdir(init_from)
if init_from not in ('scratch', 'resume') and not pretrained:
    fail(f"init_from must be 'scratch', 'resume', a gpt2 model (gpt2, gpt2-medium, "
         f"gpt2-large, gpt2-xl) or a directory saved by save_pretrained; got {init_from!r}")
if kernels not in dispatch.KERNEL_MODES:
    fail(f"kernels must be one of {', '.join(dispatch.KERNEL_MODES)}; got {kernels!r}")
if compile_mode not in ('default', 'reduce-overhead', 'max-autotune'):
    fail(f"compile_mode must be 'default', 'reduce-overhead' or 'max-autotune'; got {compile_mode!r}")
if dtype not in ('float32', 'bfloat16', 'float16'):
    fail(f"dtype must be 'float32', 'bfloat16' or 'float16'; got {dtype!r}")

if 'cuda' in device and not torch.cuda.is_available():
    fail(f"device={device!r} but no CUDA GPU is usable here; use --device=cpu")
if kernels == 'tk' and 'cuda' not in device:
    fail(f"kernels=tk needs a CUDA GPU but device={device!r}; "
         "use kernels=auto (falls back to PyTorch) or kernels=torch")

# various inits, derived attributes, I/O setup
ddp = int(os.environ.get('RANK', -1)) != -1  # is this a ddp run?
if ddp:
    ddp_rank = int(os.environ['RANK'])
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    if device.startswith('cuda'):
        device = f'cuda:{ddp_local_rank}'
        torch.cuda.set_device(device)
    init_process_group_backend = backend or ('nccl' if device.startswith('cuda') else 'gloo')
    dist.init_process_group(backend=init_process_group_backend)
    master_process = ddp_rank == 0  # this process will do logging, checkpointing etc.
    seed_offset = ddp_rank  # each process gets a different seed
    # world_size number of processes will be training simultaneously, so we can scale
    # down the desired gradient accumulation iterations per process proportionally
    if gradient_accumulation_steps % ddp_world_size != 0:
        fail(f"gradient_accumulation_steps={gradient_accumulation_steps} is not divisible "
             f"by the number of processes ({ddp_world_size})")
    gradient_accumulation_steps //= ddp_world_size
else:
    # if not ddp, we are running on a single gpu, and one process
    ddp_rank = 0
    master_process = True
    seed_offset = 0
    ddp_world_size = 1


def agree(value):
    """The master's value, on every process (a collective under DDP)."""
    if ddp:
        box = [value]
        dist.broadcast_object_list(box, src=0)
        value = box[0]
    return value


device_type = 'cuda' if 'cuda' in device else 'cpu'  # for later use in torch.autocast
if dtype == 'float16' and device_type == 'cpu':
    if master_process:
        print("note: float16 autocast is not used on the CPU; training in float32")
    dtype = 'float32'
if dtype == 'bfloat16' and device_type == 'cuda' and not torch.cuda.is_bf16_supported():
    fail("dtype=bfloat16 is not supported by this GPU; use --dtype=float16")

if master_process and device_type == 'cpu' and 'device' not in given:
    print("no CUDA GPU found: training on the CPU")

# refuse to replace a checkpoint, and start wandb, before any work is done
ckpt_path = os.path.join(out_dir, 'ckpt.pt')
start_error = None
if master_process and init_from != 'resume' and not eval_only and not overwrite \
        and os.path.exists(ckpt_path):
    start_error = (f"{os.path.abspath(ckpt_path)} already holds a checkpoint and this fresh run "
                   f"(init_from={init_from}) would replace it: continue it with --init_from=resume, "
                   f"train into a new --out_dir, or replace it with --overwrite=True")
if master_process and wandb_log and start_error is None:
    try:
        import wandb
        wandb.init(project=wandb_project, name=wandb_run_name, config=config)
    except ImportError:
        start_error = ("wandb_log=True but the wandb package is not installed (pip install wandb), "
                       "or run with --wandb_log=False")
    except Exception as e:  # no login (UsageError), no network, ...
        first = str(e).splitlines()[0] if str(e) else ''
        start_error = (f"wandb_log=True but wandb could not start ({type(e).__name__}: {first}). "
                       "Log in once with `wandb login`, or log offline with WANDB_MODE=offline "
                       "(upload later with `wandb sync`), or run with --wandb_log=False")
start_error = agree(start_error)
if start_error:
    fail(start_error)

torch.manual_seed(seed + seed_offset)
np.random.seed(seed + seed_offset)
random.seed(seed + seed_offset)
torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = nullcontext() if ptdtype == torch.float32 else \
    torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# -----------------------------------------------------------------------------
# data: train.bin / val.bin of uint16 token ids, made by data/<dataset>/prepare.py
data_dir = data_dir or os.path.join(ROOT, 'data', dataset)
prepare_script = os.path.join(ROOT, 'data', dataset, 'prepare.py')
if not all(os.path.exists(os.path.join(data_dir, f'{s}.bin')) for s in ('train', 'val')):
    prepare_cmd = f"python {os.path.relpath(prepare_script)}" + \
        (f" --out_dir {data_dir}" if data_dir != os.path.dirname(prepare_script) else "")
    ok = True
    if dataset in ('shakespeare_char', 'shakespeare') and os.path.exists(prepare_script):
        if master_process:
            print(f"{data_dir}/train.bin not found: running {prepare_cmd}", flush=True)
            r = subprocess.run([sys.executable, prepare_script, '--out_dir', data_dir])
            ok = r.returncode == 0
        ok = agree(ok)  # the other processes wait for the master's verdict
        if not ok:
            fail(f"preparing {dataset} failed (see above). Without network access run it "
                 f"with a local copy of tiny shakespeare: {prepare_cmd} --input PATH/TO/input.txt "
                 f"(options: python {os.path.relpath(prepare_script)} --help)")
    elif dataset == 'openwebtext' and os.path.exists(prepare_script):
        fail(f"{data_dir}/train.bin not found. Prepare OpenWebText first (a large download "
             f"and a long tokenization): {prepare_cmd}")
    else:
        fail(f"dataset {dataset!r} not found: no {data_dir}/train.bin and no "
             f"data/{dataset}/prepare.py")
for split in ('train', 'val'):
    n_tokens = os.path.getsize(os.path.join(data_dir, f'{split}.bin')) // 2
    if n_tokens <= block_size:
        fail(f"{data_dir}/{split}.bin holds {n_tokens} tokens, too few for block_size={block_size}")

# Batches are drawn from dedicated generators. The training batches are a pure function of the seed and
# the global micro-step, whatever the number of processes: every process holds the same train_gen, and at
# each of its micro-steps draws the indices of all processes' batches (ddp_world_size draws of batch_size:
# the draws the one-process run makes at its micro-steps m*N .. m*N+N-1) and loads only its own. So each
# iteration's gradient averages the same samples on any number of processes that divides
# gradient_accumulation_steps. Rank r loads draw N-1-r: the master's last micro-batch, whose loss is
# logged, is the one-process run's last micro-batch. Evaluation runs on the master, from eval_gen.
train_gen = torch.Generator().manual_seed(seed)
eval_gen = torch.Generator().manual_seed(seed + seed_offset + 10_000)
batch_state = train_gen.get_state()  # train_gen state before drawing the next batch


def load_batch(data: np.ndarray, ix: torch.Tensor):
    """x, y for the windows of block_size + 1 tokens starting at ix: one gather into one (pinned on CUDA)
    int64 tensor holding x and y, one (asynchronous) copy to the device; x and y are its two halves."""
    windows = np.lib.stride_tricks.as_strided(data, (len(data) - block_size, block_size + 1),
                                              (data.strides[0], data.strides[0]), writeable=False)
    tokens = windows[ix.numpy()]  # (batch_size, block_size + 1) uint16
    xy = torch.empty((2, len(ix), block_size), dtype=torch.int64, pin_memory=device_type == 'cuda')
    xy_np = xy.numpy()
    xy_np[0] = tokens[:, :-1]
    xy_np[1] = tokens[:, 1:]
    # pinned host memory: the copy runs asynchronously, overlapping the forward already queued on the GPU
    xy = xy.to(device, non_blocking=True) if device_type == 'cuda' else xy.to(device)
    return xy[0], xy[1]


def get_batch(split, gen):
    # We recreate np.memmap every batch to avoid a memory leak, as per
    # https://stackoverflow.com/questions/45132940/numpy-memmap-memory-usage-want-to-iterate-once/61472122#61472122
    data = np.memmap(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16, mode='r')
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=gen)
    return load_batch(data, ix)


def get_train_batch():
    """This process's next training micro-batch (see train_gen above)."""
    global batch_state
    batch_state = train_gen.get_state()
    data = np.memmap(os.path.join(data_dir, 'train.bin'), dtype=np.uint16, mode='r')
    for draw in range(ddp_world_size):
        ix_draw = torch.randint(len(data) - block_size, (batch_size,), generator=train_gen)
        if draw == ddp_world_size - 1 - ddp_rank:
            ix = ix_draw
    return load_batch(data, ix)


# init these up here, can override if init_from='resume' (i.e. from a checkpoint)
iter_num = 0
best_val_loss = 1e9

# attempt to derive vocab_size from the dataset
meta_path = os.path.join(data_dir, 'meta.pkl')
meta_vocab_size = None
if os.path.exists(meta_path):
    with open(meta_path, 'rb') as f:
        meta = pickle.load(f)
    meta_vocab_size = meta['vocab_size']
    if master_process:
        print(f"found vocab_size = {meta_vocab_size} (inside {meta_path})")

# -----------------------------------------------------------------------------
# model init
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size,
                  bias=bias, vocab_size=None, dropout=dropout)  # start with model_args from command line
checkpoint = None
if init_from == 'scratch':
    # init a new model from scratch
    if master_process:
        print("Initializing a new model from scratch")
    # determine the vocab size we'll use for from-scratch training
    if meta_vocab_size is None and master_process:
        print("defaulting to vocab_size of GPT-2 to 50304 (50257 rounded up for efficiency)")
    model_args['vocab_size'] = meta_vocab_size if meta_vocab_size is not None else 50304
    if n_embd % n_head != 0:
        fail(f"n_embd={n_embd} is not divisible by n_head={n_head}")
    model = GPT(GPTConfig(**model_args, kernels=kernels))
elif init_from == 'resume':
    if master_process:
        print(f"Resuming training from {out_dir}")
    if not os.path.exists(ckpt_path):
        fail(f"init_from=resume but there is no checkpoint at {ckpt_path}")
    try:
        checkpoint = torch.load(ckpt_path, map_location='cpu', weights_only=True)
    except Exception as e:
        fail(f"cannot load checkpoint {ckpt_path}: it is corrupt or not a nanoGPT-TK "
             f"checkpoint ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    needed = ('model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss')
    if not isinstance(checkpoint, dict) or any(k not in checkpoint for k in needed):
        have = sorted(checkpoint) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        fail(f"{ckpt_path} is not a nanoGPT-TK training checkpoint: it needs the keys "
             f"{', '.join(needed)}; it has {have}")
    checkpoint_model_args = checkpoint['model_args']
    # force these config attributes to be equal otherwise we can't even resume training
    # the rest of the attributes (e.g. dropout) can stay as desired from command line
    try:
        for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
            model_args[k] = checkpoint_model_args[k]
        model = GPT(GPTConfig(**model_args, kernels=kernels))
        model.load_checkpoint_state(checkpoint['model'])
    except Exception as e:
        fail(f"checkpoint {ckpt_path} does not fit this model ({type(e).__name__}: "
             f"{str(e).splitlines()[0] if str(e) else ''})")
    iter_num = int(checkpoint['iter_num'])
    best_val_loss = float(checkpoint['best_val_loss'])
elif pretrained:
    if master_process:
        print(f"Initializing from OpenAI GPT-2 weights: {init_from}")
    # initialize from OpenAI GPT-2 weights
    override_args = dict(dropout=dropout, kernels=kernels)
    try:
        model = GPT.from_pretrained(init_from, override_args)
    except Exception as e:
        fail(f"cannot load pretrained {init_from}: {type(e).__name__}: {e}")
    # read off the created config params, so we can store them into checkpoint correctly
    for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
        model_args[k] = getattr(model.config, k)
# a resumed or pretrained model keeps its shape: say which given settings it overrules
if init_from != 'scratch':
    overruled = [f"{k}: {globals()[k]} -> {model_args[k]}"
                 for k in ('n_layer', 'n_head', 'n_embd', 'bias', 'block_size')
                 if k in given and globals()[k] != model_args[k]
                 and not (k == 'block_size' and block_size < model_args[k])]
    if overruled and master_process:
        print(f"warning: the {'checkpoint' if init_from == 'resume' else 'pretrained model'}'s "
              f"shape wins over the given settings ({', '.join(overruled)})")
    block_size = min(block_size, model.config.block_size)
# crop down the model block size if desired, using model surgery
if block_size < model.config.block_size:
    model.crop_block_size(block_size)
    model_args['block_size'] = block_size  # so that the checkpoint will have the right value
model.to(device)
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
if master_process:
    print(f"tokens per iteration will be: {tokens_per_iter:,}")
    if device_type == 'cpu' and (compile or model.get_num_params() > 2e6):
        print(f"note: this config is sized for a GPU (compile={compile}, "
              f"{model.get_num_params() / 1e6:.1f}M parameters) and will be slow on the CPU; "
              f"for a quick CPU run use config/train_shakespeare_char_cpu.py")

# which implementation each op family runs, decided once (kernels=tk must be able to run);
# describe() states the reasons, so no fallback warning follows
try:
    plan = model.plan_kernels(device, ptdtype, dropout_p=0.0 if eval_only else model.config.dropout,
                              warn=False)
except dispatch.TKUnsupportedError as e:
    fail(str(e))
if master_process:
    print(plan.describe())

# initialize a GradScaler. If enabled=False scaler is a no-op
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == 'float16'))

# optimizer
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if checkpoint is not None:
    try:
        optimizer.load_state_dict(checkpoint['optimizer'])
        if checkpoint.get('scaler'):
            scaler.load_state_dict(checkpoint['scaler'])
    except Exception as e:
        fail(f"the optimizer state in {ckpt_path} does not fit this model/optimizer "
             f"({type(e).__name__}: {e})")
    if block_size < checkpoint['model_args']['block_size']:  # cropped: crop the Adam moments too
        wpe_state = optimizer.state[model.transformer.wpe.weight]
        for k in ('exp_avg', 'exp_avg_sq'):
            wpe_state[k] = wpe_state[k][:block_size]

# 16-bit copies of the weights our GEMMs read (kernels=tk/auto under autocast), refreshed by every optimizer
# step: the forward casts no weight, micro steps included (GPT.keep_weight16)
n_copies = model.keep_weight16(optimizer)
if n_copies and master_process:
    print(f"keeping {plan.dtype} copies of {n_copies} weight matrices, written by each optimizer step")

# compile the model
raw_model = model  # the plain module: its state_dict is what we save
cuda_graphs = compile and compile_mode == 'reduce-overhead' and device_type == 'cuda'
if compile:
    if sys.flags.dont_write_bytecode and master_process:  # seen on a GPU machine: 16 s of imports instead of 5
        print("note: Python's bytecode cache is off (PYTHONDONTWRITEBYTECODE is set), so torch.compile's "
              "modules are compiled from source at every start; unset it for a faster start", flush=True)
    # reduce-overhead is CUDA graphs: on other devices (a CPU run of a GPU config) the default mode
    mode = 'max-autotune' if compile_mode == 'max-autotune' else 'reduce-overhead' if cuda_graphs else None
    model = torch.compile(model, mode=mode)


def new_graph_step():
    """Under CUDA graphs, the outputs of the previous replay are no longer needed: let the next
    replay reuse their memory (torch.compiler.cudagraph_mark_step_begin)."""
    if cuda_graphs:
        torch.compiler.cudagraph_mark_step_begin()

# Under CUDA graphs the compiled backward's gradients live in the graphs' memory, which the next micro
# step's replay reuses; a parameter whose .grad is None keeps that tensor itself, so with gradient
# accumulation the second micro step would add to overwritten memory (torch raises "accessing tensor
# output of CUDAGraphs that has been overwritten"). Stable zeroed .grad buffers, made here outside the
# graphs and zeroed in place each step, take the gradients instead.
keep_grads = cuda_graphs and gradient_accumulation_steps > 1
if keep_grads:
    for p in raw_model.parameters():
        if p.requires_grad:
            p.grad = torch.zeros_like(p)

# wrap model into DDP container
if ddp:
    # the model's only buffers are the weight copies (keep_weight16), equal on every rank after each step:
    # nothing to broadcast
    model = DDP(model, device_ids=[ddp_local_rank] if device_type == 'cuda' else None, broadcast_buffers=False)
eval_model = model.module if ddp else model  # evaluation runs on the master only, outside DDP

# -----------------------------------------------------------------------------
# RNG states, as tensors and plain Python values so that the checkpoint loads
# with torch.load(weights_only=True)


def rng_state() -> dict:
    np_state = np.random.get_state()
    py_state = random.getstate()
    state = {
        'torch': torch.get_rng_state(),
        'train_batches': batch_state,
        'eval_batches': eval_gen.get_state(),
        'numpy_keys': torch.from_numpy(np_state[1].astype(np.int64)),
        'numpy_pos': int(np_state[2]),
        'numpy_has_gauss': int(np_state[3]),
        'numpy_cached_gaussian': float(np_state[4]),
        'python_version': py_state[0],
        'python_state': torch.tensor(py_state[1], dtype=torch.int64),
        'python_gauss_next': py_state[2],
    }
    if device_type == 'cuda':
        state['cuda'] = torch.cuda.get_rng_state(device)
    return state


def set_batch_state(state: dict):
    global batch_state
    batch_state = state['train_batches']
    train_gen.set_state(batch_state)
    eval_gen.set_state(state['eval_batches'])


def set_rng_state(state: dict):
    """This process's own RNGs (the batch generators: set_batch_state)."""
    torch.set_rng_state(state['torch'])
    if device_type == 'cuda' and 'cuda' in state:
        torch.cuda.set_rng_state(state['cuda'], device)
    np.random.set_state(('MT19937', state['numpy_keys'].numpy().astype(np.uint32), state['numpy_pos'],
                         state['numpy_has_gauss'], state['numpy_cached_gaussian']))
    random.setstate((state['python_version'], tuple(state['python_state'].tolist()),
                     state['python_gauss_next']))


def all_rng_states() -> list[dict] | None:
    """Every process's RNG state (a list indexed by rank) on the master, None elsewhere."""
    state = rng_state()
    if not ddp:
        return [state]
    states = [None] * ddp_world_size if master_process else None
    dist.gather_object(state, states, dst=0)
    return states


def save_checkpoint(checkpoint: dict, path: str):
    """Write atomically: a temporary file in the same directory, fsync, rename.
    A crash mid-write leaves the previous checkpoint untouched."""
    tmp = path + '.tmp'
    try:
        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)  # out_dir appears with its first file
        with open(tmp, 'wb') as f:
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        try:  # make the rename itself durable
            dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        fail(f"cannot write checkpoint {path} ({e}); the previous checkpoint is unchanged")


resume_iter = None
if checkpoint is not None:
    states = checkpoint.get('rng')
    if states:
        # the batch generators do not depend on the number of processes: the master's state holds
        # train_gen (the same on every process) and the master's eval_gen, so the batches continue in the
        # original order on any number of processes
        set_batch_state(states[0])
        # this iteration's eval ran before the checkpoint was written: don't repeat it,
        # so that the run continues exactly like the uninterrupted one
        resume_iter = iter_num
        if len(states) == ddp_world_size:
            set_rng_state(states[ddp_rank])
        elif master_process:  # the per-process torch / numpy / Python RNGs (dropout) start afresh
            print(f"warning: the checkpoint's RNG states are for {len(states)} process(es), this run has "
                  f"{ddp_world_size}; the batches continue in the original order, but dropout and the other "
                  f"random draws will differ from the original run")
    elif master_process:
        print("warning: the checkpoint holds no RNG states; the data order will differ from the original run")
    checkpoint = None  # free up memory


# helps estimate an arbitrarily accurate loss over either split using many batches
@torch.no_grad()
def estimate_loss():
    print(f"evaluating: {eval_iters} batches x 2 splits" +
          (" (compiling first)" if compile and eval_time is None else ""), flush=True)
    out = {}
    eval_model.eval()
    for split in ['train', 'val']:
        # the losses stay on the device, so that the host can queue the next batches without waiting
        # for the GPU; each is copied away at once (under CUDA graphs the next replay overwrites it)
        losses = torch.zeros(eval_iters, device=device)
        for k in range(eval_iters):
            X, Y = get_batch(split, eval_gen)
            new_graph_step()
            with ctx:
                logits, loss = eval_model(X, Y)
            losses[k] = loss
        out[split] = losses.cpu().mean().item()  # one transfer; the mean of the float32 losses on the host
    eval_model.train()
    return out


# learning rate decay scheduler (cosine with warmup)
def get_lr(it):
    # 1) linear warmup for warmup_iters steps
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > lr_decay_iters:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
    return min_lr + coeff * (learning_rate - min_lr)


def log_json(record: dict):
    if log_file and master_process:
        with open(log_file, 'a') as f:
            f.write(json.dumps(record) + '\n')


def time_left(next_iter: int) -> float:
    """Seconds until the end of the run from iteration next_iter on: the iterations left at
    the mean time of the recent steps, plus the evaluations left."""
    step = sum(step_times) / len(step_times)
    evals = max_iters // eval_interval - (next_iter - 1) // eval_interval
    # an eval not timed yet: each of its batches costs about a third of a micro-step
    per_eval = eval_time if eval_time is not None else \
        2 * eval_iters * step / (3 * gradient_accumulation_steps)
    return (max_iters - next_iter + 1) * step + evals * per_eval


# training loop
X, Y = get_train_batch()  # fetch the very first batch
t_start = t0 = time.time()
local_iter_num = 0  # number of iterations in the lifetime of this process
running_mfu = -1.0
step_times = deque(maxlen=100)  # seconds of the recent steps (evals and the first step not counted)
# the log line's time: the mean iteration since the previous log line, its sync included (evals left out); a
# single iteration's host time says little when the host runs ahead of the GPU (CUDA graphs: 4.2 ms logged for
# a 6.3 ms step, so twice the MFU of bench/bench_train.py, session 8)
log_t0, log_iter0 = t_start, iter_num - 1
eval_time = None  # seconds the last evaluation took
saved_iter = None  # the iteration of the checkpoint this run wrote last
while True:

    # determine and set the learning rate for this iteration
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate the loss on train/val sets and write checkpoints
    if (iter_num % eval_interval == 0 and iter_num != resume_iter) or eval_only:
        t_eval = time.time()
        losses = estimate_loss() if master_process else None
        states = all_rng_states()  # collective under DDP: every process takes part
        eval_time = time.time() - t_eval
        if master_process:
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f} "
                  f"(eval {eval_time:.1f}s)", flush=True)
            log_json({'iter': iter_num, 'train_loss': losses['train'], 'val_loss': losses['val']})
            if wandb_log:
                wandb.log({
                    "iter": iter_num,
                    "train/loss": losses['train'],
                    "val/loss": losses['val'],
                    "lr": lr,
                    "mfu": max(running_mfu, 0.0) * 100,  # convert to percentage
                })
            if (losses['val'] < best_val_loss or always_save_checkpoint) and not eval_only:
                best_val_loss = min(best_val_loss, losses['val'])
                if iter_num > 0:
                    checkpoint = {
                        'model': raw_model.state_dict(),
                        'optimizer': optimizer.state_dict(),
                        'scaler': scaler.state_dict(),
                        'model_args': model_args,
                        'iter_num': iter_num,
                        'best_val_loss': best_val_loss,
                        'config': config,
                        'rng': states,
                        'world_size': ddp_world_size,
                    }
                    print(f"saving checkpoint to {out_dir}", flush=True)
                    save_checkpoint(checkpoint, ckpt_path)
                    checkpoint = None
                    saved_iter = iter_num
        t0 += time.time() - t_eval  # a step's time leaves the evaluation and checkpoint out
        log_t0 += time.time() - t_eval
    if eval_only or max_iters == 0:  # max_iters=0: at most the first evaluation, no training
        break
    if compile and local_iter_num == 0 and master_process:
        print("compiling the model for training: the first step may take a minute...", flush=True)

    # forward backward update, with optional gradient accumulation to simulate larger batch size
    # and using the GradScaler if data type is float16
    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            # in DDP training we only need to sync gradients at the last micro step.
            # the official way to do this is with model.no_sync() context manager, but
            # I really dislike that this bloats the code and forces us to repeat code
            # looking at the source of that context manager, it just toggles this variable
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        new_graph_step()
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps  # scale the loss to account for gradient accumulation
        # immediately async prefetch next batch while model is doing the forward pass on the GPU
        X, Y = get_train_batch()
        # backward pass, with gradient scaling if training in fp16
        scaler.scale(loss).backward()
    # clip the gradient
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        dispatch.clip_grad_norm_(optimizer, model.parameters(), grad_clip)  # tk_kernels.AdamW: in its step
    # step the optimizer and scaler if training in fp16
    scaler.step(optimizer)
    scaler.update()
    # flush the gradients as soon as we can, no need for this memory anymore
    optimizer.zero_grad(set_to_none=not keep_grads)

    # timing and logging
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    if local_iter_num > 0:  # the first step may compile and warm up: not a typical one
        step_times.append(dt)
    elif compile and master_process:
        print(f"first training step (with compilation) took {dt:.1f}s", flush=True)
    if local_iter_num == 3 and master_process:  # the first steps timed: how long will it take?
        left = time_left(iter_num + 1)
        print(f"estimated run time {fmt_time(t1 - t_start + left)}, {fmt_time(left)} left: "
              f"{max_iters - iter_num} iterations at {sum(step_times) / 3:.3f}s, plus evals",
              flush=True)
    if iter_num % log_interval == 0 and master_process:
        # get loss as float. note: this is a CPU-GPU sync point
        # scale up to undo the division above, approximating the true total loss (exact would have been a sum)
        lossf = loss.item() * gradient_accumulation_steps
        t_log = time.time()
        dt_log = (t_log - log_t0) / max(iter_num - log_iter0, 1)
        log_t0, log_iter0 = t_log, iter_num
        if local_iter_num >= 5:  # let the training loop settle a bit
            mfu = raw_model.estimate_mfu(batch_size * gradient_accumulation_steps, dt_log)
            if mfu is not None:
                running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
        mfu_str = f"{running_mfu * 100:.2f}%" if running_mfu >= 0 else "n/a"
        eta = fmt_time(time_left(iter_num + 1)) if step_times else "n/a"
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt_log * 1000:.2f}ms, "
              f"tok/s {tokens_per_iter / dt_log:.0f}, mfu {mfu_str}, "
              f"elapsed {fmt_time(t1 - t_start)}, eta {eta}", flush=True)
        log_json({'iter': iter_num, 'loss': lossf, 'lr': lr, 'time_ms': dt_log * 1000,
                  'tok_per_s': tokens_per_iter / dt_log})
    iter_num += 1
    local_iter_num += 1

    # termination conditions
    if iter_num > max_iters:
        break

if master_process and best_val_loss < 1e9:
    print(f"best val loss {best_val_loss:.4f}")
if master_process and not eval_only:
    if saved_iter is not None:
        print(f"checkpoint (iter {saved_iter}): {os.path.abspath(ckpt_path)}")
    else:
        print("no checkpoint written by this run" +
              (f"; the one in {os.path.abspath(ckpt_path)} is unchanged" if os.path.exists(ckpt_path) else ""))
if wandb_log and master_process:
    wandb.finish()
if ddp:
    # A clean exit under DDP. Every backward() stashes a Python object (a contextvars
    # context) in its thread-local state, and each gradient all-reduce that DDP issues from
    # inside the backward captures that state. gloo's worker threads release finished work
    # on their own time and, with no shutdown() for gloo, keep running after
    # destroy_process_group(). When the last release came after the interpreter had begun
    # finalizing, the worker's attempt to take the GIL for that object ended the thread with
    # a forced unwind through a noexcept destructor: std::terminate, SIGABRT, and torchrun
    # failed a finished run (about 1 run in 3 on a 2-core machine). So, while Python is alive:
    dist.barrier()  # no process starts exiting while another still has collectives in flight
    del model  # DDP's reducer holds the last buckets' work; drop it here, not in finalization
    gc.collect()
    dist.destroy_process_group()
