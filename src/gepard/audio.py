"""Reading and writing audio: any format libsndfile knows, any rate, any channels -> 16 kHz mono."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

MAX_SECONDS = 3600.0  # longer inputs are refused before they are read into memory


class AudioError(ValueError):
    """A user-facing problem with an audio file; the message is one clear line."""


def load_audio(path: str | Path, sample_rate: int = 16000, max_seconds: float = MAX_SECONDS) -> np.ndarray:
    """Read `path` as float32 mono at `sample_rate`, shape (T,), values in [-1, 1]."""
    blocks = list(iter_audio(path, sample_rate, max_seconds=max_seconds))
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.float32)


def iter_audio(path: str | Path, sample_rate: int = 16000, block_seconds: float = 30.0,
               max_seconds: float = MAX_SECONDS):
    """Yield (n,) float32 mono blocks at `sample_rate`: bounded memory for files of any length."""
    info = audio_info(path, max_seconds)
    resampler = soxr.ResampleStream(info.samplerate, sample_rate, 1, dtype="float32", quality="HQ")
    try:
        blocks = sf.blocks(str(path), blocksize=max(1, int(block_seconds * info.samplerate)), dtype="float32",
                           always_2d=True)
        for block in blocks:
            yield _clip(resampler.resample_chunk(block.mean(axis=1), last=False))
    except Exception as e:
        raise AudioError(f"{path}: could not decode audio ({_first_line(e)})") from None
    yield _clip(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))


def audio_info(path: str | Path, max_seconds: float = MAX_SECONDS):
    """soundfile's info for `path`, or an AudioError saying in one line why it is not usable audio."""
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise AudioError(f"{path}: the file is empty")
    try:
        info = sf.info(str(path))
    except Exception as e:  # libsndfile's message names the real cause
        raise AudioError(f"{path}: not a readable audio file ({_first_line(e)})") from None
    if info.frames == 0 or info.samplerate <= 0:
        raise AudioError(f"{path}: the file holds no audio samples")
    if info.duration > max_seconds:
        raise AudioError(f"{path}: {info.duration:.0f} s of audio is longer than the limit of {max_seconds:.0f} s")
    return info


def _clip(audio: np.ndarray) -> np.ndarray:
    return np.clip(audio, -1.0, 1.0).astype(np.float32, copy=False)


def save_audio(path: str | Path, audio: np.ndarray, sample_rate: int = 16000) -> None:
    """Write (T,) float audio as 16-bit PCM; the format follows the suffix (.wav, .flac, .ogg)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    subtype = "PCM_16" if path.suffix.lower() in (".wav", ".flac") else None
    sf.write(str(path), np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0), sample_rate, subtype=subtype)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
