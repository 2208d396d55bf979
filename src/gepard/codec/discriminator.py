"""Multi-resolution spectrogram discriminator (UnivNet/Vocos style) for optional adversarial fine-tuning."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

RESOLUTIONS = ((256, 64), (512, 128), (1024, 256))  # (n_fft, hop)


class SpectrogramDiscriminator(nn.Module):
    """(B, T) audio -> score map and feature maps, from one STFT resolution's log magnitudes."""

    def __init__(self, n_fft: int, hop: int, channels: int = 16):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)
        self.convs = nn.ModuleList([
            nn.Conv2d(1, channels, (3, 9), stride=(1, 2), padding=(1, 4)),
            nn.Conv2d(channels, channels, (3, 9), stride=(1, 2), padding=(1, 4)),
            nn.Conv2d(channels, channels, (3, 9), stride=(1, 2), padding=(1, 4)),
            nn.Conv2d(channels, channels, (3, 3), padding=(1, 1)),
        ])
        self.out = nn.Conv2d(channels, 1, (3, 3), padding=(1, 1))

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        spec = torch.stft(audio.float(), self.n_fft, self.hop, window=self.window, return_complex=True).abs()
        x = torch.log(spec.clamp(min=1e-5)).transpose(1, 2)[:, None]  # (B, 1, frames, bins)
        features = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            features.append(x)
        return self.out(x), features


class MultiResolutionDiscriminator(nn.Module):
    def __init__(self, resolutions=RESOLUTIONS):
        super().__init__()
        self.discriminators = nn.ModuleList(SpectrogramDiscriminator(n, h) for n, h in resolutions)

    def forward(self, audio: torch.Tensor):
        return [d(audio) for d in self.discriminators]


def discriminator_loss(real, fake) -> torch.Tensor:
    """Least-squares GAN loss for D: real -> 1, fake -> 0."""
    return sum(((1 - r) ** 2).mean() + (f ** 2).mean() for (r, _), (f, _) in zip(real, fake)) / len(real)


def generator_losses(real, fake) -> tuple[torch.Tensor, torch.Tensor]:
    """(adversarial, feature matching) losses for the generator."""
    adv = sum(((1 - f) ** 2).mean() for f, _ in fake) / len(fake)
    fm = sum((fr.detach() - ff).abs().mean() for (_, rs), (_, fs) in zip(real, fake) for fr, ff in zip(rs, fs))
    return adv, fm / sum(len(fs) for _, fs in fake)
