"""Speaker similarity: cosine of resemblyzer (GE2E) d-vectors.

Audio is float32 (T,) mono at 16 kHz. The encoder weights ship inside the resemblyzer wheel; nothing is
downloaded. Torch runs with the caller's thread setting (torch.set_num_threads).

Short or silent clips: resemblyzer's preprocessing normalizes volume and cuts silences, which can leave
nothing. Then the raw clip (volume-normalized the same way) is embedded instead. If that still holds less
than MIN_SECONDS of audio, or the clip is all zeros, the embedding is the zero vector: no speaker can be
judged from it, and `cosine` with a zero vector is 0.0, so broken outputs score as dissimilar rather than
as whatever a repeated fragment happens to resemble.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

SAMPLE_RATE = 16000
EMBED_DIM = 256
MIN_SECONDS = 0.3


class SpeakerEncoder:
    """resemblyzer's VoiceEncoder on CPU."""

    def __init__(self):
        with warnings.catch_warnings():  # webrtcvad (a resemblyzer dependency) imports pkg_resources
            warnings.filterwarnings("ignore", message="pkg_resources is deprecated")
            from resemblyzer import VoiceEncoder

        self.encoder = VoiceEncoder(device="cpu", verbose=False)

    def embed(self, audio: np.ndarray) -> np.ndarray:
        """(T,) float32 at 16 kHz -> (256,) float32 unit vector, or zeros for silent / too-short clips."""
        from resemblyzer import preprocess_wav
        from resemblyzer.audio import normalize_volume
        from resemblyzer.hparams import audio_norm_target_dBFS

        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError(f"expected mono audio of shape (T,), got shape {audio.shape}")
        if not np.isfinite(audio).all():
            raise ValueError("audio contains NaN or infinite samples")
        min_len = int(MIN_SECONDS * SAMPLE_RATE)
        if audio.size < min_len or not np.any(audio):
            return np.zeros(EMBED_DIM, dtype=np.float32)
        wav = preprocess_wav(audio, source_sr=SAMPLE_RATE)
        if wav.size < min_len:  # VAD cut (nearly) everything: judge the whole clip instead
            wav = normalize_volume(audio, audio_norm_target_dBFS, increase_only=True)
        return self.encoder.embed_utterance(wav.astype(np.float32)).astype(np.float32)

    def cosine(self, a_audio: np.ndarray, b_audio: np.ndarray) -> float:
        """Cosine similarity in [-1, 1] of the two clips' embeddings; 0.0 if either embedding is zero."""
        return cosine_embeddings(self.embed(a_audio), self.embed(b_audio))


def cosine_embeddings(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two (D,) vectors, clipped to [-1, 1]; 0.0 if either is the zero vector."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))


@functools.lru_cache(maxsize=None)
def get_speaker_encoder() -> SpeakerEncoder:
    """The shared SpeakerEncoder; the model loads on the first call only."""
    return SpeakerEncoder()
