"""`gepard data synthesize`: corpus finishing, the unspoken-sentence list, and a real piper teacher run."""

import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from gepard.data.manifests import read_jsonl
from gepard.data.synthesize import SAMPLE_RATE, finish, synthesize, unspoken_sentences


def test_finish_trims_silence_to_the_margin_and_peaks_at_minus_1_dbfs():
    tone = 0.3 * np.sin(np.arange(SAMPLE_RATE) * 2 * np.pi * 220 / SAMPLE_RATE).astype(np.float32)
    audio = np.concatenate([np.zeros(SAMPLE_RATE), tone, np.zeros(2 * SAMPLE_RATE)]).astype(np.float32)
    out = finish(audio)
    assert len(out) == pytest.approx(SAMPLE_RATE * 1.24, abs=SAMPLE_RATE * 0.01)
    assert np.abs(out).max() == pytest.approx(10 ** (-1 / 20), rel=1e-5)


def test_finish_refuses_silence():
    with pytest.raises(ValueError, match="silence"):
        finish(np.zeros(SAMPLE_RATE, np.float32))


def test_unspoken_sentences_are_training_pool_sentences_no_row_speaks(tmp_path):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "text").mkdir()
    (tmp_path / "manifests" / "teacher_train.jsonl").write_text(json.dumps({"text": "Spoken once."}) + "\n")
    (tmp_path / "manifests" / "real.jsonl").write_text(json.dumps({"text": "Read aloud."}) + "\n")
    pool = [("Spoken once.", "train"), ("Read aloud.", "train"), ("New one.", "train"), ("New one.", "train"),
            ("Held out.", "test"), ("Another.", "train")]
    (tmp_path / "text" / "pool.jsonl").write_text("".join(json.dumps({"text": t, "split": s}) + "\n"
                                                          for t, s in pool))
    assert unspoken_sentences(tmp_path) == ["New one.", "Another."]


def test_synthesize_with_piper_writes_a_resumable_16k_manifest(tmp_path):
    pytest.importorskip("piper")
    texts = ["Yes.", "The train leaves at noon."]
    manifest = synthesize(texts, ["piper_joe", "piper_joe"], tmp_path / "synth", jobs=1)
    rows = read_jsonl(manifest)
    assert [r.text for r in rows] == texts and {r.speaker for r in rows} == {"piper_joe"}
    for row in rows:
        audio, rate = sf.read(str(row.audio), dtype="float32")
        assert rate == SAMPLE_RATE and 0.3 < len(audio) / rate < 5
        assert np.abs(audio).max() == pytest.approx(10 ** (-1 / 20), abs=1e-3)
    stamps = [r.audio.stat().st_mtime_ns for r in rows]
    synthesize(texts, ["piper_joe"], tmp_path / "synth", jobs=1)  # resumes: nothing is spoken again
    assert [r.audio.stat().st_mtime_ns for r in rows] == stamps


def test_cli_rejects_an_unknown_voice_in_one_line(tmp_path):
    (tmp_path / "t.txt").write_text("Hello.\n")
    run = subprocess.run([sys.executable, "-m", "gepard.cli", "data", "synthesize", str(tmp_path / "o"),
                          "--texts", str(tmp_path / "t.txt"), "--voices", "nobody"], capture_output=True, text=True)
    assert run.returncode == 1 and "unknown teacher voice(s) nobody" in run.stderr and "Traceback" not in run.stderr
