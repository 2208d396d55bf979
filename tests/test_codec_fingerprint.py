"""A speech LM names the codec whose codes it learned; mixing codecs is refused with a clear error."""

import json

import pytest
import torch

from gepard.api import TTS
from gepard.codec.model import Codec
from gepard.data.prepare import shards_codec
from gepard.lm.speech_lm import SpeechLM
from tests.conftest import tiny_codec_config


def test_fingerprint_survives_save_and_load_and_names_the_encoder(tiny_codec, tiny_codec_dir):
    loaded = Codec.from_pretrained(tiny_codec_dir)
    assert loaded.fingerprint() == tiny_codec.fingerprint()
    with torch.no_grad():
        loaded.decoder.inp.weight.add_(1.0)  # a new decoder keeps every code's meaning
    assert loaded.fingerprint() == tiny_codec.fingerprint()
    torch.manual_seed(1)
    assert Codec(tiny_codec_config()).fingerprint() != tiny_codec.fingerprint()


def test_shards_from_two_codecs_are_refused(tmp_path):
    for name, print_ in (("a", "1111"), ("b", "1111"), ("c", "2222")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "codec.json").write_text(json.dumps({"fingerprint": print_}))
    (tmp_path / "old").mkdir()  # shards from before fingerprints: nothing to check
    assert shards_codec([tmp_path / "a", tmp_path / "b", tmp_path / "old"]) == "1111"
    assert shards_codec([tmp_path / "old"]) == ""
    with pytest.raises(ValueError, match="different codecs"):
        shards_codec([tmp_path / "a", tmp_path / "c"])


def test_loading_a_speech_lm_with_another_codec_fails_clearly(tiny_lm_dir, tiny_codec, tiny_codec_dir, tmp_path):
    model = SpeechLM.from_pretrained(tiny_lm_dir)
    assert model.codec_fingerprint == ""
    model.codec_fingerprint = "0123456789abcdef"
    model.save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match="speaks the codes of codec 0123456789abcdef"):
        TTS.load(tmp_path / "other", tiny_codec_dir)
    model.codec_fingerprint = tiny_codec.fingerprint()
    model.save_pretrained(tmp_path / "same")
    with TTS.load(tmp_path / "same", tiny_codec_dir) as tts:
        assert tts.say("yes", seed=0).size > 0
