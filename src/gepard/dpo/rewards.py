"""Rewards for DPO rollouts: ASR word error, a two-sided length penalty, speaker similarity.

The length penalty is two-sided on purpose: rewarding only "no runaway" teaches the model to stop at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gepard.eval.asr import normalize_text


@dataclass(frozen=True)
class RewardWeights:
    wer: float = 1.0
    length: float = 1.0
    similarity: float = 0.5
    tolerance: float = 0.3  # durations within x(1 + tolerance) of the expected one cost nothing


def expected_duration(text: str, chars_per_s: float) -> float:
    """Seconds a typical speaker of the training data takes for `text` (normalized characters / rate)."""
    return max(0.3, len(normalize_text(text)) / chars_per_s)


def length_penalty(duration_s: float, expected_s: float, tolerance: float) -> float:
    """0 inside [expected / (1 + tol), expected * (1 + tol)], else how far outside, in |log ratio|."""
    ratio = abs(math.log(max(duration_s, 1e-3) / expected_s))
    return max(0.0, ratio - math.log(1 + tolerance))


def reward(wer: float, duration_s: float, expected_s: float, similarity: float,
           weights: RewardWeights = RewardWeights()) -> float:
    """Higher is better: -WER (capped at 1) - length penalty + speaker cosine, weighted."""
    return (-weights.wer * min(wer, 1.0) - weights.length * length_penalty(duration_s, expected_s, weights.tolerance)
            + weights.similarity * similarity)
