"""Guided alignment, a training-only loss: a few heads of one layer learn to read the text left to right.

Measured on the release trained without it (`gepard eval alignment`): no head's attention from the audio
frames moved along the text, so the model spoke voice-like babble. DC-TTS's guided attention, in a
decoder-only form, pulls chosen heads onto the voiced text copy near the diagonal: for the query that
predicts frame j of T, the loss is -log sum_n A[j, n] G[j, n] over the N text keys, with
G[j, n] = exp(-((n + 1/2)/N - (j + 1/2)/T)^2 / (2 sigma^2)). Only weights change: the checkpoint stays stock.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb


@dataclass(frozen=True)
class AlignmentConfig:
    weight: float = 1.0  # 0 turns the loss off
    layer: int = 2
    heads: int = 2  # the layer's first `heads` query heads
    sigma: float = 0.2
    frame_level: bool = False  # the text is one token per audio frame (then padded): frame j reads token j


class AttentionTap:
    """Keeps the input of one attention layer from the latest forward, to recompute some heads' attention."""

    def __init__(self, attention: nn.Module):
        self.attention = attention
        self.inputs: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]] | None = None
        self.handle = attention.register_forward_pre_hook(self._keep, with_kwargs=True)

    def _keep(self, module, args, kwargs) -> None:
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        rotary = kwargs["position_embeddings"] if "position_embeddings" in kwargs else args[1]
        self.inputs = (hidden, rotary)

    def probabilities(self, heads: int, lengths: torch.Tensor) -> torch.Tensor:
        """Causal attention of the first `heads` query heads -> (B, heads, L, L); keys past a row's length
        (B,) get none. Uses up the kept inputs."""
        attn, (hidden, (cos, sin)) = self.attention, self.inputs
        self.inputs = None
        shape = (*hidden.shape[:-1], -1, attn.head_dim)
        q = attn.q_norm(attn.q_proj(hidden).view(shape)).transpose(1, 2)[:, :heads]
        k = attn.k_norm(attn.k_proj(hidden).view(shape)).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = k.repeat_interleave(attn.num_key_value_groups, dim=1)[:, :heads]
        scores = (q @ k.transpose(-1, -2)).float() * attn.scaling
        length = hidden.shape[1]
        position = torch.arange(length, device=hidden.device)
        allowed = (position[None, :] <= position[:, None])[None] & (position[None, None, :] < lengths[:, None, None])
        return scores.masked_fill(~allowed[:, None], float("-inf")).softmax(-1)

    def remove(self) -> None:
        self.handle.remove()


def diagonal_prior(frames: int, tokens: int, sigma: float) -> torch.Tensor:
    """(frames, tokens) Gaussian weights around the diagonal, 1 on it."""
    j = (torch.arange(frames) + 0.5) / frames
    n = (torch.arange(tokens) + 0.5) / tokens
    return torch.exp(-((n[None, :] - j[:, None]) ** 2) / (2 * sigma**2))


def diagonal_masses(probs: torch.Tensor, spans: torch.Tensor, sigma: float) -> list[torch.Tensor]:
    """probs (B, H, L, L) attention; spans (B, 4) = text start, text length, first audio query, audio frames
    (positions in the full sequence) -> per row, (H, frames): each frame's text attention weighted by the
    diagonal prior (1 = it reads exactly its own part of the text)."""
    masses = []
    for row, (t0, n, a0, frames) in zip(probs, spans.tolist()):
        text = row[:, a0: a0 + frames, t0: t0 + n]  # (H, frames, n)
        masses.append((text * diagonal_prior(frames, n, sigma).to(text.device)).sum(-1))
    return masses


def frame_level_spans(spans: torch.Tensor) -> torch.Tensor:
    """Spans (B, 4) of a frame-level track (one text token per audio frame, then padding): only the first
    `frames` text tokens are read, so the diagonal has slope 1 (frame j -> token j)."""
    return torch.stack([spans[:, 0], spans[:, 3], spans[:, 2], spans[:, 3]], 1)


def alignment_loss(probs: torch.Tensor, spans: torch.Tensor, sigma: float) -> torch.Tensor:
    """Mean over rows, heads and frames of -log(diagonal text mass)."""
    return torch.stack([-torch.log(m + 1e-6).mean() for m in diagonal_masses(probs, spans, sigma)]).mean()
