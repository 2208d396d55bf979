"""The report commands end to end on two utterances per set, with tiny random models (plumbing, not quality)."""

import json
import math

import pytest
from typer.testing import CliRunner

from gepard.cli import app
from gepard.paths import shared_data_dir
from gepard.precision import native_bf16

pytest.importorskip("faster_whisper")
pytestmark = pytest.mark.skipif(shared_data_dir() is None, reason="the shared corpus (../shared/data) is absent")


def test_eval_codec_writes_the_report(tiny_codec_dir, tmp_path):
    out = tmp_path / "codec.md"
    r = CliRunner().invoke(app, ["eval", "codec", "--codec", str(tiny_codec_dir), "--limit", "2", "--threads", "1",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(out.with_suffix(".json").read_text())
    assert set(summary["sets"]) == {"teacher_test", "teacher_flite", "real_heldout"}
    assert summary["sets"]["teacher_test"]["utterances"] == summary["sets"]["teacher_flite"]["utterances"] == 2
    assert summary["speed"]["decode_x_realtime"] > 0
    if native_bf16("cpu"):  # both decoder precisions timed: load_codec's choice and the other one
        other = "fp32" if summary["decoder_dtype"] == "bf16" else "bf16"
        assert summary["speed_other"]["decode_x_realtime"] > 0 and f"{other} decoder" in out.read_text()
    assert f"Command: `gepard eval codec --codec {tiny_codec_dir} --limit 2 --threads 1 --out {out}`" in out.read_text()


def test_eval_lm_writes_the_report(tiny_lm_dir, tiny_codec_dir, tmp_path):
    out = tmp_path / "lm.md"
    r = CliRunner().invoke(app, ["eval", "lm", "--model", str(tiny_lm_dir), "--codec", str(tiny_codec_dir),
                                 "--limit", "2", "--threads", "1", "--temperature", "0.5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["test_utterances"] == 2 and summary["short_items"] == 2 and summary["short_seeds"] == 2
    assert summary["generations"] == 2 + 2 * 2 * 2  # 2 sentences + 2 short items x 2 modes x 2 seeds
    assert summary["temperature"] == 0.5 and "Sampling: temperature 0.5," in out.read_text()
    assert 0 <= summary["runaway_rate"] <= 100
    assert [set(row) >= {"text", "asr", "frames"} for row in summary["rows"]] == [True, True]  # every transcript kept
    assert f"decoded again with a beam of 5: {summary['asr_loops']}." in out.read_text()


def test_eval_dpo_compares_three_systems(tiny_lm_dir, tiny_codec_dir, tmp_path):
    out = tmp_path / "dpo.md"
    r = CliRunner().invoke(app, ["eval", "dpo", "--model", str(tiny_lm_dir), "--dpo-model", str(tiny_lm_dir),
                                 "--codec", str(tiny_codec_dir), "--limit", "2", "--threads", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(out.with_suffix(".json").read_text())
    base, cfg, dpo = summary.values()
    assert base["test_utterances"] == 2 and cfg["short_items"] == 2
    assert base["decode_passes_per_audio_s"] == pytest.approx(25.0)  # one pass per frame at 25 frames/s
    assert cfg["decode_passes_per_audio_s"] > base["decode_passes_per_audio_s"]  # CFG's second pass costs
    assert "Targets:" in out.read_text()


def test_eval_probes_writes_curves_budgets_and_min_wer(tiny_lm_dir, tiny_codec_dir, tmp_path):
    out = tmp_path / "probes.md"
    r = CliRunner().invoke(app, ["eval", "probes", "--model", str(tiny_lm_dir), "--codec", str(tiny_codec_dir),
                                 "--limit", "2", "--rollouts", "2", "--threads", "1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["summary"]["generations"] == 2 * 2 * 2 * 2  # 2 sets x 2 items x 2 modes x 2 seeds
    # entropy over the tiny model's 60 codes + <eos> lies in [0, ln 61]
    assert all(0 <= r["onset_entropy"] <= math.log(61) for r in report["rows"])
    assert out.with_suffix(".png").exists() and "| text tokens |" in out.read_text()
