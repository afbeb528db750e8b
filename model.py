"""
The GPT language model, nanoGPT style, in one file.

References:
1) the official GPT-2 TensorFlow implementation released by OpenAI:
   https://github.com/openai/gpt-2/blob/master/src/model.py
2) huggingface/transformers' PyTorch GPT-2 implementation

Attention goes through tk_kernels.dispatch, which runs our CUDA kernel or
PyTorch's SDPA according to config.kernels ("torch", "tk" or "auto") and the
model's kernel plan (GPT.plan_kernels; see tk_kernels/dispatch.py), and so does
the loss (lm_head + cross-entropy, our fused chunked kernel: with targets under
kernels=tk/auto, forward returns None for the logits). When the plan runs our
LayerNorm kernel, each residual add is fused into the LayerNorm that follows it,
together with the residual dropout before it and the bias of the c_proj whose
output is added (Block.forward_fused: the kernel's backward then gives that bias's
gradient from the column sums it keeps anyway); else the blocks are nanoGPT's
(Block.forward). The MLP
goes through the dispatch too (dispatch.mlp): our Hopper GEMM with the GELU in its
epilogues while training, PyTorch's in eval and on other GPUs (dispatch.FAMILIES says why),
and so do the attention's projections c_attn and c_proj (dispatch.linear: the same GEMM
under the same choice; otherwise the nn.Linear layers themselves).
"""

import json
import math
import os
import socket
import urllib.parse
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

import tk_kernels
from tk_kernels import dispatch


class LayerNorm(nn.Module):
    """LayerNorm with an optional bias (PyTorch's has no bias=False before 2.1)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class KVCache:
    """Keys and values of the tokens seen so far, per layer, for generate().
    Preallocated to max_len positions; `pos` counts the filled ones."""

    def __init__(self, n_layer: int, max_len: int):
        self.max_len = max_len
        self.k: list[torch.Tensor | None] = [None] * n_layer
        self.v: list[torch.Tensor | None] = [None] * n_layer
        self.pos = 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append k, v (B, H, T, D) at self.pos; return all cached keys and values."""
        if self.k[layer] is None:
            B, H, _, D = k.shape
            self.k[layer] = k.new_empty(B, H, self.max_len, D)
            self.v[layer] = v.new_empty(B, H, self.max_len, D)
        end = self.pos + k.size(2)
        assert end <= self.max_len, "KV cache overflow"
        self.k[layer][:, :, self.pos:end] = k
        self.v[layer][:, :, self.pos:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]


class CausalSelfAttention(nn.Module):

    def __init__(self, config, layer: int = 0):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.layer = layer

    def forward(self, x, plan: dispatch.Plan, cache: KVCache | None = None, resid_dropout: bool = True,
                proj_bias: bool = True):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        H = self.n_head
        dropout_p = self.dropout if self.training else 0.0
        # c_attn's bias gradient from the TK attention's backward where it sums it on the way (no pass over qkv's
        # gradient for it): the projection adds the bias but leaves its gradient to the attention
        qkv_bias = self.c_attn.bias if cache is None and dispatch.attention_sums_qkv_bias(
            plan, self.training, dropout_p) else None
        # (B, T, 3C): q, k, v of all heads side by side (while training on the TK MLP's GEMM: dispatch.linear)
        qkv = dispatch.linear(plan, self.c_attn, x, training=self.training, bias_grad=qkv_bias is None)
        if cache is None:
            # the attention takes the fused projection: q, k, v are its (B, H, T, D) views (no copies), and
            # on the TK path the backward writes their gradients straight into one (B, T, 3C) tensor
            y = dispatch.attention_qkv(plan, qkv, H, causal=True, dropout_p=dropout_p, qkv_bias=qkv_bias)
        else:
            q, k, v = dispatch.qkv_views(qkv, H)  # (B, H, T, D) views, only the last dim contiguous
            if cache.pos == 0:  # prefill: the whole prompt, causal
                k, v = cache.update(self.layer, k, v)
                y = dispatch.attention(plan, q, k, v, causal=True, dropout_p=dropout_p)
            else:  # decode one new token against all cached ones: nothing to mask
                assert T == 1, "the KV cache decodes one token at a time"
                k, v = cache.update(self.layer, k, v)
                # q is 1 long and k, v are pos+1 long: the TK kernel needs equal
                # lengths, so decode steps use PyTorch's SDPA in every kernels mode.
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=False)
        y = y.transpose(1, 2).reshape(B, T, C)  # re-assemble all head outputs side by side
        y = dispatch.linear(plan, self.c_proj, y, training=self.training, bias=proj_bias)
        # resid_dropout=False / proj_bias=False: the caller applies the dropout / adds c_proj's bias itself
        # (Block.forward_fused: in the LayerNorm kernel)
        return self.resid_dropout(y) if resid_dropout else y


