"""Start a model from another one's weights when its text tokenizer or its codec's codebook differs."""

from __future__ import annotations

import torch

from gepard.codec.fsq import FSQ
from gepard.lm.speech_lm import SpeechLM


def nearest_codes(src_levels: list[int], dst_levels: list[int]) -> torch.Tensor:
    """-> (prod(dst_levels),) for each code of the dst grid, the src code whose FSQ values are nearest, digit by
    digit (both grids have the same number of digits)."""
    src, dst = FSQ(src_levels), FSQ(dst_levels)
    values = dst.index_to_values(torch.arange(dst.codebook_size))  # (N, D) in [-1, 1)
    return src.digits_to_index(torch.minimum(src.values_to_digits(values), torch.tensor(src_levels) - 1))


@torch.no_grad()
def transplant(src: SpeechLM, dst: SpeechLM) -> int:
    """Copy into dst (built with its own tokenizer) all that carries over from src: the transformer body, the
    voice compressor, the special-token embeddings, the audio-code embeddings (tied to the head; on another FSQ
    grid of as many digits, a finer or coarser codebook, each code starts from src's nearest code), and the
    embedding of every text token both tokenizers share. -> the number of shared text tokens."""

    def body(model: SpeechLM) -> dict[str, torch.Tensor]:
        return {k: v for k, v in model.lm.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k}

    src_body, dst_body = body(src), body(dst)
    if {k: v.shape for k, v in src_body.items()} != {k: v.shape for k, v in dst_body.items()}:
        raise ValueError("the two models' transformer bodies differ")
    src_levels, dst_levels = src.voice.fsq.levels, dst.voice.fsq.levels
    if len(src_levels) != len(dst_levels):
        raise ValueError(f"the codecs' FSQ grids differ in their number of digits ({src_levels} vs {dst_levels})")
    dst.lm.load_state_dict(src_body, strict=False)
    dst.voice.load_state_dict(src.voice.state_dict())
    old, new = src.lm.get_input_embeddings().weight, dst.lm.get_input_embeddings().weight
    new[dst.vocab.text_size: dst.vocab.audio_offset] = old[src.vocab.text_size: src.vocab.audio_offset]  # specials
    new[dst.vocab.audio_offset:] = old[src.vocab.audio_offset + nearest_codes(src_levels, dst_levels)]
    old_ids = src.tokenizer.get_vocab()
    shared = [(i, old_ids[t]) for t, i in dst.tokenizer.get_vocab().items()
              if i < dst.vocab.text_size and old_ids.get(t, src.vocab.text_size) < src.vocab.text_size]
    for i, j in shared:
        new[i] = old[j]
    return len(shared)
