"""The speech LM: a stock Hugging Face Qwen3ForCausalLM over the merged vocabulary."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from gepard.codec.fsq import FSQ
from gepard.lm.layout import Vocab


@dataclass
class LMConfig:
    hidden_size: int = 256
    layers: int = 6
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 768
    max_positions: int = 4096


def build_lm(config: LMConfig, vocab: Vocab) -> Qwen3ForCausalLM:
    """A randomly initialized stock Qwen3 with tied input/output embeddings."""
    hf = Qwen3Config(
        vocab_size=vocab.size, hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers, num_attention_heads=config.heads, num_key_value_heads=config.kv_heads,
        head_dim=config.head_dim, max_position_embeddings=config.max_positions, tie_word_embeddings=True,
        pad_token_id=vocab.special("<pad>"), bos_token_id=vocab.special("<sot>"), eos_token_id=vocab.special("<eos>"),
    )
    return Qwen3ForCausalLM(hf)


@torch.no_grad()
def init_audio_embeddings(model: Qwen3ForCausalLM, vocab: Vocab, levels: list[int], seed: int = 0) -> None:
    """Give audio-token embeddings the structure of the FSQ grid: a random linear map of each code's
    FSQ values, so codes that sound alike start close (and rarely seen codes start somewhere sensible)."""
    fsq = FSQ(levels)
    values = fsq.index_to_values(torch.arange(vocab.codebook_size))  # (N, D)
    gen = torch.Generator().manual_seed(seed)
    emb = model.get_input_embeddings().weight
    proj = torch.randn(values.shape[1], emb.shape[1], generator=gen) * emb.std() * 2
    noise = torch.randn(vocab.codebook_size, emb.shape[1], generator=gen) * emb.std() * 0.5
    emb[vocab.audio_offset:] = (values @ proj + noise).to(emb.dtype)
