"""Naturalness: DNSMOS P.808 MOS from the ONNX model bundled with `speechmos`.

Audio is float32 (T,) mono at 16 kHz. The score matches `speechmos.dnsmos.run(audio, sr=16000)["p808_mos"]`
for clips up to 16 s (beyond that, float rounding in speechmos drops the windows starting at 7..23 s; all
windows are kept here). Only the P.808 model is loaded (run() also runs the SIG/BAK/OVR model), its ONNX
session is created once with an explicit thread count (run() uses every core), and empty clips raise
instead of looping forever.

Short clips: the model scores 9.01 s windows. As in speechmos and Microsoft's reference script, a shorter
clip is repeated (doubled until long enough) rather than zero-padded, so silence is not scored as part of
the speech. Longer clips are scored on 9.01 s windows every 1 s and the window scores are averaged.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16000
WINDOW_SECONDS = 9.01  # speechmos.dnsmos.INPUT_LENGTH


def _mel_features(segment: np.ndarray) -> np.ndarray:
    """(T,) -> (1, frames, 120) float32 log-mel input of the P.808 model, as in speechmos."""
    import librosa

    mel = librosa.feature.melspectrogram(y=segment, sr=SAMPLE_RATE, n_fft=321, hop_length=160, n_mels=120)
    mel = (librosa.power_to_db(mel, ref=np.max) + 40) / 40
    return mel.T[np.newaxis].astype(np.float32)


class DNSMOSP808:
    """The DNSMOS P.808 ONNX model (speechmos/dnsmos_models/model_v8.onnx) on CPU."""

    def __init__(self, threads: int = 1):
        import onnxruntime as ort
        import speechmos

        path = Path(speechmos.__file__).parent / "dnsmos_models" / "model_v8.onnx"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: DNSMOS P.808 model missing from the speechmos install")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name

    def score(self, audio: np.ndarray) -> float:
        """(T,) float32 at 16 kHz -> P.808 MOS (about 1..5), mean over 9.01 s windows with a 1 s hop."""
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError(f"expected mono audio of shape (T,), got shape {audio.shape}")
        if audio.size == 0:
            raise ValueError("cannot score an empty clip")
        if not np.isfinite(audio).all():
            raise ValueError("audio contains NaN or infinite samples")
        audio = np.clip(audio, -1.0, 1.0)
        window = int(WINDOW_SECONDS * SAMPLE_RATE)
        while audio.size < window:
            audio = np.concatenate([audio, audio])
        hops = int(np.floor(audio.size / SAMPLE_RATE) - WINDOW_SECONDS) + 1
        scores = []
        for i in range(hops):
            segment = audio[i * SAMPLE_RATE : i * SAMPLE_RATE + window]
            if segment.size == window:
                features = _mel_features(segment[:-160])
                scores.append(float(self.session.run(None, {self.input_name: features})[0][0][0]))
        return float(np.mean(scores))


@functools.lru_cache(maxsize=None)
def get_dnsmos(threads: int = 1) -> DNSMOSP808:
    """The shared DNSMOSP808 for `threads` CPU threads; the model loads on the first call only."""
    return DNSMOSP808(threads)


def dnsmos_p808(audio: np.ndarray, threads: int = 1) -> float:
    """P.808 MOS of one (T,) float32 16 kHz clip, using the shared model."""
    return get_dnsmos(threads).score(audio)
