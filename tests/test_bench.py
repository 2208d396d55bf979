import pytest

from gepard.api import TTS
from gepard.eval.bench import Playback, run_bench


def test_playback_stalls_only_when_the_audio_ran_out():
    player = Playback()
    for now, seconds in [(10.0, 0.1), (10.05, 0.1), (10.2, 0.1), (10.45, 0.1), (10.5, 0.1)]:
        player.arrive(now, seconds)
    # the third chunk is due at 10.2 (on time), the fourth at 10.3 (0.15 s late): play resumes at 10.45
    assert player.played == pytest.approx(0.5) and player.stalled == pytest.approx(0.15)


def test_bench_measures_every_section(tiny_lm_dir, tiny_codec_dir):
    with TTS.load(tiny_lm_dir, tiny_codec_dir, slots=4) as tts:
        r = run_bench(tts, concurrency=[1, 2])
        assert tts.engine.active == 0
    assert [s["streams"] for s in r["sweep"]] == [1, 2] and all(s["requests"] == s["streams"] for s in r["sweep"])
    assert all(s["aggregate_x_realtime"] > 0 and s["ttfa_p95_ms"] >= s["ttfa_p50_ms"] > 0 for s in r["sweep"])
    assert all(s["stall_ms_max"] >= s["stall_ms_mean"] >= 0 and (s["underruns"] > 0) == (s["stall_ms_max"] > 0)
               for s in r["sweep"])
    assert [b["batch"] for b in r["breakdown"]] == [1, 2] and r["breakdown"][0]["decode_step_ms"] > 0
    assert r["single"]["rtf"] > 0 and r["hf_baseline"]["audio_s"] >= 0
    assert r["int8_head"]["nll_int8"] > 0 and 0 <= r["int8_head"]["top1_agreement"] <= 1


def test_bench_command_writes_the_report(tiny_lm_dir, tiny_codec_dir, tmp_path):
    from typer.testing import CliRunner

    from gepard.cli import app

    out = tmp_path / "bench.md"
    r = CliRunner().invoke(app, ["bench", "--model", str(tiny_lm_dir), "--codec", str(tiny_codec_dir),
                                 "--concurrency", "1,2", "--threads", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "| 2 |" in out.read_text() and out.with_suffix(".png").exists() and out.with_suffix(".json").exists()


def test_peers_are_measured_or_refused_clearly():
    from gepard.eval.peers import load_peer, measure_peer

    with pytest.raises(ValueError, match="unknown peer"):
        load_peer("espeak")
    pytest.importorskip("piper", reason="the peers extra is not installed")
    r = measure_peer(load_peer("piper"), ["Hello there.", "See you at nine."])
    assert r["rtf"] > 0 and r["ttfa_p50_ms"] > 0
