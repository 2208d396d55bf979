"""The codec decoder's precision: timed once per machine, remembered, obeyed by load_codec."""

from __future__ import annotations

import json

import pytest
import torch

from gepard.codec import decoder_precision
from gepard.codec.decoder_precision import CACHE_FILE, faster_decoder_dtype
from gepard.codec.files import load_codec
from gepard.eval.speed import stream_seconds
from gepard.precision import native_bf16


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEPARD_CACHE", str(tmp_path))
    return tmp_path / CACHE_FILE


def test_stream_seconds_times_one_thread_and_restores_the_thread_count(tiny_codec):
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert 0 < stream_seconds(tiny_codec, frames=5, repeats=1) < 60
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


@pytest.mark.skipif(not native_bf16("cpu"), reason="this CPU has no native bf16: the decoder is always fp32")
def test_measured_once_then_read_from_the_cache(tiny_codec_dir, cache):
    first = faster_decoder_dtype(load_codec(tiny_codec_dir, bf16_decoder=False))
    assert first in (torch.bfloat16, torch.float32)
    (key, name), = json.loads(cache.read_text()).items()
    assert name == ("bf16" if first == torch.bfloat16 else "fp32") and "levels" in key
    flipped = "fp32" if name == "bf16" else "bf16"
    cache.write_text(json.dumps({key: flipped}))  # what the cache says wins: no second measurement
    codec = load_codec(tiny_codec_dir)
    assert codec.decoder.inp.weight.dtype == (torch.bfloat16 if flipped == "bf16" else torch.float32)
    assert codec.encoder.inp.weight.dtype == torch.float32


@pytest.mark.skipif(not native_bf16("cpu"), reason="this CPU has no native bf16: the decoder is always fp32")
def test_a_broken_cache_is_measured_again(tiny_codec, cache):
    cache.write_text("{not json")
    dtype = faster_decoder_dtype(tiny_codec)
    assert list(json.loads(cache.read_text()).values()) == ["bf16" if dtype == torch.bfloat16 else "fp32"]


def test_fp32_without_native_bf16_and_nothing_timed(tiny_codec, cache, monkeypatch):
    monkeypatch.setattr(decoder_precision, "native_bf16", lambda device_type: False)
    assert faster_decoder_dtype(tiny_codec) == torch.float32
    assert not cache.exists()


def test_an_explicit_choice_overrides_the_measurement(tiny_codec_dir, cache):
    assert load_codec(tiny_codec_dir, bf16_decoder=True).decoder.inp.weight.dtype == torch.bfloat16
    assert load_codec(tiny_codec_dir, bf16_decoder=False).decoder.inp.weight.dtype == torch.float32
    assert not cache.exists()
