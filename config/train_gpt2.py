# Train GPT-2 (124M) on OpenWebText.
# First: python data/openwebtext/prepare.py
# On one 8-GPU node:
#   torchrun --standalone --nproc_per_node=8 train.py config/train_gpt2.py

wandb_log = True  # needs wandb; --wandb_log=False to turn it off
wandb_project = 'owt'
wandb_run_name = 'gpt2-124M'

dataset = 'openwebtext'

# tokens per optimizer step = batch_size * block_size * gradient_accumulation_steps
# = 12 * 1024 * 40 = 491,520 (about 0.5M). gradient_accumulation_steps counts the
# micro-steps of all processes together: train.py divides it by the world size,
# so with 8 GPUs each one runs 5 micro-steps per optimizer step.
batch_size = 12
block_size = 1024
gradient_accumulation_steps = 5 * 8

# GPT-2 small
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
bias = False

# 600,000 steps x 491,520 tokens = about 295B tokens
learning_rate = 6e-4
max_iters = 600000
lr_decay_iters = 600000
min_lr = 6e-5
warmup_iters = 2000
beta2 = 0.95
weight_decay = 1e-1

eval_interval = 1000
eval_iters = 200
log_interval = 10
