"""Training audio for the codec: every utterance decoded once into one int16 cache, cropped at random."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.audio import AudioError, load_audio
from gepard.data.manifests import Utterance


def build_audio_cache(utterances: list[Utterance], root: str | Path, sample_rate: int = 16000) -> Path:
    """Decode all utterances once into root/audio-<hash>/ (audio.int16 + index.json); returns that folder."""
    key = hashlib.sha1(json.dumps([[u.id, str(u.audio)] for u in utterances] + [sample_rate]).encode()).hexdigest()
    folder = Path(root) / f"audio-{key[:12]}"
    index_path = folder / "index.json"
    if index_path.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    spans, offset, skipped = [], 0, 0
    tmp = folder / "audio.int16.partial"
    with open(tmp, "wb") as f:
        for u in tqdm(utterances, desc="decoding audio", unit="file"):
            try:
                audio = load_audio(u.audio, sample_rate)
            except AudioError:
                skipped += 1
                continue
            f.write((audio * 32767).astype(np.int16).tobytes())
            spans.append([u.id, offset, len(audio)])
            offset += len(audio)
    if not spans:
        raise ValueError(f"none of the {len(utterances)} training files could be read as audio")
    tmp.rename(folder / "audio.int16")
    index_path.write_text(json.dumps({"sample_rate": sample_rate, "spans": spans, "skipped": skipped}))
    return folder


def cache_summary(folder: str | Path) -> dict:
    """{"utterances", "hours"} of an audio cache."""
    index = json.loads((Path(folder) / "index.json").read_text())
    return {"utterances": len(index["spans"]),
            "hours": sum(n for _, _, n in index["spans"]) / index["sample_rate"] / 3600}


class RandomCrops:
    """Random (batch, length) crops from an audio cache, longer utterances drawn more often.

    With `frame_targets` ({name: (per-frame array, per-span frame offsets, samples per frame)}, e.g. from
    semantic.load_features or phones.load_phones), crops start on codec-frame boundaries and come with the
    targets of their own frames.
    """

    def __init__(self, folder: str | Path, length: int, seed: int = 0, min_length: int = 8000,
                 frame_targets: dict[str, tuple[np.ndarray, list[int], int]] | None = None):
        folder = Path(folder)
        index = json.loads((folder / "index.json").read_text())
        self.audio = np.memmap(folder / "audio.int16", dtype=np.int16, mode="r")
        kept = [i for i, (_, _, n) in enumerate(index["spans"]) if n >= min_length]
        self.spans = np.array([index["spans"][i][1:] for i in kept], dtype=np.int64).reshape(-1, 2)
        self.length = length
        self.rng = np.random.default_rng(seed)
        weights = self.spans[:, 1].astype(np.float64)
        self.p = weights / weights.sum()
        self.targets = {name: (array, np.array(offsets, dtype=np.int64)[kept])
                        for name, (array, offsets, _) in (frame_targets or {}).items()}
        self.frame_samples = {fs for _, _, fs in (frame_targets or {}).values()}.pop() if frame_targets else 1

    def batch(self, batch_size: int, augment: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(B, length) float32 audio (short utterances zero-padded, gain randomized in augment mode) and
        {name: (B, length // frame_samples, ...) targets} (zero past an utterance's end)."""
        fs = self.frame_samples
        out = np.zeros((batch_size, self.length), dtype=np.float32)
        targets = {name: np.zeros((batch_size, self.length // fs, *array.shape[1:]), dtype=array.dtype)
                   for name, (array, _) in self.targets.items()}
        for i, j in enumerate(self.rng.choice(len(self.spans), size=batch_size, p=self.p)):
            offset, n = self.spans[j]
            start = self.rng.integers(0, max(1, (n - self.length) // fs + 1)) * fs
            for name, (array, offsets) in self.targets.items():
                first, count = offsets[j] + start // fs, min(self.length // fs, -(-(n - start) // fs))
                targets[name][i, :count] = array[first: first + count]
            clip = self.audio[offset + start: offset + min(n, start + self.length)].astype(np.float32) / 32767
            out[i, : len(clip)] = clip
        if augment:
            out *= 10 ** (self.rng.uniform(-12, 3, size=(batch_size, 1)) / 20)
        return torch.from_numpy(np.clip(out, -1, 1)), {k: torch.from_numpy(v) for k, v in targets.items()}
