# Character-level GPT on tiny shakespeare: 6 layers, 6 heads, 384 dims (10.7M parameters).
# About a minute on one H100/H200 (launch to exit, evals included); best val loss should end near 1.47.
#   python train.py config/train_shakespeare_char.py
# (train.py runs data/shakespeare_char/prepare.py first if its output is missing)

out_dir = 'out-shakespeare-char'
eval_interval = 250  # the dataset is small and the model overfits: check val often
eval_iters = 200
log_interval = 10
always_save_checkpoint = False  # write ckpt.pt only on a new best val loss

wandb_log = False  # --wandb_log=True to log the run
wandb_project = 'shakespeare-char'
wandb_run_name = 'mini-gpt'

# A model this small is limited by kernel launches, not by the GPU's math (H200: ~5 ms of GPU work in an 11-15 ms
# step without graphs): replay the compiled step and the evaluation as CUDA graphs. --compile_mode=default for
# plain torch.compile; graphs are used on CUDA devices only.
compile_mode = 'reduce-overhead'

dataset = 'shakespeare_char'
gradient_accumulation_steps = 1
batch_size = 64
block_size = 256  # characters of context

n_layer = 6
n_head = 6
n_embd = 384
dropout = 0.2

learning_rate = 1e-3  # a model this small tolerates a high learning rate
max_iters = 5000
lr_decay_iters = 5000  # cosine decay over the whole run
min_lr = 1e-4  # a tenth of the peak
beta2 = 0.99  # few tokens per step, so average the second moment over longer
warmup_iters = 100
