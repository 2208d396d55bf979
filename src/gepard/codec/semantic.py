"""Semantic distillation: codes that name the sound.

The codec's quantized values are trained to predict, frame by frame, what Whisper tiny.en's encoder hears at
that moment (Mimi and SpeechTokenizer distil a speech model into their first codebook the same way). Whisper's
encoder output is what its decoder reads words from, so codes that predict it carry the phonetic content a
speech LM has to learn to write. The teacher runs once per utterance, over the exact utterance (no 30 s
padding), and its 50 Hz frames are averaged in pairs onto the codec's 25 Hz frames.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

FEATURES_FILE = "whisper.f16"
WHISPER_HOP = 320  # samples per encoder frame at 16 kHz (50 frames/s)


class WhisperEncoder:
    """The encoder of the evaluation's Whisper tiny.en, per utterance (whisper_ear.py's PyTorch copy of it)."""

    def __init__(self, threads: int = 2):
        from gepard.codec.whisper_ear import WhisperEar

        torch.set_num_threads(threads)
        self.ear = WhisperEar.load()
        self.dim = self.ear.norm.normalized_shape[0]

    @torch.no_grad()
    def __call__(self, audio: np.ndarray, frame_samples: int) -> np.ndarray:
        """(T,) float32 at 16 kHz -> (ceil(T / frame_samples), 384) float16 features, one per codec frame."""
        per_frame = frame_samples // WHISPER_HOP  # teacher frames averaged into one codec frame
        frames = -(-len(audio) // frame_samples)
        out = []
        for start in range(0, len(audio), 30 * 16000):  # Whisper's encoder covers at most 30 s
            mel = self.ear.log_mel(torch.from_numpy(np.ascontiguousarray(audio[start: start + 30 * 16000]))[None])
            mel = mel[:, :, : mel.shape[2] - mel.shape[2] % 2]  # the encoder halves the mel frame rate
            out.append(self.ear.states(mel)[-1][0].numpy())
        hidden = np.concatenate(out)
        hidden = np.pad(hidden, ((0, max(0, frames * per_frame - len(hidden))), (0, 0)), mode="edge")
        return hidden[: frames * per_frame].reshape(frames, per_frame, -1).mean(1).astype(np.float16)


def build_feature_cache(audio_folder: str | Path, frame_samples: int, threads: int = 2) -> Path:
    """Whisper features for every utterance of an audio cache (dataset.build_audio_cache), aligned to its codec
    frames: audio_folder/whisper.f16 ((sum of frames, 384) float16) + whisper.json (frame offset per span)."""
    folder = Path(audio_folder)
    index_path = folder / "whisper.json"
    if index_path.exists():
        return folder
    index = json.loads((folder / "index.json").read_text())
    if index["sample_rate"] != 16000:
        raise ValueError(f"Whisper features need 16 kHz audio, the cache at {folder} is {index['sample_rate']} Hz")
    spans = index["spans"]
    audio = np.memmap(folder / "audio.int16", dtype=np.int16, mode="r")
    encoder = WhisperEncoder(threads)
    offsets, total = [], 0
    tmp = folder / (FEATURES_FILE + ".partial")
    with open(tmp, "wb") as f:
        for _, offset, n in tqdm(spans, desc="whisper features", unit="file"):
            clip = audio[offset: offset + n].astype(np.float32) / 32767
            features = encoder(clip, frame_samples)
            f.write(features.tobytes())
            offsets.append(total)
            total += len(features)
    tmp.rename(folder / FEATURES_FILE)
    index_path.write_text(json.dumps({"dim": encoder.dim, "frame_samples": frame_samples, "offsets": offsets,
                                      "frames": total}))
    return folder


def load_features(audio_folder: str | Path) -> tuple[np.ndarray, list[int], int]:
    """-> (frames, dim) float16 memmap, per-span frame offsets, samples per frame."""
    folder = Path(audio_folder)
    index = json.loads((folder / "whisper.json").read_text())
    features = np.memmap(folder / FEATURES_FILE, dtype=np.float16, mode="r").reshape(index["frames"], index["dim"])
    return features, index["offsets"], index["frame_samples"]


class SemanticHead(nn.Module):
    """(B, J, D) quantized values -> (B, J, dim) predicted teacher features, one frame at a time (so whatever
    it predicts must be in that frame's code).

    Targets are standardized with the training features' mean and std (`fit_targets`) before the cosine:
    raw Whisper features share one large direction (predicting their mean already scores cosine 0.39), which
    would leave little of the loss to what differs from frame to frame.
    """

    def __init__(self, code_dim: int, dim: int = 384, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(code_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, dim))
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    def fit_targets(self, features: np.ndarray, every: int = 10) -> None:
        """Set the standardization from (N, dim) training features (every `every`-th frame)."""
        sample = torch.from_numpy(np.asarray(features[::every], dtype=np.float32))
        self.mean.copy_(sample.mean(0))
        self.std.copy_(sample.std(0).clamp(min=1e-3))

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return self.net(values)

    def loss(self, values: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean (1 - cosine) between the prediction from (B, J, D) values and the standardized (B, J, dim)
        target, over the frames that have one (padding frames have an all-zero target)."""
        present = target.abs().sum(-1) > 0
        distance = 1 - F.cosine_similarity(self(values).float(), (target.float() - self.mean) / self.std, dim=-1)
        return (distance * present).sum() / present.sum().clamp(min=1)
