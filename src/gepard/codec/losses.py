"""Spectral reconstruction losses: multi-resolution log-mel L1 + STFT (spectral convergence, log magnitude)."""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import nn

RESOLUTIONS = ((256, 64, 32), (512, 128, 64), (1024, 256, 80))  # (n_fft, hop, n_mels)


@functools.lru_cache(maxsize=None)
def mel_filterbank(n_fft: int, n_mels: int, sample_rate: int = 16000) -> np.ndarray:
    """(n_mels, n_fft // 2 + 1) triangular filters, evenly spaced on the HTK mel scale."""
    to_mel = lambda f: 2595.0 * np.log10(1.0 + f / 700.0)  # noqa: E731
    to_hz = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)  # noqa: E731
    hz = to_hz(np.linspace(to_mel(0.0), to_mel(sample_rate / 2), n_mels + 2))
    bins = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    lo, mid, hi = hz[:-2, None], hz[1:-1, None], hz[2:, None]
    fb = np.maximum(0.0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))
    return fb.astype(np.float32)


def phase_difference_loss(pred: torch.Tensor, target: torch.Tensor, dim: int) -> torch.Tensor:
    """Magnitude-weighted 1 - cos of the error in phase differences along `dim` of two complex STFTs.

    Along time this is the instantaneous frequency, along frequency the group delay (APNet's phase losses,
    without the absolute phase, which the codes cannot determine). Weights: the target's energy in both bins.
    """
    def advance(z: torch.Tensor) -> torch.Tensor:
        n = z.shape[dim]
        return z.narrow(dim, 1, n - 1) * z.narrow(dim, 0, n - 1).conj()

    p, t = advance(pred), advance(target)
    eps = 1e-4 * t.abs().amax().clamp(min=1e-8)
    cos = (p * t.conj()).real / (p.abs() * t.abs() + eps)
    weight = t.abs()
    return (weight * (1 - cos)).sum() / weight.sum().clamp(min=1e-8)


class SpectralLoss(nn.Module):
    """(B, T) prediction, (B, T) target -> scalar loss and its parts (all fp32).

    Multi-resolution log-mel L1 + spectral convergence + log magnitude, and (phase_weight > 0) the
    instantaneous-frequency and group-delay losses that reward coherent harmonics.
    """

    def __init__(self, sample_rate: int = 16000, resolutions=RESOLUTIONS, phase_weight: float = 0.0):
        super().__init__()
        self.resolutions, self.phase_weight = resolutions, phase_weight
        for n_fft, _, n_mels in resolutions:
            self.register_buffer(f"mel_{n_fft}", torch.from_numpy(mel_filterbank(n_fft, n_mels, sample_rate)),
                                 persistent=False)
            self.register_buffer(f"win_{n_fft}", torch.hann_window(n_fft), persistent=False)

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        pred, target = pred.float(), target.float()
        mel = sc = logmag = phase = 0.0
        for n_fft, hop, _ in self.resolutions:
            win, fb = getattr(self, f"win_{n_fft}"), getattr(self, f"mel_{n_fft}")
            pc = torch.stft(pred, n_fft, hop, window=win, return_complex=True)
            tc = torch.stft(target, n_fft, hop, window=win, return_complex=True)
            if self.phase_weight:
                phase = phase + phase_difference_loss(pc, tc, -1) + phase_difference_loss(pc, tc, -2)
            p, t = pc.abs(), tc.abs()
            sc = sc + torch.linalg.norm(t - p) / torch.linalg.norm(t).clamp(min=1e-5)
            logmag = logmag + (torch.log(p + 1e-5) - torch.log(t + 1e-5)).abs().mean()
            mel = mel + (torch.log(fb @ p + 1e-5) - torch.log(fb @ t + 1e-5)).abs().mean()
        n = len(self.resolutions)
        parts = {"mel": mel.item() / n, "sc": sc.item() / n, "logmag": logmag.item() / n}
        if self.phase_weight:
            parts["phase"] = phase.item() / n
        return (mel + sc + logmag + self.phase_weight * phase) / n, parts
