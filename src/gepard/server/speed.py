"""Speaking-rate change without a pitch change: WSOLA (waveform-similarity overlap-add)."""

from __future__ import annotations

import numpy as np


def change_speed(audio: np.ndarray, speed: float, sample_rate: int = 16000) -> np.ndarray:
    """(T,) -> (~T / speed,) at the same pitch; 20 ms Hann frames, 10 ms hop, +-5 ms alignment search."""
    if speed == 1.0 or len(audio) == 0:
        return audio
    frame, hop, search = int(0.02 * sample_rate), int(0.01 * sample_rate), int(0.005 * sample_rate)
    window = np.hanning(frame).astype(np.float32)
    padded = np.concatenate([np.zeros(search, np.float32), audio, np.zeros(frame + search, np.float32)])
    n_out = int(len(audio) / speed)
    out = np.zeros(n_out + frame, np.float32)
    norm = np.zeros(n_out + frame, np.float32)
    previous = padded[search: search + frame]
    for k in range(0, n_out, hop):
        centre = search + int(k * speed)
        target = previous[hop:] if len(previous) == frame else previous
        candidates = [padded[centre + d: centre + d + len(target)] for d in range(-search, search + 1)]
        best = int(np.argmax([np.dot(c, target) for c in candidates])) - search
        start = centre + best
        segment = padded[start: start + frame]
        out[k: k + frame] += segment * window
        norm[k: k + frame] += window
        previous = padded[start + hop: start + hop + frame]
    return (out / np.maximum(norm, 1e-3))[:n_out]
