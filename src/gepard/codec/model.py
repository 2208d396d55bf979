"""The Gepard codec: causal encoder -> FSQ (one index per frame) -> causal streaming decoder."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from gepard.codec.fsq import FSQ
from gepard.codec.layers import ConvNeXtStack, ISTFTHead, causal_log_spectrogram


@dataclass
class CodecConfig:
    sample_rate: int = 16000
    hop: int = 160  # samples per fine (STFT) step
    n_fft: int = 640
    stride: int = 4  # fine steps per codec frame: 16000 / (160 * 4) = 25 frames/s
    fine_dim: int = 256
    frame_dim: int = 384
    fine_depth: int = 4
    frame_depth: int = 6
    kernel_size: int = 7
    levels: list[int] = field(default_factory=lambda: [8, 8, 8, 5, 5, 5])

    @property
    def samples_per_frame(self) -> int:
        return self.hop * self.stride

    @property
    def frame_rate(self) -> float:
        return self.sample_rate / self.samples_per_frame


class Encoder(nn.Module):
    """(B, T) waveform -> (B, T // samples_per_frame, len(levels)) pre-quantization latents."""

    def __init__(self, c: CodecConfig):
        super().__init__()
        self.c = c
        self.inp = nn.Linear(c.n_fft // 2 + 1, c.fine_dim)
        self.fine = ConvNeXtStack(c.fine_dim, c.fine_depth, c.kernel_size)
        self.down = nn.Linear(c.fine_dim * c.stride, c.frame_dim)
        self.frame = ConvNeXtStack(c.frame_dim, c.frame_depth, c.kernel_size)
        self.norm = nn.LayerNorm(c.frame_dim)
        self.out = nn.Linear(c.frame_dim, len(c.levels))

    def initial_state(self, batch: int, device=None) -> dict:
        return {
            "history": torch.zeros(batch, self.c.n_fft - self.c.hop, device=device),
            "fine": self.fine.initial_state(batch, device),
            "frame": self.frame.initial_state(batch, device),
        }

    def step(self, audio: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        """(B, J * samples_per_frame) -> (B, J, D) latents, new state (for long inputs in chunks)."""
        c, batch = self.c, audio.shape[0]
        spec, history = causal_log_spectrogram(audio, state["history"], c.n_fft, c.hop)
        x, fine_state = self.fine(self.inp(spec.to(self.inp.weight.dtype)), state["fine"])
        x = self.down(x.reshape(batch, -1, c.stride * c.fine_dim))
        x, frame_state = self.frame(x, state["frame"])
        return self.out(self.norm(x)), {"history": history, "fine": fine_state, "frame": frame_state}

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.step(audio, self.initial_state(audio.shape[0], audio.device))[0]


class Decoder(nn.Module):
    """(B, J, len(levels)) quantized values -> (B, J * samples_per_frame) waveform, streamable."""

    def __init__(self, c: CodecConfig):
        super().__init__()
        self.c = c
        self.inp = nn.Linear(len(c.levels), c.frame_dim)
        self.frame = ConvNeXtStack(c.frame_dim, c.frame_depth, c.kernel_size)
        self.up = nn.Linear(c.frame_dim, c.fine_dim * c.stride)
        self.fine = ConvNeXtStack(c.fine_dim, c.fine_depth, c.kernel_size)
        self.norm = nn.LayerNorm(c.fine_dim)
        self.head = ISTFTHead(c.fine_dim, c.n_fft, c.hop)

    def initial_state(self, batch: int, device=None) -> dict:
        """Everything the decoder remembers between chunks (conv states in the weights' dtype); `skip` drops
        the pre-roll."""
        dtype = self.inp.weight.dtype
        return {
            "frame": self.frame.initial_state(batch, device, dtype),
            "fine": self.fine.initial_state(batch, device, dtype),
            "tail": self.head.initial_state(batch, device),
            "skip": self.c.n_fft - self.c.hop,
        }

    def step(self, values: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        """(B, J, D) values -> (B, n) samples that are final now, new state."""
        c, batch = self.c, values.shape[0]
        x, frame_state = self.frame(self.inp(values.to(self.inp.weight.dtype)), state["frame"])
        x = self.up(x).reshape(batch, -1, c.fine_dim)
        x, fine_state = self.fine(x, state["fine"])
        audio, tail = self.head(self.norm(x), state["tail"])
        skip = min(state["skip"], audio.shape[1])
        new_state = {"frame": frame_state, "fine": fine_state, "tail": tail, "skip": state["skip"] - skip}
        return audio[:, skip:], new_state

    def flush(self, state: dict) -> torch.Tensor:
        """(B, n) the last samples, which no further frame will complete."""
        return state["tail"][:, state["skip"]:]

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        state = self.initial_state(values.shape[0], values.device)
        audio, state = self.step(values, state)
        return torch.cat([audio, self.flush(state)], dim=1)


class Codec(nn.Module):
    """16 kHz mono speech <-> one FSQ index per frame."""

    def __init__(self, config: CodecConfig | None = None):
        super().__init__()
        self.config = config or CodecConfig()
        self.encoder = Encoder(self.config)
        self.fsq = FSQ(self.config.levels)
        self.decoder = Decoder(self.config)

    @property
    def codebook_size(self) -> int:
        return self.fsq.codebook_size

    @property
    def bitrate(self) -> float:
        """Bits per second of audio: frame rate x log2(codebook size)."""
        return self.config.frame_rate * math.log2(self.codebook_size)

    def pad(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, T') zero-padded to whole frames."""
        spf = self.config.samples_per_frame
        return F.pad(audio, (0, (-audio.shape[1]) % spf))

    def quantize(self, audio: torch.Tensor, rounded: bool = True) -> torch.Tensor:
        """(B, T) -> (B, J, D) quantized values (straight-through for training); with rounded=False the values
        before rounding, which no code can carry (to measure what the rounding costs)."""
        latents = self.encoder(self.pad(audio))
        return self.fsq(latents) if rounded else self.fsq.unrounded(latents)

    @torch.inference_mode()
    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, T) waveform in [-1, 1] -> (B, ceil(T / samples_per_frame)) int64 codes."""
        return self.fsq.values_to_index(self.quantize(audio))

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """(B, J) codes -> (B, J * samples_per_frame) float32 waveform."""
        return self.decoder(self.fsq.index_to_values(codes)).float()

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, T') reconstruction for training (T' = T padded to whole frames)."""
        return self.decoder(self.quantize(audio))

    def stream(self, batch: int = 1) -> "StreamingDecoder":
        return StreamingDecoder(self, batch)

    def fingerprint(self) -> str:
        """A short hash of the config and the encoder's bf16 weights, which decide what each code means: the
        same for every load of one saved codec (and after a decoder-only fine-tune), so a speech LM can name
        the codes it was trained on."""
        digest = hashlib.sha256(json.dumps(asdict(self.config), sort_keys=True).encode())
        for name, tensor in sorted(self.encoder.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().to(torch.bfloat16).cpu().view(torch.int16).numpy().tobytes())
        return digest.hexdigest()[:16]

    def save_pretrained(self, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps({"model_type": "gepard-codec", **asdict(self.config)}, indent=2))
        save_file({k: v.to(dtype).contiguous() for k, v in self.state_dict().items()}, str(path / "model.safetensors"))

    @classmethod
    def from_pretrained(cls, path: str | Path, dtype: torch.dtype = torch.float32) -> "Codec":
        path = Path(path)
        raw = json.loads((path / "config.json").read_text())
        raw.pop("model_type", None)
        model = cls(CodecConfig(**raw))
        model.load_state_dict({k: v.to(dtype) for k, v in load_file(str(path / "model.safetensors")).items()})
        return model.to(dtype).eval()


class StreamingDecoder:
    """Stateful decode: feed codes in any chunking, get exactly the offline samples."""

    def __init__(self, codec: Codec, batch: int = 1):
        self.codec = codec
        self.state = codec.decoder.initial_state(batch, next(codec.parameters()).device)

    def values(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, n) integer codes or (B, n, D) FSQ values (gepard/codec/render.py) -> (B, n, D) decoder input."""
        return frames if frames.is_floating_point() else self.codec.fsq.index_to_values(frames)

    @torch.inference_mode()
    def push(self, frames: torch.Tensor) -> torch.Tensor:
        """(B, n) codes or (B, n, D) values -> (B, m) samples final so far (m = 0 .. n * samples_per_frame)."""
        audio, self.state = self.codec.decoder.step(self.values(frames), self.state)
        return audio.float()

    @staticmethod
    @torch.inference_mode()
    def push_many(decoders: list["StreamingDecoder"], frames: torch.Tensor) -> torch.Tensor:
        """One push for several single-stream decoders at once: (B, n) codes or (B, n, D) values, row i for
        decoders[i] -> (B, m).

        The decoders must be at the same point of their pre-roll (equal `state["skip"]`); each keeps its state.
        """
        if len({d.state["skip"] for d in decoders}) > 1:
            raise ValueError("decoders at different pre-roll points cannot push together")
        codec = decoders[0].codec
        audio, state = codec.decoder.step(decoders[0].values(frames), stack([d.state for d in decoders]))
        for decoder, row in zip(decoders, unstack(state, len(decoders))):
            decoder.state = row
        return audio.float()

    @torch.inference_mode()
    def flush(self) -> torch.Tensor:
        """(B, m) the remaining tail; call once at the end of the stream."""
        return self.codec.decoder.flush(self.state).float()


def stack(states: list):
    """Decoder states (dicts/lists of (1, ...) tensors, equal plain values) -> one batched state."""
    first = states[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(states)
    if isinstance(first, dict):
        return {k: stack([s[k] for s in states]) for k in first}
    if isinstance(first, list):
        return [stack(list(parts)) for parts in zip(*states)]
    return first


def unstack(state, n: int) -> list:
    """The inverse of `stack`: a batched state -> n single-row states."""
    if isinstance(state, torch.Tensor):
        return list(state.split(1))
    if isinstance(state, dict):
        rows = {k: unstack(v, n) for k, v in state.items()}
        return [{k: rows[k][i] for k in state} for i in range(n)]
    if isinstance(state, list):
        rows = [unstack(v, n) for v in state]
        return [[r[i] for r in rows] for i in range(n)]
    return [state] * n
