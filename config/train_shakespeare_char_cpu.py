# A tiny character-level GPT that trains on a laptop CPU in about a minute
# (measured on 2 cores). Samples are shakespeare-shaped gibberish, but the loss falls.
#   python train.py config/train_shakespeare_char_cpu.py
#   python sample.py --out_dir=out-shakespeare-char-cpu --device=cpu

out_dir = 'out-shakespeare-char-cpu'
eval_interval = 100
eval_iters = 20
log_interval = 10
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
max_iters = 500
lr_decay_iters = 500
min_lr = 1e-4
beta2 = 0.99
warmup_iters = 50

device = 'cpu'
compile = False
kernels = 'torch'
