"""Voices: a voice is its prefix tensor (K, H), computed once from a reference clip and stored by name."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from gepard.audio import AudioError, load_audio
from gepard.codec.model import Codec
from gepard.lm.speech_lm import SpeechLM

MIN_REFERENCE_SECONDS = 1.0
MAX_REFERENCE_SECONDS = 15.0  # longer references are cut: a few seconds carry the timbre
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_reference(audio: np.ndarray, name: str, sample_rate: int = 16000) -> np.ndarray:
    """(T,) -> (T',) the usable part of a reference clip, or an AudioError saying why there is none."""
    if len(audio) < MIN_REFERENCE_SECONDS * sample_rate:
        raise AudioError(f"{name}: the reference is {len(audio) / sample_rate:.2f} s long; "
                         f"at least {MIN_REFERENCE_SECONDS:g} s of speech is needed")
    if float(np.sqrt(np.mean(audio ** 2))) < 1e-3:
        raise AudioError(f"{name}: the reference is silent")
    return audio[: int(MAX_REFERENCE_SECONDS * sample_rate)]


@torch.inference_mode()
def prefix_from_audio(model: SpeechLM, codec: Codec, audio: np.ndarray, name: str = "reference") -> torch.Tensor:
    """(T,) 16 kHz reference -> (K, H) prefix."""
    audio = check_reference(audio, name, codec.config.sample_rate)
    codes = codec.encode(torch.from_numpy(audio)[None])
    return model.prefix(codes)[0].float()


def voices_dir(model_dir: str | Path) -> Path:
    return Path(model_dir) / "voices"


def save_voice(model_dir: str | Path, name: str, prefix: torch.Tensor) -> Path:
    if not NAME.match(name):
        raise ValueError(f"voice name {name!r}: use 1-64 letters, digits, '_', '-', '.'")
    path = voices_dir(model_dir) / f"{name}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    save_file({"prefix": prefix.to(torch.bfloat16).contiguous()}, str(tmp))
    tmp.replace(path)
    return path


def list_voices(model_dir: str | Path) -> list[str]:
    return sorted(p.stem for p in voices_dir(model_dir).glob("*.safetensors"))


def resolve_voice(model: SpeechLM, codec: Codec, model_dir: str | Path, voice: str | None) -> torch.Tensor:
    """A voice name, a path to a reference clip, or None (the default voice) -> (1, K, H) prefix."""
    names = list_voices(model_dir)
    if voice is None:
        voice = "default" if "default" in names else None
        if voice is None:
            return model.voice.null(1).float()
    if voice in names:
        return load_file(str(voices_dir(model_dir) / f"{voice}.safetensors"))["prefix"].float()[None]
    if Path(voice).suffix and Path(voice).exists():
        return prefix_from_audio(model, codec, load_audio(voice), voice)[None]
    listed = ", ".join(names) or "none"
    raise ValueError(f"unknown voice {voice!r}: not a file and not one of the named voices ({listed})")
