# Finetune pretrained GPT-2 XL (1.5B parameters) on tiny shakespeare in GPT-2 BPE tokens.
# First: python data/shakespeare/prepare.py
#   python train.py config/finetune_shakespeare.py
import time

out_dir = 'out-shakespeare'
eval_interval = 5
eval_iters = 40
wandb_log = False
wandb_project = 'shakespeare'
wandb_run_name = 'ft-' + str(int(time.time()))

dataset = 'shakespeare'
init_from = 'gpt2-xl'
always_save_checkpoint = False  # write ckpt.pt only on a new best val loss

# each optimizer step sees 1 * 32 * 1024 = 32,768 tokens; the 301,966 train
# tokens are therefore about 9 steps, and 20 steps are a bit over two epochs
batch_size = 1
gradient_accumulation_steps = 32
max_iters = 20

learning_rate = 3e-5  # held constant: no warmup, no decay
decay_lr = False
