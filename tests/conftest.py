"""Shared fixtures: a tiny random-weight codec, the speech fixture, the shipped codec."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gepard.codec.model import Codec, CodecConfig
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
