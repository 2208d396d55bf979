"""Training-only regularizers on the voice prefix (off by default; `--supcon`, `--diversity`).

SupCon (Khosla et al., 2020): the mean-pooled prefixes of references from the same speaker are pulled
together and those of other speakers pushed apart, so the prefix carries who speaks, not what the reference
clip said. Diversity: the K prefix vectors of one voice are pushed towards mutually orthogonal directions,
so they do not collapse into one repeated vector.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def supcon_loss(prefix: torch.Tensor, speakers: torch.Tensor, keep: torch.Tensor,
                temperature: float = 0.1) -> torch.Tensor:
    """(B, K, H) prefixes, (B,) speaker ids, (B,) rows to use -> mean SupCon loss over the anchors that have a
    positive (another kept row of their speaker); 0 when none has."""
    z = F.normalize(prefix.float().mean(dim=1), dim=-1)
    sim = z @ z.T / temperature
    others = keep[:, None] & keep[None, :] & ~torch.eye(len(z), dtype=torch.bool, device=z.device)
    positive = others & (speakers[:, None] == speakers[None, :])
    log_prob = sim - torch.logsumexp(sim.masked_fill(~others, float("-inf")), dim=1, keepdim=True)
    anchors = positive.any(dim=1)
    if not anchors.any():
        return prefix.sum() * 0.0
    per_anchor = (log_prob * positive).sum(dim=1)[anchors] / positive.sum(dim=1)[anchors]
    return -per_anchor.mean()


def diversity_loss(prefix: torch.Tensor) -> torch.Tensor:
    """(B, K, H) prefixes -> mean squared cosine between different vectors of the same prefix (0: orthogonal)."""
    z = F.normalize(prefix.float(), dim=-1)
    gram = z @ z.transpose(1, 2)
    k = gram.shape[-1]
    off = ~torch.eye(k, dtype=torch.bool, device=z.device)
    return (gram[:, off] ** 2).mean()
