"""The phone-track front end: one phone per codec frame in flite's timing, padded to a fixed length."""

import shutil

import pytest

from gepard.lm.frontend import to_units, training_units
from gepard.lm.track import PAD, TRACK_FRAMES, aligned_flite, frame_phones, padded_track

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
