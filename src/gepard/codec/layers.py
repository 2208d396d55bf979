"""Causal building blocks whose streaming state makes chunked and offline runs identical.

Every block takes a time-major tensor (B, T, C) and a state; offline use passes the
initial (zero) state, streaming use carries the returned state into the next chunk.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class CausalDepthwiseConv(nn.Module):
    """Depthwise conv over time that sees only the current and the k-1 previous steps."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels)

    def initial_state(self, batch: int, device=None, dtype=None) -> torch.Tensor:
        """(B, C, k-1) zeros: the past before the first step."""
        return torch.zeros(batch, self.conv.in_channels, self.kernel_size - 1, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, C), state (B, C, k-1) -> y (B, T, C), new state."""
        xt = torch.cat([state.to(x.dtype), x.transpose(1, 2)], dim=2)
        if x.shape[1] <= 8:  # a streaming step: a direct sum over the taps is ~3x faster than the conv call
            y = torch.einsum("bctk,ck->btc", xt.unfold(2, self.kernel_size, 1), self.conv.weight[:, 0]) + self.conv.bias
        else:
            y = self.conv(xt).transpose(1, 2)
        return y, xt[:, :, xt.shape[2] - (self.kernel_size - 1):]


class ConvNeXtBlock(nn.Module):
    """Causal ConvNeXt block: depthwise conv, LayerNorm, MLP, layer scale, residual."""

    def __init__(self, dim: int, kernel_size: int = 7, mlp_ratio: int = 3):
        super().__init__()
        self.dwconv = CausalDepthwiseConv(dim, kernel_size)
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * mlp_ratio)
        self.fc2 = nn.Linear(dim * mlp_ratio, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, C) -> (B, T, C), new conv state."""
        h, state = self.dwconv(x, state)
        h = self.fc2(F.gelu(self.fc1(self.norm(h))))
        return x + self.gamma * h, state


class ConvNeXtStack(nn.Module):
    """A stack of causal ConvNeXt blocks; its state is the list of the blocks' conv states."""

    def __init__(self, dim: int, depth: int, kernel_size: int = 7):
        super().__init__()
        self.blocks = nn.ModuleList(ConvNeXtBlock(dim, kernel_size) for _ in range(depth))

    def initial_state(self, batch: int, device=None, dtype=None) -> list[torch.Tensor]:
        return [b.dwconv.initial_state(batch, device, dtype) for b in self.blocks]

    def forward(self, x: torch.Tensor, state: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        new_state = []
        for block, s in zip(self.blocks, state):
            x, s = block(x, s)
            new_state.append(s)
        return x, new_state


def causal_log_spectrogram(audio: torch.Tensor, history: torch.Tensor, n_fft: int, hop: int):
    """(B, T) audio, (B, n_fft - hop) preceding samples -> (B, T // hop, n_fft // 2 + 1) log magnitudes,
    new history. Frame k covers samples [(k+1)*hop - n_fft, (k+1)*hop): it never looks ahead.
    """
    x = torch.cat([history, audio.float()], dim=1)
    frames = x.unfold(1, n_fft, hop) * torch.hann_window(n_fft, device=audio.device)
    return torch.log(torch.fft.rfft(frames, dim=-1).abs() + 1e-5), x[:, x.shape[1] - (n_fft - hop):]


class ISTFTHead(nn.Module):
    """Hidden frames -> waveform by inverse FFT and causal overlap-add.

    Frame k (hop-rate) contributes to samples [(k+1)*hop - n_fft, (k+1)*hop); a sample is
    complete once the n_fft/hop - 1 frames after its own have been added. The state is the
    (B, n_fft - hop) tail still waiting for those frames.
    """

    def __init__(self, dim: int, n_fft: int, hop: int):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.proj = nn.Linear(dim, n_fft + 2)
        self.register_buffer("window", torch.hann_window(n_fft), persistent=False)

    def initial_state(self, batch: int, device=None) -> torch.Tensor:
        return torch.zeros(batch, self.n_fft - self.hop, device=device)

    def frames(self, x: torch.Tensor) -> torch.Tensor:
        """(B, K, C) -> (B, K, n_fft) windowed time-domain frames (fp32)."""
        mag, phase = self.proj(x).float().chunk(2, dim=-1)
        spec = torch.polar(torch.exp(mag.clamp(max=8.0)), phase)
        return torch.fft.irfft(spec, n=self.n_fft, dim=-1) * self.window

    def forward(self, x: torch.Tensor, tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, K, C), tail (B, n_fft-hop) -> samples (B, K*hop) now complete, new tail."""
        frames = self.frames(x)
        batch, k, _ = frames.shape
        length = (k - 1) * self.hop + self.n_fft
        buf = F.fold(frames.transpose(1, 2), (1, length), (1, self.n_fft), stride=(1, self.hop)).view(batch, length)
        buf = torch.cat([buf[:, : tail.shape[1]] + tail, buf[:, tail.shape[1]:]], dim=1)
        return buf[:, : k * self.hop], buf[:, k * self.hop:]
