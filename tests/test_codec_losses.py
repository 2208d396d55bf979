import math

import torch

from gepard.codec.losses import SpectralLoss, mel_filterbank, phase_difference_loss


def tone(freq: float, seconds: float = 1.0, phase: float = 0.0) -> torch.Tensor:
    t = torch.arange(int(16000 * seconds)) / 16000
    return torch.sin(2 * math.pi * freq * t + phase)[None]


def test_identical_signals_cost_nothing():
    loss, parts = SpectralLoss(phase_weight=1.0)(tone(220), tone(220))
    assert loss.item() < 1e-3 and set(parts) == {"mel", "sc", "logmag", "phase"}


def test_phase_loss_ignores_a_constant_phase_offset_but_not_a_frequency_error():
    stft = lambda x: torch.stft(x, 512, 128, window=torch.hann_window(512), return_complex=True)  # noqa: E731
    same = phase_difference_loss(stft(tone(220, phase=1.3)), stft(tone(220)), dim=-1)
    near = phase_difference_loss(stft(tone(226)), stft(tone(220)), dim=-1)
    far = phase_difference_loss(stft(tone(240)), stft(tone(220)), dim=-1)
    assert same.item() < 0.02 < near.item() < 0.1 < 0.3 < far.item()  # grows with the frequency error


def test_mel_filterbank_covers_the_spectrum():
    fb = mel_filterbank(512, 64)
    assert fb.shape == (64, 257) and (fb.sum(0)[2:-2] > 0).all() and fb.max() <= 1.0
