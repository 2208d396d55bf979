"""The codec commands on real files, and every kind of bad input the issue lists."""

import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from gepard.cli import app

runner = CliRunner()


def gepard(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_encode_decode_roundtrip_on_a_real_file(tiny_codec_dir, speech_path, tmp_path):
    r = gepard("codec", "encode", speech_path, tmp_path / "codes.npy", "--codec", tiny_codec_dir)
    assert r.exit_code == 0, r.output
    codes = np.load(tmp_path / "codes.npy")
    duration = sf.info(str(speech_path)).duration
    assert codes.dtype == np.int64 and len(codes) == int(np.ceil(duration * 25))

    r = gepard("codec", "decode", tmp_path / "codes.npy", tmp_path / "decoded.wav", "--codec", tiny_codec_dir)
    assert r.exit_code == 0, r.output
    decoded = sf.info(str(tmp_path / "decoded.wav"))
    assert (decoded.samplerate, decoded.channels, decoded.frames) == (16000, 1, len(codes) * 640)

    r = gepard("codec", "roundtrip", speech_path, tmp_path / "rt.wav", "--codec", tiny_codec_dir)
    assert r.exit_code == 0, r.output
    rt, rate = sf.read(str(tmp_path / "rt.wav"))
    assert rate == 16000 and rt.ndim == 1 and len(rt) == sf.info(str(speech_path)).frames
    # the roundtrip is the decode of the encode, trimmed to the input's length
    dec, _ = sf.read(str(tmp_path / "decoded.wav"))
    assert np.array_equal(rt, dec[: len(rt)])


def test_shipped_codec_roundtrip_keeps_the_speech(shipped_codec_dir, speech_path, tmp_path):
    r = gepard("codec", "roundtrip", speech_path, tmp_path / "rt.wav")
    assert r.exit_code == 0, r.output
    original, _ = sf.read(str(speech_path))
    rt, _ = sf.read(str(tmp_path / "rt.wav"))
    # log-mel distance far below that of an unrelated signal
    from gepard.codec.losses import SpectralLoss
    import torch

    loss = SpectralLoss()
    a, b = torch.tensor(original, dtype=torch.float32)[None], torch.tensor(rt, dtype=torch.float32)[None]
    noise = torch.randn_like(a) * a.std()
    assert loss(b, a)[1]["mel"] < 0.5 * loss(noise, a)[1]["mel"]


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 24000, 44100, 48000])
@pytest.mark.parametrize("subtype", ["PCM_U8", "PCM_16", "PCM_24", "FLOAT"])
def test_any_rate_and_sample_format_roundtrips(tiny_codec_dir, tmp_path, rate, subtype):
    t = np.arange(int(rate * 0.7)) / rate
    tone = 0.5 * np.sin(2 * np.pi * 220 * t)
    src = tmp_path / "in.wav"
    sf.write(str(src), tone, rate, subtype=subtype)
    r = gepard("codec", "roundtrip", src, tmp_path / "out.wav", "--codec", tiny_codec_dir)
    assert r.exit_code == 0, r.output
    info = sf.info(str(tmp_path / "out.wav"))
    assert info.samplerate == 16000 and info.channels == 1
    assert abs(info.frames - round(len(t) * 16000 / rate)) <= 1


def test_stereo_and_silence_work(tiny_codec_dir, tmp_path):
    stereo = np.stack([np.sin(np.arange(24000) / 10), np.zeros(24000)], axis=1) * 0.3
    sf.write(str(tmp_path / "stereo.flac"), stereo, 48000)
    sf.write(str(tmp_path / "silence.wav"), np.zeros(16000), 16000)
    for name in ("stereo.flac", "silence.wav"):
        r = gepard("codec", "roundtrip", tmp_path / name, tmp_path / f"{name}.out.wav", "--codec", tiny_codec_dir)
        assert r.exit_code == 0, r.output
        assert sf.info(str(tmp_path / f"{name}.out.wav")).channels == 1


def one_line_error(result) -> str:
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    return lines[0]


def test_bad_inputs_fail_with_one_clear_line(tiny_codec_dir, tmp_path):
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "text.wav").write_text("this is not audio\n" * 50)
    (tmp_path / "bad.npy").write_text("nope")
    np.save(tmp_path / "float.npy", np.zeros(5))
    np.save(tmp_path / "range.npy", np.array([0, 10**9]))
    np.save(tmp_path / "codes.npy", np.array([1, 2, 3]))
    sf.write(str(tmp_path / "tone.wav"), np.sin(np.arange(8000) / 5) * 0.3, 16000)
    cases = {
        ("encode", "empty.wav", "o.npy"): "empty",
        ("encode", "text.wav", "o.npy"): "not a readable audio file",
        ("encode", "missing.wav", "o.npy"): "no such file",
        ("encode", "tone.wav", "o.txt"): "must end in .npy",
        ("decode", "bad.npy", "o.wav"): "not a .npy codes file",
        ("decode", "float.npy", "o.wav"): "integer",
        ("decode", "range.npy", "o.wav"): "must lie in",
        ("roundtrip", "empty.wav", "o.wav"): "empty",
    }
    for (cmd, src, dst), expected in cases.items():
        line = one_line_error(gepard("codec", cmd, tmp_path / src, tmp_path / dst, "--codec", tiny_codec_dir))
        assert expected in line, line
    line = one_line_error(gepard("codec", "decode", tmp_path / "codes.npy", tmp_path / "o.wav",
                                 "--codec", tmp_path / "nowhere"))
    assert "no codec" in line


PEAK_RSS = """
import resource, sys
from gepard.codec.files import load_codec, roundtrip_file
roundtrip_file(load_codec(sys.argv[1]), sys.argv[2], sys.argv[3])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def peak_rss_mb(codec_dir, src, dst) -> int:
    out = subprocess.run([sys.executable, "-c", PEAK_RSS, str(codec_dir), str(src), str(dst)],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_ten_minute_file_in_bounded_memory(tiny_codec_dir, tmp_path):
    rng = np.random.default_rng(0)
    for minutes in (1, 10):
        with sf.SoundFile(str(tmp_path / f"{minutes}.wav"), "w", 44100, 2, subtype="PCM_16") as f:
            for _ in range(minutes * 6):
                f.write(rng.normal(0, 0.1, (441000, 2)))
    short = peak_rss_mb(tiny_codec_dir, tmp_path / "1.wav", tmp_path / "1.out.wav")
    long = peak_rss_mb(tiny_codec_dir, tmp_path / "10.wav", tmp_path / "10.out.wav")
    assert sf.info(str(tmp_path / "10.out.wav")).frames == 10 * 60 * 16000
    # a 10x longer file must not need more memory than the whole 10-minute signal would take in float32
    print(f"peak RSS: 1 min {short} MB, 10 min {long} MB")
    assert long - short < 10 * 60 * 44100 * 2 * 4 / 2**20 / 2, (short, long)
