"""Shared fixtures: a tiny random-weight codec, the speech fixture, the shipped codec."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from gepard.codec.model import Codec, CodecConfig
from gepard.lm.layout import Repetition
from gepard.lm.model import LMConfig
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.voice import VoiceConfig
from gepard.lm.voices import save_voice
from gepard.paths import models_dir

DATA = Path(__file__).parent / "data"


def tiny_codec_config() -> CodecConfig:
    return CodecConfig(fine_dim=16, frame_dim=24, fine_depth=2, frame_depth=2, levels=[5, 4, 3])


@pytest.fixture
def tiny_codec() -> Codec:
    torch.manual_seed(0)
    return Codec(tiny_codec_config()).eval()


@pytest.fixture
def tiny_codec_dir(tiny_codec, tmp_path) -> Path:
    path = tmp_path / "codec"
    tiny_codec.save_pretrained(path, dtype=torch.float32)
    return path


@pytest.fixture
def speech_path() -> Path:
    return DATA / "speech.flac"


@pytest.fixture(scope="session")
def shipped_codec_dir() -> Path:
    path = models_dir() / "codec"
    if not (path / "model.safetensors").is_file():
        pytest.skip("the shipped codec (models/codec) is not present")
    return path


def tiny_speech_lm():
    """A random-weight SpeechLM over the tiny codec's 60 codes."""
    torch.manual_seed(0)
    cfg = LMTrainConfig(text_vocab=300, levels=[5, 4, 3], repetition=Repetition(),
                        lm=LMConfig(hidden_size=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate_size=64,
                                    max_positions=2048),
                        voice=VoiceConfig(dim=16, heads=2, blocks=1, prefix_len=4))
    return build(cfg, ["hello there", "yes", "see you at nine"]).eval()


@pytest.fixture
def tiny_lm_dir(tmp_path):
    model = tiny_speech_lm()
    path = tmp_path / "lm"
    model.save_pretrained(path)
    save_voice(path, "default", model.voice.null(1)[0] + 0.1)
    return path


@pytest.fixture(scope="session")
def shipped_lm_dir() -> Path:
    path = models_dir() / "lm"
    if not (path / "model.safetensors").is_file():
        pytest.skip("the shipped speech LM (models/lm) is not present")
    if shutil.which("flite") is None:
        pytest.skip("flite is not installed (apt-get install flite): the shipped LM reads flite phone tracks")
    return path
