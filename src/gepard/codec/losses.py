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


class SpectralLoss(nn.Module):
    """(B, T) prediction, (B, T) target -> scalar loss and its parts (all fp32)."""

    def __init__(self, sample_rate: int = 16000, resolutions=RESOLUTIONS):
        super().__init__()
        self.resolutions = resolutions
        for n_fft, _, n_mels in resolutions:
            self.register_buffer(f"mel_{n_fft}", torch.from_numpy(mel_filterbank(n_fft, n_mels, sample_rate)),
                                 persistent=False)
            self.register_buffer(f"win_{n_fft}", torch.hann_window(n_fft), persistent=False)

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        pred, target = pred.float(), target.float()
        mel = sc = logmag = 0.0
        for n_fft, hop, _ in self.resolutions:
            win, fb = getattr(self, f"win_{n_fft}"), getattr(self, f"mel_{n_fft}")
            p = torch.stft(pred, n_fft, hop, window=win, return_complex=True).abs()
            t = torch.stft(target, n_fft, hop, window=win, return_complex=True).abs()
            sc = sc + torch.linalg.norm(t - p) / torch.linalg.norm(t).clamp(min=1e-5)
            logmag = logmag + (torch.log(p + 1e-5) - torch.log(t + 1e-5)).abs().mean()
            mel = mel + (torch.log(fb @ p + 1e-5) - torch.log(fb @ t + 1e-5)).abs().mean()
        n = len(self.resolutions)
        parts = {"mel": mel.item() / n, "sc": sc.item() / n, "logmag": logmag.item() / n}
        return (mel + sc + logmag) / n, parts