class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, plan: dispatch.Plan, dropout: bool = True, proj_bias: bool = True):
        # c_proj(gelu(c_fc(x))) (exact GELU): nanoGPT's module under kernels=torch (reference.mlp), our
        # GEMM with the GELU fused in where the plan chose it
        x = dispatch.mlp(plan, x, self.c_fc.weight, self.c_fc.bias, self.c_proj.weight,
                         self.c_proj.bias if proj_bias else None, training=self.training,
                         copies=(dispatch.weight_copy(self.c_fc), dispatch.weight_copy(self.c_proj)))
        # dropout=False / proj_bias=False: the caller applies the dropout / adds c_proj's bias itself
        # (Block.forward_fused: in the next LayerNorm kernel)
        return self.dropout(x) if dropout else x


class Block(nn.Module):

    def __init__(self, config, layer: int = 0):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config, layer)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, plan: dispatch.Plan, cache: KVCache | None = None):
        x = x + self.attn(self.ln_1(x), plan, cache)
        x = x + self.mlp(self.ln_2(x), plan)
        return x

    def forward_fused(self, x, delta, delta_bias, plan: dispatch.Plan, cache: KVCache | None = None):
        """The same block with each residual add fused into the LayerNorm after it: the residual
        stream is x + dropout(delta + delta_bias), where delta (None for the first block) is the
        previous block's MLP output before its c_proj bias, delta_bias that bias (None without
        biases), neither dropped out nor added yet. Returns (x, delta, delta_bias) of the same kind
        for the next block. The residual dropout (resid_dropout, the MLP's dropout) runs inside the
        fused add (dropout_p while training), not as separate nn.Dropout calls; so do the c_proj
        biases, whose gradients the LayerNorm kernel's backward sums with its own (no separate
        column-sum pass over each c_proj's output gradient)."""
        p = self.attn.dropout if self.training else 0.0
        x, h = dispatch.add_layer_norm(plan, x, delta, self.ln_1.weight, self.ln_1.bias, dropout_p=p,
                                       delta_bias=delta_bias)
        y = self.attn(h, plan, cache, resid_dropout=False, proj_bias=False)
        x, h = dispatch.add_layer_norm(plan, x, y, self.ln_2.weight, self.ln_2.bias, dropout_p=p,
                                       delta_bias=self.attn.c_proj.bias)
        return x, self.mlp(h, plan, dropout=False, proj_bias=False), self.mlp.c_proj.bias


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304  # GPT-2 vocab_size of 50257, padded up to nearest multiple of 64 for efficiency
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster
    kernels: str = "torch"  # "torch", "tk" or "auto": see tk_kernels/dispatch.py


# Peak dense bf16 tensor-core throughput (FLOP/s) for MFU, matched against
# torch.cuda.get_device_name() substrings, first match wins.
PEAK_BF16_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H200", 989e12),
    ("H100", 989e12),
    ("A100", 312e12),
    ("RTX 4090", 165e12),  # dense bf16 with fp32 accumulate
)

_mfu_warned = False


