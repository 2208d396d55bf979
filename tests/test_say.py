"""`gepard say` and TTS.say with a tiny random-weight speech LM and codec: plumbing and bad input."""

import numpy as np
import soundfile as sf
from typer.testing import CliRunner

from gepard.api import TTS
from gepard.cli import app
from gepard.lm.voices import list_voices

runner = CliRunner()


def say(*args):
    return runner.invoke(app, ["say", *map(str, args)])


def test_say_writes_speech_with_default_named_and_reference_voices(tiny_lm_dir, tiny_codec_dir, speech_path, tmp_path):
    for voice in ([], ["--voice", "default"], ["--voice", speech_path]):
        r = say("Hello there.", "-o", tmp_path / "a.wav", "--model", tiny_lm_dir, "--codec", tiny_codec_dir, *voice)
        assert r.exit_code == 0, r.output
        info = sf.info(str(tmp_path / "a.wav"))
        assert info.samplerate == 16000 and info.frames % 640 == 0 and info.frames > 0


def test_same_seed_same_audio(tiny_lm_dir, tiny_codec_dir):
    with TTS.load(tiny_lm_dir, tiny_codec_dir) as tts:
        a, b = tts.say("see you", seed=3), tts.say("see you", seed=3)
    assert np.array_equal(a, b)
    assert list_voices(tiny_lm_dir) == ["default"]


def test_say_bad_inputs_fail_with_one_clear_line(tiny_lm_dir, tiny_codec_dir, tmp_path):
    sf.write(str(tmp_path / "silent.wav"), np.zeros(48000), 16000)
    sf.write(str(tmp_path / "short.wav"), np.sin(np.arange(4000) / 3) * 0.3, 16000)
    (tmp_path / "notaudio.wav").write_text("hello")
    cases = {
        ("",): "empty",
        ("   ",): "empty",
        ("word " * 4000,): "limit",
        ("hi", "--voice", tmp_path / "silent.wav"): "silent",
        ("hi", "--voice", tmp_path / "short.wav"): "at least",
        ("hi", "--voice", tmp_path / "notaudio.wav"): "not a readable audio file",
        ("hi", "--voice", "nobody"): "unknown voice",
    }
    for args, expected in cases.items():
        r = say(*args, "-o", tmp_path / "x.wav", "--model", tiny_lm_dir, "--codec", tiny_codec_dir)
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert r.exit_code == 1 and len(lines) == 1 and "Traceback" not in r.output, r.output
        assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert not (tmp_path / "x.wav").exists()


def test_stream_flag_stdin_and_raw_pcm_to_stdout(tiny_lm_dir, tiny_codec_dir, tmp_path):
    import subprocess
    import sys

    base = [sys.executable, "-m", "gepard.cli", "say", "-", "--model", str(tiny_lm_dir), "--codec", str(tiny_codec_dir)]
    text = "Hello there, how are you today? Fine."
    run = subprocess.run([*base, "--stream", "-o", str(tmp_path / "s.wav")], input=text.encode(), capture_output=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    streamed, _ = sf.read(str(tmp_path / "s.wav"), dtype="int16")
    run = subprocess.run([*base, "-o", "-"], input=text.encode(), capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    raw = np.frombuffer(run.stdout, dtype="<i2")
    assert len(raw) == len(streamed) > 0  # same seed, same samples (up to libsndfile's own 16-bit rounding)
    assert np.abs(raw.astype(int) - streamed.astype(int)).max() <= 1
