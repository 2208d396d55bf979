import json
from dataclasses import replace

import soundfile as sf
import torch

from gepard.codec.model import Codec
from gepard.codec.train import TrainConfig, train_codec
from gepard.data.manifests import read_manifest
from tests.conftest import tiny_codec_config


def one_clip(speech_path, tmp_path) -> list:
    """A manifest of the speech fixture alone."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_path), "text": "x", "speaker": "cathy"}) + "\n")
    return read_manifest(manifest)


def test_training_lowers_the_loss_and_resumes_where_it_stopped(speech_path, tmp_path):
    data = one_clip(speech_path, tmp_path)
    cfg = dict(run_dir=str(tmp_path / "run"), steps=12, batch_size=2, crop_frames=8, lr=3e-3, warmup=2,
               checkpoint_every=6, val_every=6, threads=1, codec=tiny_codec_config())
    train_codec(TrainConfig(**cfg, stop_at=6), data, data, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 7))
    data_facts = json.loads((tmp_path / "run" / "data.json").read_text())  # what the report says it trained on
    assert data_facts["utterances"] == 1 and abs(data_facts["hours"] * 3600 - sf.info(str(speech_path)).duration) < 0.1
    model = train_codec(TrainConfig(**cfg), data, data, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 13))
    assert log[-1]["val_loss"] < log[5]["val_loss"]  # training went on improving after the resume
    ckpt = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert ckpt["step"] == 12
    assert isinstance(model, Codec)


def test_adversarial_fine_tuning_trains_the_discriminator_and_resumes(speech_path, tmp_path):
    data = one_clip(speech_path, tmp_path)
    cfg = dict(run_dir=str(tmp_path / "run"), steps=6, batch_size=2, crop_frames=8, warmup=1, checkpoint_every=3,
               val_every=3, threads=1, adversarial_from=2, codec=tiny_codec_config())
    train_codec(TrainConfig(**cfg, stop_at=3), data, data, cache_dir=str(tmp_path / "cache"))
    first = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["discriminator"]
    train_codec(TrainConfig(**cfg), data, data, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert ["disc" in r for r in log] == [False, False, True, True, True, True]
    assert all(r["fm"] > 0 for r in log[2:])
    last = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["discriminator"]
    assert any(not torch.equal(first[k], last[k]) for k in first)


def test_decoder_fine_tuning_keeps_every_code(speech_path, tmp_path):
    data = one_clip(speech_path, tmp_path)
    cfg = dict(run_dir=str(tmp_path / "run"), steps=6, batch_size=2, crop_frames=8, lr=3e-3, warmup=1,
               checkpoint_every=3, val_every=3, threads=1, codec=tiny_codec_config())
    before = train_codec(TrainConfig(**cfg, stop_at=3), data, data, cache_dir=str(tmp_path / "cache"))
    before = {k: v.clone() for k, v in before.state_dict().items()}
    after = train_codec(TrainConfig(**cfg, freeze_encoder=True), data, data, cache_dir=str(tmp_path / "cache"))
    changed = {k.split(".")[0] for k, v in after.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {"decoder"}  # the encoder, hence every code, is exactly as it was


def test_a_run_can_start_from_a_saved_codec_with_other_levels(speech_path, tmp_path):
    data = one_clip(speech_path, tmp_path)
    torch.manual_seed(3)
    Codec(tiny_codec_config()).save_pretrained(tmp_path / "saved", dtype=torch.float32)
    saved = Codec.from_pretrained(tmp_path / "saved")
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), steps=1, batch_size=2, crop_frames=8, lr=1e-9, warmup=1,
                      threads=1, init=str(tmp_path / "saved"), codec=replace(tiny_codec_config(), levels=[3, 3, 3]))
    model = train_codec(cfg, data, data, cache_dir=str(tmp_path / "cache"))
    assert model.codebook_size == 27
    weights = saved.state_dict()
    assert all(torch.allclose(v, weights[k], atol=1e-6) for k, v in model.state_dict().items())  # lr ~ 0


def test_the_cli_sizes_a_new_codec_and_refuses_sizes_or_channels_with_init(speech_path, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from gepard.cli import app

    one_clip(speech_path, tmp_path)  # m.jsonl
    monkeypatch.chdir(tmp_path)  # the command caches audio under ./.cache
    args = ["train", "codec", "--train", "m.jsonl", "--val", "m.jsonl", "--steps", "1", "--batch-size", "2",
            "--threads", "1", "--frame-dim", "32", "--frame-depth", "1", "--fine-dim", "16", "--fine-depth", "2"]
    r = CliRunner().invoke(app, [*args, "--run-dir", "run", "--export", "small"])
    assert r.exit_code == 0, r.output
    config = Codec.from_pretrained(tmp_path / "small").config
    assert (config.frame_dim, config.frame_depth, config.fine_dim, config.fine_depth) == (32, 1, 16, 2)
    r = CliRunner().invoke(app, [*args, "--run-dir", "run2", "--init", "small"])
    assert r.exit_code == 1 and "--init keeps the architecture" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, [*args[:-8], "--run-dir", "run3", "--init", "small", "--levels", "4,4,4,4,4,4,4,4"])
    assert r.exit_code == 1 and "--init keeps the 6 latent channels" in r.output and "Traceback" not in r.output
