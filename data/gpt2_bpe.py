"""
The GPT-2 BPE tokenizer, also without network access.

get_gpt2_encoding() returns a tiktoken Encoding that tokenizes exactly like
tiktoken.get_encoding("gpt2"). It looks, in order, at:
  1. the bpe_path argument (e.g. from a --bpe PATH flag),
  2. the TIKTOKEN_GPT2_BPE environment variable,
  3. tiktoken.get_encoding("gpt2"), which downloads the ranks once and caches them.
1 and 2 name a local tiktoken ranks file (r50k_base.tiktoken: one
"<base64 token> <rank>" per line), which is the GPT-2 vocabulary.
"""

import os

ENV_VAR = "TIKTOKEN_GPT2_BPE"
EOT_TOKEN = "<|endoftext|>"
EOT_ID = 50256
N_VOCAB = 50257

try:  # the pre-tokenization regex as tiktoken itself spells it, when it is exposed
    from tiktoken_ext.openai_public import r50k_pat_str as GPT2_PAT_STR
except Exception:
    # GPT-2's split pattern: contractions, letter runs, digit runs, other symbol
    # runs (each with an optional leading space), then whitespace.
    GPT2_PAT_STR = (
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    )


def _from_ranks_file(path: str):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    if not os.path.isfile(path):
        raise RuntimeError(f"GPT-2 BPE ranks file not found: {path}")
    try:
        ranks = load_tiktoken_bpe(path)
    except Exception as e:
        raise RuntimeError(
            f"cannot read GPT-2 BPE ranks file {path} ({type(e).__name__}: {e}); "
            "expected a tiktoken ranks file such as r50k_base.tiktoken"
        ) from None
    if len(ranks) != EOT_ID or sorted(ranks.values()) != list(range(EOT_ID)):
        raise RuntimeError(
            f"{path} holds {len(ranks)} ranks, not GPT-2's {EOT_ID} "
            "(expected r50k_base.tiktoken)"
        )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens={EOT_TOKEN: EOT_ID},
        explicit_n_vocab=N_VOCAB,
    )


def get_gpt2_encoding(bpe_path: str | None = None):
    """Return the GPT-2 tiktoken Encoding; raise one RuntimeError if none is available."""
    if bpe_path:
        return _from_ranks_file(bpe_path)
    env_path = os.environ.get(ENV_VAR)
    if env_path:
        return _from_ranks_file(env_path)
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as e:
        raise RuntimeError(
            f"cannot load the GPT-2 tokenizer: tiktoken.get_encoding('gpt2') failed "
            f"({type(e).__name__}: {e}). Without network access give a local "
            f"r50k_base.tiktoken ranks file with --bpe PATH or the {ENV_VAR} "
            "environment variable."
        ) from None
