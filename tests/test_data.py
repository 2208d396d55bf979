import json

import numpy as np
import pytest
import soundfile as sf

from gepard.audio import AudioError, load_audio
from gepard.data.manifests import read_manifest, shared_split
from gepard.paths import shared_data_dir


def test_generic_jsonl_manifest_resolves_relative_paths(tmp_path):
    (tmp_path / "clips").mkdir()
    sf.write(str(tmp_path / "clips" / "a.wav"), np.zeros(1600), 16000)
    rows = [{"audio": "clips/a.wav", "text": "Hello there.", "speaker": "ann"},
            {"audio": "clips/b.wav", "asr_text": "hi", "speaker": "bob", "id": "b1", "duration": 1.5}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    a, b = read_manifest(tmp_path / "m.jsonl")
    assert a.audio == tmp_path / "clips" / "a.wav" and a.audio.is_file()
    assert (a.id, a.text, a.speaker, a.reference_text) == ("a", "Hello there.", "ann", "Hello there.")
    assert (b.id, b.text, b.reference_text, b.duration) == ("b1", "", "hi", 1.5)


def test_bad_manifest_row_names_the_line(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"audio": "a.wav"}\n{"text": "no audio"}\n')
    with pytest.raises(ValueError, match="m.jsonl:2"):
        read_manifest(tmp_path / "m.jsonl")


def test_ljspeech_folder(tmp_path):
    (tmp_path / "wavs").mkdir()
    (tmp_path / "metadata.csv").write_text("LJ001|Dr. Smith|Doctor Smith\nLJ002|It's 5 \"pm\"|\n")
    a, b = read_manifest(tmp_path)
    assert (a.id, a.text, a.audio) == ("LJ001", "Doctor Smith", tmp_path / "wavs" / "LJ001.wav")
    assert b.text == "It's 5 \"pm\"" and b.speaker == "ljspeech"


def test_resampling_and_downmix_keep_the_signal(tmp_path):
    rate = 44100
    t = np.arange(rate) / rate
    left, right = 0.5 * np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 440 * t)
    sf.write(str(tmp_path / "s.wav"), np.stack([left, right], 1), rate, subtype="PCM_24")
    audio = load_audio(tmp_path / "s.wav")
    assert audio.dtype == np.float32 and audio.shape == (16000,)
    spectrum = np.abs(np.fft.rfft(audio))
    assert abs(np.argmax(spectrum) - 440) <= 1  # 1 Hz bins: the tone stays at 440 Hz
    assert abs(audio[1000:-1000].std() - 0.5 / np.sqrt(2)) < 0.01


def test_load_audio_errors_are_one_line(tmp_path):
    (tmp_path / "x.wav").write_bytes(b"RIFF....WAVEfmt garbage")
    with pytest.raises(AudioError) as e:
        load_audio(tmp_path / "x.wav")
    assert "\n" not in str(e.value)
    sf.write(str(tmp_path / "long.wav"), np.zeros(16000 * 3), 16000)
    with pytest.raises(AudioError, match="longer than the limit"):
        load_audio(tmp_path / "long.wav", max_seconds=2)


corpus = pytest.mark.skipif(shared_data_dir() is None, reason="the shared corpus (../shared/data) is absent")


@corpus
def test_shared_splits_keep_held_out_speakers_out_of_training():
    train = shared_split("codec_train")
    heldout = shared_split("real_heldout")
    assert len(heldout) == 100 and len({u.speaker for u in heldout}) == 10
    assert not {u.speaker for u in heldout} & {u.speaker for u in train if u.kind == "real"}
    assert all(u.reference_text for u in heldout + shared_split("teacher_test"))
    assert all(u.audio.is_file() for u in heldout)
