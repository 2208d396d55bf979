"""The Python API: `TTS.load()` then `tts.say(text)`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gepard.codec.files import load_codec
from gepard.codec.model import Codec
from gepard.engine.base import SamplingParams
from gepard.lm.generate import generate_codes
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.voices import resolve_voice
from gepard.paths import models_dir


class TTS:
    """Text -> 16 kHz mono speech with the shipped (or a given) speech LM and codec."""

    def __init__(self, model: SpeechLM, codec: Codec, model_dir: Path):
        self.model, self.codec, self.model_dir = model, codec, model_dir

    @property
    def sample_rate(self) -> int:
        return self.codec.config.sample_rate

    @classmethod
    def load(cls, model_dir: str | Path | None = None, codec_dir: str | Path | None = None) -> "TTS":
        model_dir = Path(model_dir) if model_dir else models_dir() / "lm"
        if not (model_dir / "gepard.json").is_file():
            raise FileNotFoundError(f"no speech LM at {model_dir} (expected gepard.json, config.json, ...)")
        return cls(SpeechLM.from_pretrained(model_dir), load_codec(codec_dir), model_dir)

    def voice(self, voice: str | None = None) -> torch.Tensor:
        """A named voice, a reference clip path, or None for the default -> (1, K, H) prefix."""
        return resolve_voice(self.model, self.codec, self.model_dir, voice)

    def say(self, text: str, voice: str | None = None, seed: int = 0, temperature: float = 0.8) -> np.ndarray:
        """Text -> (T,) float32 audio at `sample_rate`."""
        codes, _ = generate_codes(self.model, text, self.voice(voice), SamplingParams(temperature=temperature, seed=seed))
        if not codes:
            return np.zeros(0, dtype=np.float32)
        return self.codec.decode(torch.tensor([codes]))[0].clamp(-1, 1).numpy()
