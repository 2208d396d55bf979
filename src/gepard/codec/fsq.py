"""Finite scalar quantization (Mentzer et al., 2023) with one mixed-radix index per frame."""

from __future__ import annotations

import torch
from torch import nn


class FSQ(nn.Module):
    """Bounds each of D channels and rounds it to one of `levels[d]` values.

    Values live in [-1, 1); digits are integers in [0, levels[d]); the index of a
    frame is the mixed-radix number of its digits, in [0, prod(levels)).
    """

    def __init__(self, levels: list[int], eps: float = 1e-3):
        super().__init__()
        self.levels = list(levels)
        self.eps = eps
        lv = torch.tensor(levels, dtype=torch.float32)
        basis = torch.cumprod(torch.tensor([1] + levels[:-1]), dim=0)
        self.register_buffer("_levels", lv, persistent=False)
        self.register_buffer("_basis", basis, persistent=False)

    @property
    def dim(self) -> int:
        return len(self.levels)

    @property
    def codebook_size(self) -> int:
        return int(torch.prod(self._levels).item())

    def _bounded(self, z: torch.Tensor) -> torch.Tensor:
        """(..., D) unbounded -> (..., D) in digit units, centred: channel d lies within levels[d] integers."""
        half_l = (self._levels - 1) * (1 - self.eps) / 2
        offset = torch.where(self._levels % 2 == 0, 0.5, 0.0)
        shift = torch.atanh(offset / half_l)
        return torch.tanh(z.float() + shift) * half_l - offset

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """(..., D) unbounded -> (..., D) quantized values, straight-through gradient."""
        bounded = self._bounded(z)
        rounded = bounded + (bounded.round() - bounded).detach()
        return rounded / (self._levels // 2)

    def unrounded(self, z: torch.Tensor) -> torch.Tensor:
        """(..., D) unbounded -> (..., D) the values `forward` rounds, before rounding (what rounding costs)."""
        return self._bounded(z) / (self._levels // 2)

    def values_to_digits(self, values: torch.Tensor) -> torch.Tensor:
        """(..., D) quantized values -> (..., D) integer digits."""
        half = self._levels // 2
        return (values.float() * half + half).round().long()

    def digits_to_values(self, digits: torch.Tensor) -> torch.Tensor:
        """(..., D) integer digits -> (..., D) quantized values."""
        half = self._levels // 2
        return (digits.float() - half) / half

    def digits_to_index(self, digits: torch.Tensor) -> torch.Tensor:
        """(..., D) digits -> (...) mixed-radix index."""
        return (digits * self._basis).sum(-1)

    def index_to_digits(self, index: torch.Tensor) -> torch.Tensor:
        """(...) index -> (..., D) digits."""
        return (index.long().unsqueeze(-1) // self._basis) % self._levels.long()

    def values_to_index(self, values: torch.Tensor) -> torch.Tensor:
        return self.digits_to_index(self.values_to_digits(values))

    def index_to_values(self, index: torch.Tensor) -> torch.Tensor:
        return self.digits_to_values(self.index_to_digits(index))
