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


def candidates(logits: torch.Tensor, params: list[SamplingParams]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, V) float logits -> each row's likeliest tokens: (B, k) logits / temperature (greedy rows: / 1),
    descending, and their (B, k) ids. One k for the whole batch: the largest top-k asked for, and at least
    TOP_CODES + 1 (the tops every step reports, <eos> aside)."""
    temperature = torch.tensor([s.temperature if s.temperature > 0 else 1.0 for s in params])
    k = min(max([s.top_k or logits.shape[1] for s in params] + [TOP_CODES + 1]), logits.shape[1])
    return block_topk(logits.float() / temperature[:, None], k)


def sample_tokens(logits: torch.Tensor, params: list[SamplingParams], gens: list[torch.Generator],
                  top: tuple[torch.Tensor, torch.Tensor] | None = None) -> list[int]:
    """(B, V) float logits, disallowed tokens already -inf, one SamplingParams and generator per row -> B ids.

    Draws from `top` (the rows' `candidates`, computed here if not given), so each row's top-p sorts k
    candidates, not the vocabulary; each row then draws with its own generator (per-request seeds).
    """
    values, ids = top if top is not None else candidates(logits, params)
    tokens = []
    for row, (s, gen) in enumerate(zip(params, gens)):
        if s.temperature <= 0:
            tokens.append(int(logits[row].argmax()))
            continue
        probs = torch.softmax(values[row, : s.top_k or values.shape[1]], -1)
        if s.top_p < 1.0:
            probs[probs.cumsum(0) - probs > s.top_p] = 0.0
        tokens.append(int(ids[row, torch.multinomial(probs / probs.sum(), 1, generator=gen)]))
    return tokens


def top_codes(top: tuple[torch.Tensor, torch.Tensor], params: list[SamplingParams], audio_offset: int,
              n: int = TOP_CODES) -> list[Top]:
    """The rows' `candidates` -> per row its n likeliest audio codes (code numbers, not token ids) and their
    logits before temperature (log-probabilities up to one constant per row)."""
    values, ids = top
    temperature = [s.temperature if s.temperature > 0 else 1.0 for s in params]
    out = []
    for row_ids, row_values, t in zip(ids[:, : n + 1].tolist(), values[:, : n + 1].tolist(), temperature):
        codes = [(i - audio_offset, v * t) for i, v in zip(row_ids, row_values) if i >= audio_offset][:n]
        out.append((tuple(c for c, _ in codes), tuple(v for _, v in codes)))
    return out


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
