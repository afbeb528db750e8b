# A tiny character-level GPT (0.8M parameters) that trains on a CPU in about a minute:
# about 40 ms per iteration on 2 cores, val loss near 2.1 after 1000 iterations.
# Samples look like shakespeare from a distance; the point is a quick end-to-end run.
#   python train.py config/train_shakespeare_char_cpu.py
#   python sample.py --out_dir=out-shakespeare-char-cpu --device=cpu

out_dir = 'out-shakespeare-char-cpu'
eval_interval = 250
eval_iters = 20
log_interval = 50
always_save_checkpoint = False
wandb_log = False

dataset = 'shakespeare_char'
gradient_accumulation_steps = 1
batch_size = 12
block_size = 64

n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0

learning_rate = 1e-3
max_iters = 1000
lr_decay_iters = 1000
min_lr = 1e-4
beta2 = 0.99
warmup_iters = 100

device = 'cpu'
compile = False
kernels = 'torch'
