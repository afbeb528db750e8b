"""model.py on the CPU: KV-cache generation, sampling filters, HF GPT-2 loading,
the MFU table, block-size cropping and the optimizer setup."""

import math
import warnings

import pytest
import torch

import model as model_module
from model import GPT, GPTConfig, KVCache, peak_flops, sample_next


# tiny ops run fastest on one thread (and don't stall on a busy 2-core CI machine)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_gpt(block_size=16, vocab_size=50, n_layer=2, n_head=2, n_embd=32, seed=None, **kw):
    if seed is not None:
        torch.manual_seed(seed)
    return GPT(GPTConfig(block_size=block_size, vocab_size=vocab_size, n_layer=n_layer,
                         n_head=n_head, n_embd=n_embd, **kw))


def spiky(model):
    """Larger random weights than GPT's init, so that greedy decoding of an
    untrained model does not collapse onto one repeated token."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.35)
    return model.double().eval()


@pytest.mark.parametrize("prompt_len,new_tokens", [(1, 12), (5, 40), (16, 8)])
def test_kv_cache_greedy_equals_no_cache(prompt_len, new_tokens):
    m = spiky(tiny_gpt(block_size=16))
    idx = torch.randint(50, (2, prompt_len))
    with_cache = m.generate(idx, new_tokens, temperature=0.0, use_kv_cache=True)
    without = m.generate(idx, new_tokens, temperature=0.0, use_kv_cache=False)
    assert with_cache.shape == (2, prompt_len + new_tokens)
    assert torch.equal(with_cache, without)
    assert torch.equal(with_cache[:, :prompt_len], idx)
    assert len(set(with_cache[:, prompt_len:].flatten().tolist())) > 3  # a non-trivial sequence


def test_kv_cache_logits_match_full_forward():
    m = spiky(tiny_gpt(block_size=16))
    idx = torch.randint(50, (3, 12))
    full, _ = m(idx, idx)  # with targets: logits at every position
    cache = KVCache(m.config.n_layer, m.config.block_size)
    logits, _ = m(idx[:, :4], cache=cache)
    torch.testing.assert_close(logits[:, -1], full[:, 3])
    for t in range(4, 12):
        logits, _ = m(idx[:, t:t + 1], cache=cache)
        torch.testing.assert_close(logits[:, -1], full[:, t])
    assert cache.pos == 12


def test_generate_with_sampling_stays_in_vocab_and_is_seeded():
    m = tiny_gpt(block_size=8).eval()
    idx = torch.randint(50, (2, 3))
    torch.manual_seed(1)
    a = m.generate(idx, 20, temperature=0.9, top_k=10, top_p=0.9)
    torch.manual_seed(1)
    b = m.generate(idx, 20, temperature=0.9, top_k=10, top_p=0.9)
    assert torch.equal(a, b) and a.shape == (2, 23)
    assert a.min() >= 0 and a.max() < 50


def test_sample_next_filters():
    torch.manual_seed(0)
    logits = torch.randn(4, 30)
    best = logits.argmax(-1, keepdim=True)
    assert torch.equal(sample_next(logits, temperature=0.0), best)
    assert torch.equal(sample_next(logits, top_k=1), best)
    assert torch.equal(sample_next(logits, top_p=1e-6), best)
    # top-k: only the k most likely tokens are ever drawn
    top5 = logits.topk(5, dim=-1).indices
    for _ in range(50):
        pick = sample_next(logits, temperature=2.0, top_k=5)
        assert (pick == top5).any(-1).all()
    # top-p on a known distribution: 0.5, 0.3, 0.15, 0.05 -> top_p=0.7 keeps the first two
    probs = torch.tensor([[0.05, 0.5, 0.15, 0.3]])
    picks = torch.cat([sample_next(probs.log(), top_p=0.7) for _ in range(300)]).flatten()
    assert set(picks.tolist()) == {1, 3}
    picks = torch.cat([sample_next(probs.log(), top_p=0.85) for _ in range(300)]).flatten()
    assert set(picks.tolist()) == {1, 2, 3}


def test_forward_shapes_loss_and_block_size_check():
    m = tiny_gpt(block_size=16, seed=0)
    idx = torch.randint(50, (2, 16))
    logits, loss = m(idx, idx)
    assert logits.shape == (2, 16, 50)
    assert abs(loss.item() - math.log(50)) < 0.5  # near-uniform at init
    logits, loss = m(idx)
    assert logits.shape == (2, 1, 50) and loss is None
    with pytest.raises(AssertionError, match="block size"):
        m(torch.randint(50, (1, 17)))
    assert m.transformer.wte.weight is m.lm_head.weight  # tied
    with pytest.raises(ValueError, match="kernels"):
        tiny_gpt(kernels="fast")


def test_scaled_residual_init():
    m = tiny_gpt(n_layer=4, n_embd=64, block_size=8, seed=0)
    std = 0.02 / math.sqrt(2 * 4)
    proj = torch.cat([b.attn.c_proj.weight.flatten() for b in m.transformer.h] +
                     [b.mlp.c_proj.weight.flatten() for b in m.transformer.h])
    assert abs(proj.std().item() - std) < 0.15 * std
    assert abs(m.transformer.h[0].attn.c_attn.weight.std().item() - 0.02) < 0.003


def test_crop_block_size():
    m = tiny_gpt(block_size=16, seed=0).eval()
    idx = torch.randint(50, (2, 8))
    before, _ = m(idx, idx)
    m.crop_block_size(8)
    assert m.config.block_size == 8 and m.transformer.wpe.weight.shape == (8, 32)
    after, _ = m(idx, idx)
    torch.testing.assert_close(after, before)
    with pytest.raises(AssertionError):
        m(torch.randint(50, (1, 9)))
    out = m.generate(idx[:, :2], 10, temperature=0.0)  # slides its window past 8
    assert out.shape == (2, 12)


def test_get_num_params():
    m = tiny_gpt(block_size=16, seed=0)
    total = sum(p.numel() for p in m.parameters())
    assert m.get_num_params(non_embedding=False) == total
    assert m.get_num_params() == total - 16 * 32


def test_configure_optimizers_groups():
    m = tiny_gpt(block_size=16, seed=0, bias=True)
    opt = m.configure_optimizers(weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95),
                                 device_type="cpu")
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"])
    assert all(p.dim() < 2 for p in no_decay["params"])
    ids = [id(p) for g in opt.param_groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(m.parameters()))  # tied weight counted once
    assert opt.param_groups[0]["betas"] == (0.9, 0.95) and opt.param_groups[0]["lr"] == 1e-3
    assert not opt.defaults.get("fused")


# -----------------------------------------------------------------------------
# MFU

@pytest.mark.parametrize("name,peak", [
    ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA H200", 989e12),
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA A100 80GB PCIe", 312e12),
    ("NVIDIA GeForce RTX 4090", 165e12),
    ("Tesla T4", None),
    ("NVIDIA GeForce RTX 3090", None),
    ("", None),
])
def test_peak_flops_table(name, peak):
    assert peak_flops(name) == peak


def test_estimate_mfu(monkeypatch):
    m = tiny_gpt(block_size=16, seed=0)
    assert m.estimate_mfu(4, 0.1) is None  # CPU
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(model_module, "_mfu_warned", False)
    N, L, H, Q, T = m.get_num_params(), 2, 2, 16, 16
    flops = (6 * N + 12 * L * H * Q * T) * T * 4
    dt = flops / (0.4 * 989e12)  # time that makes MFU exactly 40%
    assert m.estimate_mfu(4, dt, device="cuda") == pytest.approx(0.4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert m.estimate_mfu(4, dt / 3, device="cuda") is None  # 120%: the table must be wrong
        assert m.estimate_mfu(4, dt / 3, device="cuda") is None
    assert len(caught) == 1 and "100%" in str(caught[0].message)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Mystery GPU 9000")
    assert m.estimate_mfu(4, dt, device="cuda") is None


# -----------------------------------------------------------------------------
# from_pretrained on a locally saved HF GPT-2

@pytest.mark.parametrize("activation,tol", [("gelu", 1e-5), ("gelu_new", 2e-3)])
def test_from_pretrained_local_dir_matches_hf(tmp_path, activation, tol):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=48, vocab_size=97,
                                  activation_function=activation, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    hf = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # HF zero-inits biases: make them random so they are tested too
        for name, p in hf.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02)
    hf.save_pretrained(tmp_path)
    m = GPT.from_pretrained(str(tmp_path)).eval()  # model_type is a directory
    assert (m.config.n_layer, m.config.n_head, m.config.n_embd) == (2, 4, 64)
    assert (m.config.block_size, m.config.vocab_size, m.config.bias) == (48, 97, True)
    idx = torch.randint(97, (2, 48))
    with torch.no_grad():
        ours, _ = m(idx, idx)
        theirs = hf(idx).logits
    # exact GELU (nanoGPT) vs HF's tanh-approximate gelu_new differ slightly
    torch.testing.assert_close(ours, theirs, rtol=0, atol=tol)
    m2 = GPT.from_pretrained("gpt2", local_dir=str(tmp_path), override_args=dict(dropout=0.1))
    assert m2.config.dropout == 0.1
    torch.testing.assert_close(m2.lm_head.weight, m.lm_head.weight)


def test_load_checkpoint_state_accepts_compiled_model_keys():
    src, dst = tiny_gpt(seed=1), tiny_gpt(seed=2)
    compiled_style = {"_orig_mod." + k: v.clone() for k, v in src.state_dict().items()}
    dst.load_checkpoint_state(compiled_style)
    for k, v in src.state_dict().items():
        assert torch.equal(dst.state_dict()[k], v), k
    dst2 = tiny_gpt(seed=3)
    dst2.load_checkpoint_state(src.state_dict())  # plain keys load as they are
    assert all(torch.equal(dst2.state_dict()[k], v) for k, v in src.state_dict().items())
    with pytest.raises(RuntimeError):  # a foreign state dict still fails loudly
        dst2.load_checkpoint_state({"_orig_mod.nonsense": torch.zeros(1)})
