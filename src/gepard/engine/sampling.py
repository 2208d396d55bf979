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
    """(V,) float logits, disallowed tokens already -inf -> one token id.

    Top-k comes first, so top-p sorts k candidates instead of the whole vocabulary.
    """
    if s.temperature <= 0:
        return int(logits.argmax())
    logits = logits.float() / s.temperature
    values, ids = torch.topk(logits, min(s.top_k or logits.numel(), logits.numel()))  # (k,), descending
    probs = torch.softmax(values, -1)
    if s.top_p < 1.0:
        probs[probs.cumsum(0) - probs > s.top_p] = 0.0
    return int(ids[torch.multinomial(probs / probs.sum(), 1, generator=gen)])