def hf_cache_only(repo_id: str, timeout: float = 3.0) -> bool:
    """Whether the weights of repo_id must come from the Hugging Face cache alone.
    Without network, transformers retries for about half a minute before it gives up;
    this finds out in a moment, and raises RuntimeError when neither the hub nor the
    cache can provide them."""
    from huggingface_hub import constants, try_to_load_from_cache
    cached = isinstance(try_to_load_from_cache(repo_id, 'config.json'), str)
    if constants.HF_HUB_OFFLINE:
        if cached:
            return True
        reason = "HF_HUB_OFFLINE is set and they are not in the Hugging Face cache"
    elif any(os.environ.get(v) for v in ('HTTPS_PROXY', 'https_proxy', 'ALL_PROXY', 'all_proxy')):
        return False  # behind a proxy a direct connection says nothing: let transformers try
    else:
        url = urllib.parse.urlparse(constants.ENDPOINT)
        port = url.port or (443 if url.scheme == 'https' else 80)
        try:
            socket.create_connection((url.hostname, port), timeout=timeout).close()
            return False
        except OSError as e:
            if cached:
                print(f"the Hugging Face hub is unreachable ({e}): using the cached {repo_id}")
                return True
            reason = f"the Hugging Face hub ({constants.ENDPOINT}) is unreachable ({e}) " \
                     "and they are not in its cache"
    raise RuntimeError(f"cannot get the {repo_id} weights: {reason}. Download them once on a "
                       "machine with network (they go to the Hugging Face cache; set "
                       "HF_HUB_OFFLINE=1 to use that cache without network retries), or pass a "
                       "directory written by GPT2LMHeadModel.save_pretrained as init_from=PATH")


def peak_flops(device_name: str) -> float | None:
    """Peak bf16 FLOP/s of the GPU called device_name, or None if unknown."""
    name = device_name.upper()
    for key, flops in PEAK_BF16_FLOPS:
        if key.upper() in name:
            return flops
    return None


