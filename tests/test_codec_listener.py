import json

import numpy as np
import pytest
import soundfile as sf
import torch
from typer.testing import CliRunner

from gepard.cli import app
from gepard.codec.dataset import RandomCrops, build_audio_cache
from gepard.codec.listener import ListenerConfig, PhoneListener, train_listener
from gepard.codec.model import Codec
from gepard.codec.phones import build_phone_cache, load_phones
from gepard.codec.train import TrainConfig, train_codec
from gepard.data.manifests import read_manifest
from gepard.lm.track import PHONES, padded_track
from tests.conftest import tiny_codec_config

SMALL = ListenerConfig(channels=32, fine_depth=1, frame_depth=1)


def tone_manifest(tmp_path) -> list:
    """4 s that alternate every 5 codec frames between a 300 Hz tone ("aa") and white noise ("s")."""
    rng = np.random.default_rng(0)
    t = np.arange(3200) / 16000
    segments, track = [], []
    for i in range(20):
        vowel = i % 2 == 0
        segments.append(0.5 * np.sin(2 * np.pi * 300 * t) if vowel else 0.2 * rng.standard_normal(3200))
        track += ["aa" if vowel else "s"] * 5
    sf.write(tmp_path / "tones.wav", np.concatenate(segments).astype(np.float32), 16000)
    manifest = tmp_path / "tones.jsonl"
    manifest.write_text(json.dumps({"audio": str(tmp_path / "tones.wav"), "text": padded_track(track),
                                    "speaker": "t"}) + "\n")
    return read_manifest(manifest)


def test_the_listener_forms_one_belief_per_codec_frame():
    logits = PhoneListener(SMALL)(torch.randn(2, 10 * 640 + 100))
    assert logits.shape == (2, 10, 1 + len(PHONES))


def test_divergence_is_zero_for_the_same_audio_and_its_gradient_reaches_only_what_was_heard():
    torch.manual_seed(0)
    ear = PhoneListener(SMALL).eval().requires_grad_(False)
    original = torch.randn(2, 6 * 640)
    assert ear.divergence(original, original).item() == pytest.approx(0.0, abs=1e-6)

    heard = (original + 0.5 * torch.randn_like(original)).requires_grad_(True)
    reference = original.clone().requires_grad_(True)
    divergence = ear.divergence(heard, reference)
    divergence.backward()
    assert divergence.item() > 0
    assert heard.grad.abs().sum() > 0 and reference.grad is None


def test_a_trained_listener_hears_the_phones_and_loads_back_frozen(tmp_path):
    utts = tone_manifest(tmp_path)
    folder = build_phone_cache(build_audio_cache(utts, tmp_path / "cache"), utts, 640)
    phones = {"phones": load_phones(folder)}
    crops = [RandomCrops(folder, 10 * 640, seed=seed, frame_targets=phones) for seed in (0, 1)]
    result = train_listener(*crops, tmp_path / "ear", steps=40, batch_size=8, lr=3e-3, cfg=SMALL)
    assert result["val_accuracy"] > 0.8  # only frames at a tone/noise boundary may be heard wrong

    ear = PhoneListener.load(tmp_path / "ear")
    audio, targets = crops[1].batch(4, augment=False)
    assert ear.accuracy(audio, targets["phones"]) == pytest.approx(result["val_accuracy"], abs=0.15)
    assert not any(p.requires_grad for p in ear.parameters()) and not ear.training
    with pytest.raises(FileNotFoundError, match="gepard train listener"):
        PhoneListener.load(tmp_path / "missing")


def test_decoder_training_adds_the_listeners_divergence_to_its_loss_and_keeps_every_code(tmp_path):
    utts = tone_manifest(tmp_path)
    PhoneListener(SMALL).save(tmp_path / "ear")
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), steps=3, stop_at=3, batch_size=2, crop_frames=8, warmup=1,
                      val_every=3, threads=1, freeze_encoder=True, listener=str(tmp_path / "ear"),
                      listener_weight=2.0, codec=tiny_codec_config())
    torch.manual_seed(cfg.seed)
    encoder = Codec(cfg.codec).encoder.state_dict()
    model = train_codec(cfg, utts, utts, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    for r in log:
        assert r["listener"] > 0
        assert r["loss"] == pytest.approx(r["mel"] + r["sc"] + r["logmag"] + 2.0 * r["listener"], rel=1e-4)
    assert log[-1]["val_listener"] > 0
    assert all(torch.equal(v, model.encoder.state_dict()[k]) for k, v in encoder.items())


def test_the_cli_trains_a_listener_and_refuses_text_that_is_not_a_phone_track(tmp_path, monkeypatch):
    tone_manifest(tmp_path)
    monkeypatch.chdir(tmp_path)  # the command caches audio under ./.cache
    args = ["train", "listener", "--val", "tones.jsonl", "--out", "ear", "--steps", "2", "--batch-size", "2"]
    r = CliRunner().invoke(app, [*args, "--train", "tones.jsonl"])
    assert r.exit_code == 0, r.output
    assert "held-out phone accuracy" in r.output and PhoneListener.load(tmp_path / "ear").cfg.frame_samples == 640

    row = json.loads((tmp_path / "tones.jsonl").read_text())
    (tmp_path / "words.jsonl").write_text(json.dumps({**row, "text": "hello there"}) + "\n")
    r = CliRunner().invoke(app, [*args, "--train", "words.jsonl"])
    assert r.exit_code != 0 and "phone-track manifests" in r.output and "Traceback" not in r.output
