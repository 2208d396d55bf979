"""Chosen/rejected pairs from scored rollouts: the best sample of a prompt against its worst single-pass one."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Rollout:
    prompt: int  # index into the prompt set
    seed: int
    cfg: bool  # generated with two-pass text CFG
    codes: list[int]
    stopped: bool  # emitted <eos> before the max-frame guard
    reward: float = 0.0


def build_pairs(rollouts: list[Rollout], min_margin: float = 0.2) -> list[tuple[Rollout, Rollout]]:
    """Per prompt: chosen = the highest reward of any sample (CFG ones included: that is what gets
    distilled), rejected = the lowest-reward single-pass sample (what serving would say). Pairs whose
    rewards differ by less than `min_margin` teach nothing and are dropped."""
    by_prompt: dict[int, list[Rollout]] = defaultdict(list)
    for r in rollouts:
        by_prompt[r.prompt].append(r)
    pairs = []
    for prompt in sorted(by_prompt):
        samples = by_prompt[prompt]
        single = [r for r in samples if not r.cfg]
        if not single:
            continue
        chosen = max(samples, key=lambda r: r.reward)
        rejected = min(single, key=lambda r: r.reward)
        if chosen is not rejected and chosen.reward - rejected.reward >= min_margin:
            pairs.append((chosen, rejected))
    return pairs
