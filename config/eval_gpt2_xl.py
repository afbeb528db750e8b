# Loss of the pretrained gpt2-xl (1.5B parameters) on OpenWebText, train and val, then exit.
# First: python data/openwebtext/prepare.py
#   python train.py config/eval_gpt2_xl.py
dataset = 'openwebtext'
init_from = 'gpt2-xl'
eval_only = True
batch_size = 8
eval_iters = 500  # 500 batches of 8 x 1024 tokens per split, for a stable estimate
wandb_log = False
