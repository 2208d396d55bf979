"""Turning one row of logits into one token: penalties, temperature, top-k, top-p, a per-request generator."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gepard.engine.base import TOP_CODES, SamplingParams, Top


def apply_repetition_penalty(logits: torch.Tensor, recent: list[int], penalty: float) -> torch.Tensor:
    """(V,) logits; tokens in `recent` are divided (positive) or multiplied (negative) by `penalty`."""
    if penalty == 1.0 or not recent:
        return logits
    idx = torch.tensor(sorted(set(recent)), device=logits.device)
    vals = logits[idx]
    logits = logits.clone()
    logits[idx] = torch.where(vals > 0, vals / penalty, vals * penalty)
    return logits


def sample_tokens(logits: torch.Tensor, params: list[SamplingParams], gens: list[torch.Generator]) -> list[int]:
    """(B, V) float logits, disallowed tokens already -inf, one SamplingParams and generator per row -> B ids.

    One top-k for the whole batch (k = the largest asked for), so each row's top-p sorts k candidates, not
    the vocabulary; each row then draws with its own generator (per-request seeds).
    """
    temperature = torch.tensor([s.temperature if s.temperature > 0 else 1.0 for s in params])
    k = min(max(s.top_k or logits.shape[1] for s in params), logits.shape[1])
    values, ids = block_topk(logits.float() / temperature[:, None], k)  # (B, k), descending
    tokens = []
    for row, (s, gen) in enumerate(zip(params, gens)):
        if s.temperature <= 0:
            tokens.append(int(logits[row].argmax()))
            continue
        probs = torch.softmax(values[row, : s.top_k or k], -1)
        if s.top_p < 1.0:
            probs[probs.cumsum(0) - probs > s.top_p] = 0.0
        tokens.append(int(ids[row, torch.multinomial(probs / probs.sum(), 1, generator=gen)]))
    return tokens


def top_codes(logits: torch.Tensor, audio_offset: int, n: int = TOP_CODES) -> list[Top]:
    """(B, V) float logits, disallowed tokens already -inf -> per row the n likeliest audio codes (code numbers,
    not token ids) and their log-probabilities among the allowed tokens, before temperature."""
    values, ids = block_topk(torch.log_softmax(logits, -1)[:, audio_offset:], n)
    return [(tuple(i), tuple(v)) for i, v in zip(ids.tolist(), values.tolist())]


def block_topk(x: torch.Tensor, k: int, block: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.topk(x, k) over the last dim of (B, V), about twice as fast for a large vocabulary: the top k
    all lie in the k blocks with the largest maxima (any other block has k larger values before it)."""
    batch, size = x.shape
    if size <= 4 * k * block:
        return torch.topk(x, k)
    blocks = F.pad(x, (0, -size % block), value=float("-inf")).view(batch, -1, block)  # (B, N, block)
    best = blocks.amax(-1).topk(k).indices  # (B, k) block numbers
    values, at = blocks.gather(1, best[:, :, None].expand(-1, -1, block)).view(batch, -1).topk(k)
    return values, best.gather(1, at // block) * block + at % block
