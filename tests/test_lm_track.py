"""The phone-track front end: one phone per codec frame in flite's timing, padded to a fixed length."""

import shutil

import pytest
import torch

from gepard.lm.frontend import segment_chars, to_units, training_units
from gepard.engine.base import SamplingParams
from gepard.lm.generate import text_prompt, text_request
from gepard.lm.layout import Repetition, prompt_tokens
from gepard.lm.model import LMConfig
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.tokenizer import encode_text
from gepard.lm.track import (MAX_TRACK_CHARS, PAD, TRACK_FRAMES, aligned_flite, frame_phones, padded_track, track,
                             track_seconds)
from gepard.lm.train import LMTrainConfig, build
from gepard.lm.voice import VoiceConfig
from gepard.stream.text import segment_stream

needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="flite is not installed (apt-get install flite)")


def test_each_frame_gets_the_phone_sounding_at_its_centre():
    phones = [("pau", 0.1), ("hh", 0.2), ("ay", 0.3)]
    # frame centres 0.02, 0.06, 0.10, 0.14, 0.18, 0.22 s; a clip trimmed to start 0.05 s in shifts them
    assert frame_phones(phones, 0.0, 6) == ["pau", "pau", "pau", "hh", "hh", "ay"]
    assert frame_phones(phones, 0.05, 3) == ["pau", "hh", "hh"]
    assert frame_phones(phones, 0.0, 9)[-1] == "ay"  # past the last phone: still the last


def test_the_track_is_padded_to_a_fixed_length_and_long_text_is_refused():
    units = padded_track(["pau", "hh", "ay"]).split()
    assert len(units) == TRACK_FRAMES and units[:3] == ["pau", "hh", "ay"] and set(units[3:]) == {PAD}
    with pytest.raises(ValueError, match="one utterance holds at most 8 s"):
        padded_track(["ay"] * (TRACK_FRAMES + 1))


@needs_flite
def test_a_clip_and_its_track_have_one_phone_per_frame():
    audio, frames = aligned_flite("slt", "Hello there, how are you?")
    assert len(frames) == -(-len(audio) // 640) and {"hh", "ow"} <= set(frames)
    track = to_units("Hello there, how are you?", "track")
    assert track.split()[: len(frames)] == frames and len(track.split()) == TRACK_FRAMES
    assert training_units(track, "track") == track  # shards hold tracks already


@needs_flite
def test_a_track_model_stamps_its_front_end_and_reads_tracks_at_inference(tmp_path):
    cfg = LMTrainConfig(text_vocab=300, levels=[5, 4, 3], repetition=Repetition(), text_front_end="track",
                        lm=LMConfig(hidden_size=32, layers=2, heads=2, kv_heads=1, head_dim=16, intermediate_size=64,
                                    max_positions=512),
                        voice=VoiceConfig(dim=16, heads=2, blocks=1, prefix_len=4))
    model = build(cfg, [track("Hello there."), track("See you at nine.")])  # shard texts are tracks already
    model.save_pretrained(tmp_path / "m")
    again = SpeechLM.from_pretrained(tmp_path / "m")
    assert again.text_front_end == "track"
    assert again.encode_text("Hello there.") == encode_text(again.tokenizer, track("Hello there."))
    ids, guard = text_prompt(again, "Hello there.")
    assert guard == TRACK_FRAMES + 25  # the track says how long the speech is: its length plus 1 s
    # two-pass CFG's unconditional branch reads a track of pads only (silence), never an empty prompt
    assert again.null_text() == encode_text(again.tokenizer, padded_track([])) == encode_text(
        again.tokenizer, " ".join([PAD] * TRACK_FRAMES))
    uncond = text_request(again, "Hello there.", torch.zeros(1, 4, 32), SamplingParams(cfg_scale=3.0)).uncond_prompt_ids
    assert uncond == prompt_tokens(again.null_text(), again.vocab, 1)
    assert track_seconds("Hello there.") == pytest.approx(track("Hello there.").split().index(PAD) * 0.04)


def test_track_models_get_segments_short_enough_for_one_track():
    text = "This sentence keeps going, and going, with more words than eight seconds of speech can hold. " * 3
    segments = list(segment_stream([text], segment_chars("track")))
    assert len(segments) > 3 and all(len(s) <= MAX_TRACK_CHARS for s in segments)
    assert segment_chars("text") > MAX_TRACK_CHARS
