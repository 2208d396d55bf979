"""Length-normalized, reference-anchored DPO (Rafailov et al. 2023, with per-token mean log-probs)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float = 2.0, nll_weight: float = 0.0) -> torch.Tensor:
    """(B,) mean per-token log-probs of chosen/rejected under the policy and the frozen reference -> loss.

    loss = -log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r))): the policy moves away from the reference
    (the anchor) only as far as it prefers chosen over rejected. Per-token means keep long rollouts from
    dominating, and keep "stop early" from looking likely just because it is short. nll_weight adds
    -nll_weight * pi_c (the chosen rollouts' NLL, as in RPO), so that the margin cannot grow by making
    both sequences unlikely.
    """
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean() - nll_weight * policy_chosen.mean()
