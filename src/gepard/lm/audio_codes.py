"""Factorized audio-code embeddings: a code's embedding is the sum of one learned vector per FSQ digit.

A few hours of speech show each of 64,000 codes only a handful of times. Sharing parameters across the
FSQ grid lets every frame teach every code that shares one of its digits. With tied input/output
embeddings, the LM's distribution over codes becomes a product of per-digit softmaxes, so the exact
log-partition over all codes is a sum of per-digit log-sum-exps: training needs no 64,000-way softmax.
At export the tables are written into the stock checkpoint's embedding rows (`materialize`), so
transformers and vLLM serve a plain Qwen3 whose softmax over audio codes + <eos> is exactly the one
trained here.
"""

from __future__ import annotations

import torch
from torch import nn

from gepard.codec.fsq import FSQ


class FactorizedCodes(nn.Module):
    """Per-digit tables, all digits' rows stacked: (sum(levels), H)."""

    def __init__(self, levels: list[int], hidden_size: int, std: float = 0.02):
        super().__init__()
        self.fsq = FSQ(levels)
        self.table = nn.Parameter(torch.randn(sum(levels), hidden_size) * std / len(levels) ** 0.5)
        starts = torch.cumsum(torch.tensor([0] + list(levels[:-1])), dim=0)
        self.register_buffer("starts", starts, persistent=False)

    def rows(self, codes: torch.Tensor) -> torch.Tensor:
        """(...) codes -> (..., D) row indices into `table`, one per digit."""
        return self.fsq.index_to_digits(codes) + self.starts

    def embed(self, codes: torch.Tensor) -> torch.Tensor:
        """(...) codes -> (..., H) embeddings."""
        return self.table[self.rows(codes)].sum(-2)

    def materialize(self) -> torch.Tensor:
        """(N, H): every code's embedding, for the stock checkpoint's embedding rows."""
        return self.embed(torch.arange(self.fsq.codebook_size, device=self.table.device))

    def nll(self, hidden: torch.Tensor, codes: torch.Tensor, eos: torch.Tensor) -> torch.Tensor:
        """Exact negative log-likelihood under the softmax over all codes + <eos>.

        hidden (M, H) final hidden states; codes (M,) target codes, -1 where the target is <eos>;
        eos (H,) the <eos> embedding -> (M,) float32.
        """
        scores = (hidden @ self.table.T).float()  # (M, sum(levels)): one logit per digit value
        log_z_codes = sum(part.logsumexp(-1) for part in scores.split(self.fsq.levels, dim=-1))
        eos_logit = (hidden @ eos).float()
        log_z = torch.logaddexp(log_z_codes, eos_logit)
        code_logit = scores.gather(1, self.rows(codes.clamp(min=0))).sum(-1)
        return log_z - torch.where(codes < 0, eos_logit, code_logit)

    @classmethod
    def fit(cls, levels: list[int], embeddings: torch.Tensor) -> "FactorizedCodes":
        """The tables whose sums best match (N, H) trained code embeddings (least squares)."""
        codes = cls(levels, embeddings.shape[1])
        design = torch.zeros(codes.fsq.codebook_size, codes.table.shape[0])
        design.scatter_(1, codes.rows(torch.arange(codes.fsq.codebook_size)), 1.0)
        solution = torch.linalg.lstsq(design.double(), embeddings.double(), driver="gelsd").solution
        with torch.no_grad():
            codes.table.copy_(solution.float())
        return codes
