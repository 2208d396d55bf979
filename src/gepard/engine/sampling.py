"""Turning one row of logits into one token: penalties, temperature, top-k, top-p, a per-request generator."""

from __future__ import annotations

import torch

from gepard.engine.base import SamplingParams


def apply_repetition_penalty(logits: torch.Tensor, recent: list[int], penalty: float) -> torch.Tensor:
    """(V,) logits; tokens in `recent` are divided (positive) or multiplied (negative) by `penalty`."""
    if penalty == 1.0 or not recent:
        return logits
    idx = torch.tensor(sorted(set(recent)), device=logits.device)
    vals = logits[idx]
    logits = logits.clone()
    logits[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    return logits


def sample_token(logits: torch.Tensor, s: SamplingParams, gen: torch.Generator) -> int:
    """(V,) float logits, disallowed tokens already -inf -> one token id."""
    if s.temperature <= 0:
        return int(logits.argmax())
    logits = logits.float() / s.temperature
    if s.top_k:
        kth = torch.topk(logits, min(s.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, -1)
    if s.top_p < 1.0:
        sorted_p, order = probs.sort(descending=True)
        probs[order[sorted_p.cumsum(0) - sorted_p > s.top_p]] = 0.0
    return int(torch.multinomial(probs / probs.sum(), 1, generator=gen))
