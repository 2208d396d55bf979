"""Training-only regularizers against memorizing a few hours of speech; the exported checkpoint stays stock.

Measured on the release trained without them (`docs/results/alignment.md`): teacher-forced NLL 5.0 nats per
frame on training utterances but 8.2 on held-out sentences.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gepard.lm.layout import Vocab


def residual_dropout(lm: nn.Module, p: float) -> list:
    """Dropout on every layer's attention and MLP output while training (stock Qwen3 has none), as forward
    hooks -> their handles."""

    def drop(module, args, output):
        if isinstance(output, tuple):
            return (F.dropout(output[0], p, module.training), *output[1:])
        return F.dropout(output, p, module.training)

    return [m.register_forward_hook(drop) for layer in lm.model.layers for m in (layer.self_attn, layer.mlp)]


def corrupt_audio_inputs(ids: torch.Tensor, vocab: Vocab, p: float, generator: torch.Generator) -> torch.Tensor:
    """(B, L) ids -> a copy where each audio input token is replaced by a random audio code with probability p
    (labels stay the true codes: the model learns to speak on from imperfect history, as when it generates)."""
    audio = ids >= vocab.audio_offset
    hit = audio & (torch.rand(ids.shape, generator=generator) < p)
    noise = vocab.audio_offset + torch.randint(0, vocab.codebook_size, ids.shape, generator=generator)
    return torch.where(hit, noise, ids)
