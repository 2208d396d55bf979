"""A phone listener: a frozen ear that tells the codec's decoder which sounds it blurred.

A small convolutional phone recognizer is trained once on original speech with flite phone labels (one per
25 Hz codec frame, phones.py). While the decoder trains, the listener hears both the original crop and its
resynthesis; the KL divergence between the phone beliefs it forms from each is a perceptual loss on
intelligibility (the decoder is pushed to make every frame sound like the same phone as the original), not on
spectral detail. It needs no labels at codec-training time, and the encoder can stay frozen, so every code
keeps its meaning and a speech LM trained on them stays valid.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm import tqdm

from gepard.codec.dataset import RandomCrops
from gepard.codec.losses import mel_filterbank
from gepard.codec.phones import phone_accuracy, phone_loss
from gepard.lm.track import PHONES
from gepard.precision import autocast


@dataclass
class ListenerConfig:
    frame_samples: int = 640  # one phone belief per codec frame
    n_fft: int = 400
    hop: int = 160
    n_mels: int = 80
    channels: int = 256
    fine_depth: int = 3  # residual blocks at the mel frame rate (kernel 5)
    frame_depth: int = 3  # residual blocks at the codec frame rate (kernel 3)


class Residual(nn.Module):
    """(B, C, N) -> (B, C, N): x + pointwise(GELU(conv_k(norm(x))))."""

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.net = nn.Sequential(nn.GroupNorm(1, channels), nn.Conv1d(channels, channels, kernel, padding=kernel // 2),
                                 nn.GELU(), nn.Conv1d(channels, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class PhoneListener(nn.Module):
    """(B, T) audio at 16 kHz -> (B, T // frame_samples, 1 + len(PHONES)) phone logits (non-causal: it hears
    a few frames either side). Class 0 stands for "no phone" and is never a target."""

    def __init__(self, cfg: ListenerConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or ListenerConfig()
        self.register_buffer("mel", torch.from_numpy(mel_filterbank(cfg.n_fft, cfg.n_mels)), persistent=False)
        self.register_buffer("window", torch.hann_window(cfg.n_fft), persistent=False)
        ch = cfg.channels
        self.fine = nn.Sequential(nn.Conv1d(cfg.n_mels, ch, 5, padding=2),
                                  *(Residual(ch, 5) for _ in range(cfg.fine_depth)))
        self.frame = nn.Sequential(*(Residual(ch, 3) for _ in range(cfg.frame_depth)), nn.GroupNorm(1, ch))
        self.out = nn.Linear(ch, 1 + len(PHONES))

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        frames = audio.shape[1] // cfg.frame_samples
        per_frame = cfg.frame_samples // cfg.hop
        spec = torch.stft(audio.float(), cfg.n_fft, cfg.hop, window=self.window, return_complex=True).abs()
        logmel = torch.log(self.mel @ spec[:, :, : frames * per_frame] + 1e-5)  # (B, n_mels, frames * per_frame)
        x = F.avg_pool1d(self.fine(logmel), per_frame)  # (B, C, frames)
        return self.out(self.frame(x).transpose(1, 2))

    @torch.no_grad()
    def log_beliefs(self, audio: np.ndarray, frames: int) -> torch.Tensor:
        """(T,) audio -> (frames, 1 + len(PHONES)) log phone beliefs of its first `frames` frames (audio shorter
        than that is padded with silence)."""
        padded = np.pad(audio, (0, max(0, frames * self.cfg.frame_samples - len(audio))))
        return F.log_softmax(self(torch.from_numpy(padded.astype(np.float32))[None])[0].float(), -1)[:frames]

    def loss(self, audio: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return phone_loss(self(audio), target)

    @torch.no_grad()
    def accuracy(self, audio: torch.Tensor, target: torch.Tensor) -> float:
        return phone_accuracy(self(audio), target)

    def divergence(self, heard: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
        """Mean over frames of KL(beliefs from the original || beliefs from what was heard), (B, T) each; the
        gradient reaches `heard` only."""
        with torch.no_grad():
            target = F.log_softmax(self(original).float(), -1)
        heard_beliefs = F.log_softmax(self(heard).float(), -1)
        return F.kl_div(heard_beliefs, target, log_target=True, reduction="none").sum(-1).mean()

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps({"model_type": "gepard-phone-listener", **asdict(self.cfg)},
                                                     indent=2))
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(path / "model.safetensors"))

    @classmethod
    def load(cls, path: str | Path) -> "PhoneListener":
        """A saved listener, frozen and in eval mode."""
        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no phone listener at {path} (make one with `gepard train listener`)")
        fields = json.loads((path / "config.json").read_text())
        fields.pop("model_type", None)
        model = cls(ListenerConfig(**fields))
        model.load_state_dict(load_file(str(path / "model.safetensors")))
        return model.eval().requires_grad_(False)


def train_listener(train: RandomCrops, val: RandomCrops, out: str | Path, steps: int = 1500, batch_size: int = 32,
                   lr: float = 1e-3, seed: int = 0, cfg: ListenerConfig | None = None) -> dict[str, float]:
    """Train a listener on phone-labelled crops (RandomCrops with frame_targets {"phones": ...}), save it to
    `out`; returns its held-out {"val_loss", "val_accuracy"} on 64 fixed crops."""
    torch.manual_seed(seed)
    model = PhoneListener(cfg or ListenerConfig(frame_samples=train.frame_samples))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    val_audio, val_targets = val.batch(64, augment=False)
    bar = tqdm(range(steps), desc="listener", unit="step")
    for _ in bar:
        audio, targets = train.batch(batch_size)
        with autocast():
            loss = model.loss(audio, targets["phones"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    with torch.no_grad(), autocast():
        result = {"val_loss": model.loss(val_audio, val_targets["phones"]).item(),
                  "val_accuracy": model.accuracy(val_audio, val_targets["phones"])}
    model.save(out)
    (Path(out) / "metrics.json").write_text(json.dumps(result, indent=2))
    return result
