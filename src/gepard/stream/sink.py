"""Where `gepard say` puts audio: a file (written as generated, or at the end) or raw PCM on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import soundfile as sf


class AudioSink:
    """Opened lazily at the first chunk, so a request that fails before any audio leaves no file behind."""

    def __init__(self, out: str, sample_rate: int, write_as_generated: bool):
        self.out, self.sample_rate, self.live = out, sample_rate, write_as_generated
        self.file: sf.SoundFile | None = None
        self.chunks: list[np.ndarray] = []

    def write(self, chunk: np.ndarray) -> None:
        if self.out == "-":
            pcm = np.clip(np.rint(chunk * 32768), -32768, 32767)  # the scaling libsndfile uses for files
            sys.stdout.buffer.write(pcm.astype("<i2").tobytes())
            sys.stdout.buffer.flush()
        elif self.live:
            if self.file is None:
                Path(self.out).parent.mkdir(parents=True, exist_ok=True)
                self.file = sf.SoundFile(self.out, "w", self.sample_rate, 1, subtype="PCM_16")
            self.file.write(chunk)
            self.file.flush()
        else:
            self.chunks.append(chunk)

    def __enter__(self) -> "AudioSink":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.file is not None:
            self.file.close()
        elif exc_type is None and self.chunks and self.out != "-":
            Path(self.out).parent.mkdir(parents=True, exist_ok=True)
            sf.write(self.out, np.concatenate(self.chunks), self.sample_rate, subtype="PCM_16")
