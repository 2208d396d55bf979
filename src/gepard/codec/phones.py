"""Phone supervision: codes that name the phone sounding in their frame.

The phone-track training data (scripts/flite_track.py) says which flite phone sounds at the centre of every
25 Hz frame of every clip: the manifest's `text` is that track. A small per-frame head must read the phone from
the frame's quantized values alone, so the codes carry what the speech LM reads from its track (the LM's
audio frame j sits a fixed distance after track entry j) and what a listener needs to hear the words.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gepard.data.manifests import Utterance
from gepard.lm.track import PAD, PHONES

LABELS_FILE = "phones.i16"
PHONE_IDS = {p: i + 1 for i, p in enumerate(PHONES)}  # label 0: no phone in the frame


def phone_labels(track: str, frames: int) -> np.ndarray:
    """A padded track -> (frames,) int16 labels: 1 + the phone's index in PHONES, 0 where the clip has no phone."""
    words = track.split()
    unknown = sorted(set(words) - set(PHONE_IDS) - {PAD})
    if unknown:
        raise ValueError(f"--phone-weight needs phone-track manifests (scripts/flite_track.py); this text is not "
                         f"one: {' '.join(unknown[:5])}")
    labels = np.zeros(frames, dtype=np.int16)
    kept = [PHONE_IDS.get(w, 0) for w in words[:frames]]
    labels[: len(kept)] = kept
    return labels


def build_phone_cache(audio_folder: str | Path, utterances: list[Utterance], frame_samples: int) -> Path:
    """Phone labels for every utterance of an audio cache (dataset.build_audio_cache), one per codec frame:
    audio_folder/phones.i16 ((sum of frames,) int16) + phones.json (frame offset per span); rebuilt when the
    utterances' tracks change."""
    folder = Path(audio_folder)
    index_path = folder / "phones.json"
    text = {u.id: u.text for u in utterances}
    digest = hashlib.sha1(json.dumps(sorted(text.items())).encode()).hexdigest()[:12]  # same audio, new tracks
    if index_path.exists() and json.loads(index_path.read_text()).get("tracks") == digest:
        return folder
    labels, offsets, total = [], [], 0
    for uid, _, n in json.loads((folder / "index.json").read_text())["spans"]:
        labels.append(phone_labels(text[uid], -(-n // frame_samples)))
        offsets.append(total)
        total += len(labels[-1])
    np.concatenate(labels).tofile(folder / LABELS_FILE)
    index_path.write_text(json.dumps({"frame_samples": frame_samples, "offsets": offsets, "frames": total,
                                      "tracks": digest}))
    return folder


def load_phones(audio_folder: str | Path) -> tuple[np.ndarray, list[int], int]:
    """-> (frames,) int16 labels, per-span frame offsets, samples per frame."""
    folder = Path(audio_folder)
    index = json.loads((folder / "phones.json").read_text())
    return np.fromfile(folder / LABELS_FILE, dtype=np.int16), index["offsets"], index["frame_samples"]


class PhoneHead(nn.Module):
    """(B, J, D) quantized values -> (B, J, 1 + len(PHONES)) phone logits, one frame at a time (so the phone
    must be in that frame's code). Class 0 stands for "no phone" and is never a target."""

    def __init__(self, code_dim: int, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(code_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, 1 + len(PHONES)))

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return self.net(values)

    def loss(self, values: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return phone_loss(self(values), target)

    @torch.no_grad()
    def accuracy(self, values: torch.Tensor, target: torch.Tensor) -> float:
        return phone_accuracy(self(values), target)


def phone_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B, J, 1 + len(PHONES)) logits, (B, J) int labels -> mean cross-entropy over the frames with a phone."""
    return F.cross_entropy(logits.float().transpose(1, 2), target.long(), ignore_index=0)


def phone_accuracy(logits: torch.Tensor, target: torch.Tensor) -> float:
    """Share of the (B, J) labelled frames (label > 0) whose phone the (B, J, C) logits rank first."""
    present = target > 0
    return ((logits.argmax(-1) == target) & present).sum().item() / max(1, present.sum().item())