class GPT(nn.Module):

    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        dispatch.check_mode(config.kernels)
        self.config = config
        self.kernel_plan: dispatch.Plan | None = None  # set by plan_kernels()

        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config, i) for i in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying: the token embedding is the output projection
        # https://paperswithcode.com/method/weight-tying
        self.transformer.wte.weight = self.lm_head.weight

        # init all weights
        self.apply(self._init_weights)
        # scaled init of the residual projections, per GPT-2 paper
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

        # report number of parameters
        print("number of parameters: %.2fM" % (self.get_num_params() / 1e6,))

    def get_num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters. With non_embedding (default) the position
        embeddings are not counted; the token embeddings are, because they are
        tied to (and used as) the final layer's weights."""
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def plan_kernels(self, device=None, dtype: torch.dtype | None = None,
                     dropout_p: float | None = None, warn: bool = True) -> dispatch.Plan:
        """Decide once which implementation each op family runs (tk_kernels/dispatch.py), for
        inputs on `device` (default: the weights' device) computed in `dtype` (default: the
        autocast dtype if autocast is on, else the weights' dtype), training with attention
        dropout dropout_p (default: config.dropout in train mode, else 0). Runs the GPU checks
        (may build the extension); kernels=tk raises TKUnsupportedError if the TK kernel cannot
        run. forward() calls it when there is no plan for its inputs' device and dtype yet; call
        it before torch.compile (as train.py does), so that the compiled forward has one graph
        from the first call (else the first compile breaks the graph here, later ones don't)."""
        device = dispatch.normalize_device(device if device is not None else self.lm_head.weight.device)
        if dtype is None:
            dtype = self._compute_dtype(device)
        if dropout_p is None:
            dropout_p = self.config.dropout if self.training else 0.0
        self.kernel_plan = dispatch.plan(self.config.kernels, device, dtype,
                                         self.config.n_embd // self.config.n_head, dropout_p, warn,
                                         n_embd=self.config.n_embd, vocab_size=self.config.vocab_size)
        return self.kernel_plan

    def _compute_dtype(self, device: torch.device) -> torch.dtype:
        if torch.is_autocast_enabled(device.type):
            return torch.get_autocast_dtype(device.type)
        return self.lm_head.weight.dtype

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, cache: KVCache | None = None):
        device = idx.device
        b, t = idx.size()
        start = cache.pos if cache is not None else 0
        assert start + t <= self.config.block_size, \
            f"Cannot forward sequence of length {start + t}, block size is only {self.config.block_size}"
        pos = torch.arange(start, start + t, dtype=torch.long, device=device)  # shape (t)
        plan = self.kernel_plan
        if plan is None or not plan.matches(device, self._compute_dtype(device)):
            # made outside torch.compile's graph: a graph break in the first compiled call only
            plan_kernels = torch.compiler.disable(self.plan_kernels) if torch.compiler.is_compiling() \
                else self.plan_kernels
            plan = plan_kernels(device)

        tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        if plan.path("layer_norm") == "torch":
            for block in self.transformer.h:
                x = block(x, plan, cache)
            x = self.transformer.ln_f(x)
        else:  # our LayerNorm kernel, each residual add fused into the LayerNorm after it
            delta = delta_bias = None
            for block in self.transformer.h:
                x, delta, delta_bias = block.forward_fused(x, delta, delta_bias, plan, cache)
            ln_f = self.transformer.ln_f
            p = self.config.dropout if self.training else 0.0  # the last MLP's dropout
            x = dispatch.add_layer_norm(plan, x, delta, ln_f.weight, ln_f.bias, dropout_p=p, delta_bias=delta_bias)[1]
        if cache is not None:
            cache.pos += t

        if targets is not None and self.config.kernels == "torch":
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        elif targets is not None:
            # kernels=tk/auto: the loss without keeping the (b, t, vocab) logits (not returned)
            logits = None
            loss = dispatch.linear_cross_entropy(plan, x, self.lm_head.weight, targets, ignore_index=-1,
                                                 copy=dispatch.weight_copy(self.lm_head))
        else:
            # inference-time mini-optimization: only forward the lm_head on the very last position
            logits = self.lm_head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
            loss = None
        return logits, loss

    def keep_weight16(self, optimizer: torch.optim.Optimizer) -> int:
        """Keep a 16-bit copy of each weight matrix our GEMMs read (buffer `weight16` of the blocks' four
        projections and of lm_head, whose weight wte shares), refreshed by every optimizer.step(), so that no
        forward casts a weight (autocast casts each one on every forward: every micro-step of a gradient
        accumulation, and 49 casts of 0.34 ms a GPT-2 124M step on an H100). tk_kernels.AdamW writes the copies in
        its update kernel (2 bytes a parameter more); any other optimizer gets a step hook that casts them.
        Only for the families the plan (plan_kernels first) runs on our kernels while training, in a 16-bit
        compute dtype with fp32 weights; returns the number of copies (0: none needed). Afterwards change the
        weights only through optimizer.step(): eager forwards notice other in-place changes (version counters)
        and recast, compiled ones read the copies as they are. Call it with the model on its final device and
        dtype (model.to() replaces buffers, and the optimizer would go on writing the old ones), before
        torch.compile and DDP."""
        plan = self.kernel_plan
        if plan is None:
            raise RuntimeError("keep_weight16 needs the kernel plan: call plan_kernels() first")
        if plan.dtype not in (torch.bfloat16, torch.float16):
            return 0
        layers = []
        if plan.choices["mlp"].train_tk:
            for block in self.transformer.h:
                layers += [block.attn.c_attn, block.attn.c_proj, block.mlp.c_fc, block.mlp.c_proj]
        if plan.choices["classifier"].tk:
            layers.append(self.lm_head)
        layers = [m for m in layers if m.weight.dtype == torch.float32]
        for m in layers:
            m.register_buffer("weight16", m.weight.detach().to(plan.dtype), persistent=False)
            m.weight16_version = m.weight._version
        if not layers:
            return 0
        if isinstance(optimizer, tk_kernels.AdamW):
            optimizer.keep_copies({m.weight: m.weight16 for m in layers})
        else:
            optimizer.register_step_post_hook(lambda *_: [dispatch.refresh_weight_copy(m) for m in layers])
        return len(layers)

    def load_checkpoint_state(self, state_dict: dict):
        """Load weights saved by train.py. A torch.compile'd model saves its keys with an
        `_orig_mod.` prefix; it is dropped here."""
        prefix = '_orig_mod.'
        self.load_state_dict({k.removeprefix(prefix): v for k, v in state_dict.items()})

    def crop_block_size(self, block_size: int):
        """Shrink the block size, e.g. to use a pretrained GPT-2 (1024) with a smaller context."""
        assert block_size <= self.config.block_size
        self.config.block_size = block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size])

    @classmethod
    def from_pretrained(cls, model_type: str, override_args: dict | None = None,
                        local_dir: str | None = None):
        """A GPT with the weights of an HF transformers GPT2LMHeadModel: one of
        gpt2, gpt2-medium, gpt2-large, gpt2-xl (from the HF hub or its cache),
        or a directory saved with save_pretrained (local_dir, or model_type
        itself being a directory)."""
        override_args = override_args or {}
        # only dropout (and the kernels path) can be overridden, see more notes below
        assert all(k in ('dropout', 'kernels') for k in override_args), \
            f"from_pretrained can only override dropout and kernels, got {sorted(override_args)}"
        if local_dir is None and os.path.isdir(model_type):
            local_dir = model_type
        try:
            from transformers import GPT2LMHeadModel
        except ImportError as e:
            raise RuntimeError("from_pretrained needs the transformers package "
                               "(pip install transformers)") from e

        if local_dir is not None:
            config_path = os.path.join(local_dir, "config.json")
            try:
                with open(config_path) as f:
                    hf = json.load(f)
            except (OSError, ValueError) as e:
                raise RuntimeError(f"cannot read the HF GPT-2 config {config_path}: {e}") from e
            if hf.get("n_inner") not in (None, 4 * hf["n_embd"]):
                raise RuntimeError(f"{config_path}: n_inner={hf['n_inner']} is not 4*n_embd")
            config_args = dict(n_layer=hf["n_layer"], n_head=hf["n_head"], n_embd=hf["n_embd"],
                               block_size=hf["n_positions"], vocab_size=hf["vocab_size"])
            source = local_dir
            local_files_only = True
        else:
            assert model_type in {'gpt2', 'gpt2-medium', 'gpt2-large', 'gpt2-xl'}, \
                f"unknown model_type {model_type!r} (gpt2, gpt2-medium, gpt2-large, gpt2-xl or a directory)"
            # n_layer, n_head and n_embd are determined from model_type
            config_args = {
                'gpt2':        dict(n_layer=12, n_head=12, n_embd=768),   # 124M params
                'gpt2-medium': dict(n_layer=24, n_head=16, n_embd=1024),  # 350M params
                'gpt2-large':  dict(n_layer=36, n_head=20, n_embd=1280),  # 774M params
                'gpt2-xl':     dict(n_layer=48, n_head=25, n_embd=1600),  # 1558M params
            }[model_type]
            config_args['vocab_size'] = 50257  # always 50257 for GPT model checkpoints
            config_args['block_size'] = 1024   # always 1024 for GPT model checkpoints
            source = model_type
            local_files_only = hf_cache_only(model_type)
        print(f"loading weights from pretrained gpt: {source}")
        config_args['bias'] = True  # always True for GPT model checkpoints
        config_args.update(override_args)
        model = GPT(GPTConfig(**config_args))
        sd = model.state_dict()
        sd_keys = [k for k in sd if not k.endswith('.attn.bias')]  # discard this mask / buffer

        model_hf = GPT2LMHeadModel.from_pretrained(source, local_files_only=local_files_only)
        sd_hf = model_hf.state_dict()
        # copy while ensuring all of the parameters are aligned and match in names and shapes
        sd_keys_hf = [k for k in sd_hf if not k.endswith(('.attn.masked_bias', '.attn.bias'))]
        # OpenAI checkpoints use a "Conv1D" module; we use a vanilla Linear, so transpose these
        transposed = ['attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight']
        missing = set(sd_keys) - set(sd_keys_hf)
        extra = set(sd_keys_hf) - set(sd_keys)
        if missing or extra:
            raise RuntimeError(f"HF GPT-2 state dict mismatch: missing {sorted(missing)[:5]}, "
                               f"unexpected {sorted(extra)[:5]}")
        with torch.no_grad():
            for k in sd_keys_hf:
                src = sd_hf[k].t() if k.endswith(tuple(transposed)) else sd_hf[k]
                assert src.shape == sd[k].shape, f"shape mismatch for {k}: {src.shape} vs {sd[k].shape}"
                sd[k].copy_(src)
        return model

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        """AdamW with weight decay on 2D+ parameters (matmul weights, embeddings)
        and none on biases and LayerNorm gains: under kernels=tk/auto on a GPU tk_kernels.AdamW
        (one pass over all parameters, gradient clipping folded in: see dispatch.clip_grad_norm_),
        else torch's, fused on CUDA when available."""
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {'params': decay_params, 'weight_decay': weight_decay},
            {'params': nodecay_params, 'weight_decay': 0.0},
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        num_nodecay_params = sum(p.numel() for p in nodecay_params)
        print(f"num decayed parameter tensors: {len(decay_params)}, with {num_decay_params:,} parameters")
        print(f"num non-decayed parameter tensors: {len(nodecay_params)}, with {num_nodecay_params:,} parameters")
        optimizer = dispatch.adamw(self.config.kernels, optim_groups, learning_rate, betas)
        if isinstance(optimizer, tk_kernels.AdamW):
            print("using tk_kernels.AdamW (gradient clipping inside its step)")
        else:
            print(f"using fused AdamW: {bool(optimizer.defaults.get('fused'))}")
        return optimizer

    def estimate_mfu(self, fwdbwd_per_iter, dt, device=None) -> float | None:
        """Model FLOPs utilization: achieved FLOP/s over the GPU's peak bf16 FLOP/s
        (PEAK_BF16_FLOPS), as a fraction. None on CPU, for an unknown GPU, or if
        the result is impossible (> 1, i.e. the peak table is wrong for this GPU)."""
        global _mfu_warned
        if device is None:
            device = self.lm_head.weight.device
        device = torch.device(device)
        if device.type != 'cuda' or dt <= 0:
            return None
        name = torch.cuda.get_device_name(device)
        peak = peak_flops(name)
        if peak is None:
            return None
        # first estimate the number of flops we do per iteration.
        # see PaLM paper Appendix B as ref: https://arxiv.org/abs/2204.02311
        N = self.get_num_params()
        cfg = self.config
        L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
        flops_per_token = 6 * N + 12 * L * H * Q * T
        flops_per_fwdbwd = flops_per_token * T
        flops_per_iter = flops_per_fwdbwd * fwdbwd_per_iter
        mfu = (flops_per_iter / dt) / peak
        if mfu > 1.0:
            if not _mfu_warned:
                _mfu_warned = True
                warnings.warn(f"MFU estimate {mfu:.2f} > 100% on {name}: its peak "
                              f"{peak / 1e12:.0f} TFLOP/s must be wrong; reporting MFU as n/a")
            return None
        return mfu

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
                 use_kv_cache=True):
        """Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and
        complete it max_new_tokens times, feeding the predictions back in.
        temperature 0 is greedy decoding; top_k keeps the k most likely tokens;
        top_p keeps the smallest set whose probability reaches top_p.
        With use_kv_cache, keys/values of past tokens are cached while the
        sequence fits the block size; beyond it the context window slides, every
        position changes, and each step recomputes the last block_size tokens.
        Call model.eval() first (dropout)."""
        block_size = self.config.block_size
        cache = None
        for _ in range(max_new_tokens):
            if use_kv_cache and idx.size(1) <= block_size:
                if cache is None:
                    cache = KVCache(self.config.n_layer, block_size)
                    logits, _ = self(idx, cache=cache)  # prefill with the whole prompt
                else:
                    logits, _ = self(idx[:, -1:], cache=cache)
            else:
                # if the sequence context is growing too long we must crop it at block_size
                idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                logits, _ = self(idx_cond)
            idx_next = sample_next(logits[:, -1, :], temperature, top_k, top_p)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def sample_next(logits, temperature=1.0, top_k=None, top_p=None):
    """Pick the next token (b, 1) from last-position logits (b, vocab)."""
    if temperature == 0.0:
        return torch.argmax(logits, dim=-1, keepdim=True)
    logits = logits.float() / temperature
    if top_k is not None and top_k > 0:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], -float('Inf'))
    if top_p is not None and top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=True)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # drop a token when the tokens ranked above it already reach top_p (keep at least one)
        drop_sorted = (cum - torch.softmax(sorted_logits, dim=-1)) >= top_p
        drop_sorted[:, 0] = False
        drop = drop_sorted.scatter(1, sorted_idx, drop_sorted)
        logits = logits.masked_fill(drop, -float('Inf'))
    probs = F.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1)
