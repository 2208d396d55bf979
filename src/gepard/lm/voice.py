"""Voice prefix: a Q-Former-style reference compressor (codec codes of a clip -> K prefix embeddings).

The prefix enters the LM as prompt embeddings before the text (HF `inputs_embeds`, vLLM `EmbedsPrompt`),
so voice cloning costs nothing per decode step. A learned null prefix stands for "no reference" (used by
CFG-dropout in training and as the unconditional branch of two-pass CFG).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from gepard.codec.fsq import FSQ


@dataclass
class VoiceConfig:
    lm_hidden_size: int = 384
    dim: int = 256
    heads: int = 4
    blocks: int = 2
    prefix_len: int = 8  # K
    levels: list[int] = field(default_factory=lambda: [8, 8, 8, 5, 5, 5])  # the codec's FSQ levels


class CompressorBlock(nn.Module):
    """Queries attend to themselves, then to the reference frames, then an MLP (pre-norm)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm_self, self.norm_cross, self.norm_ref, self.norm_mlp = (nn.LayerNorm(dim) for _ in range(4))
        self.self_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, q: torch.Tensor, ref: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        """q (B, K, C), ref (B, R, C), pad (B, R) True where padded -> (B, K, C)."""
        h = self.norm_self(q)
        q = q + self.self_attn(h, h, h, need_weights=False)[0]
        r = self.norm_ref(ref)
        q = q + self.cross_attn(self.norm_cross(q), r, r, key_padding_mask=pad, need_weights=False)[0]
        return q + self.mlp(self.norm_mlp(q))


class ReferenceCompressor(nn.Module):
    """(B, R) reference codes -> (B, K, lm_hidden_size) prefix embeddings."""

    def __init__(self, config: VoiceConfig):
        super().__init__()
        self.config = config
        self.fsq = FSQ(config.levels)
        self.inp = nn.Linear(len(config.levels), config.dim)
        self.local = nn.Conv1d(config.dim, config.dim, 5, padding=2)
        self.queries = nn.Parameter(torch.randn(config.prefix_len, config.dim) * 0.02)
        self.blocks = nn.ModuleList(CompressorBlock(config.dim, config.heads) for _ in range(config.blocks))
        self.out = nn.Sequential(nn.LayerNorm(config.dim), nn.Linear(config.dim, config.lm_hidden_size))
        self.null_prefix = nn.Parameter(torch.randn(config.prefix_len, config.lm_hidden_size) * 0.02)

    def forward(self, codes: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """codes (B, R) int, lengths (B,) valid frames (default: all) -> (B, K, H)."""
        batch, frames = codes.shape
        x = self.inp(self.fsq.index_to_values(codes))
        pad = None
        if lengths is not None:
            pad = torch.arange(frames, device=codes.device)[None] >= lengths[:, None]
            x = x.masked_fill(pad[..., None], 0.0)
        x = x + F.gelu(self.local(x.transpose(1, 2))).transpose(1, 2)
        q = self.queries.expand(batch, -1, -1)
        for block in self.blocks:
            q = block(q, x, pad)
        return self.out(q)

    def null(self, batch: int) -> torch.Tensor:
        """(B, K, H) the learned "no reference" prefix."""
        return self.null_prefix.expand(batch, -1, -1)
