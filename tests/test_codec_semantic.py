import json

import numpy as np
import pytest
import torch

from gepard.codec.dataset import RandomCrops, build_audio_cache
from gepard.codec.semantic import SemanticHead, WhisperEncoder, build_feature_cache, load_features
from gepard.codec.train import TrainConfig, train_codec
from gepard.data.manifests import read_manifest
from tests.conftest import tiny_codec_config


@pytest.fixture(scope="module")
def whisper() -> WhisperEncoder:
    return WhisperEncoder(threads=1)


def test_one_feature_vector_per_codec_frame_also_past_30_seconds(whisper):
    rng = np.random.default_rng(0)
    for seconds in (1.3, 31.0):
        audio = (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32)
        features = whisper(audio, 640)
        assert features.shape == (int(np.ceil(len(audio) / 640)), 384)
        assert features.dtype == np.float16 and np.isfinite(features).all()


def test_crops_come_with_the_features_of_their_own_frames(speech_path, tmp_path, whisper):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_path), "text": "x", "speaker": "s"}) + "\n")
    folder = build_feature_cache(build_audio_cache(read_manifest(manifest), tmp_path), 640, threads=1)
    features, offsets, frame_samples = load_features(folder)
    cached = np.memmap(folder / "audio.int16", dtype=np.int16, mode="r")
    assert offsets == [0] and frame_samples == 640 and len(features) == -(-len(cached) // 640)
    np.testing.assert_array_equal(features, whisper(cached.astype(np.float32) / 32767, 640))

    audio, targets = RandomCrops(folder, 10 * 640, seed=1, frame_targets={"semantic": load_features(folder)}).batch(
        4, augment=False)
    targets = targets["semantic"]
    assert targets.shape == (4, 10, 384)
    for clip, target in zip(audio.numpy(), targets.numpy()):
        start = np.flatnonzero(np.all(np.lib.stride_tricks.sliding_window_view(
            cached, len(clip))[::640] == np.round(clip * 32767).astype(np.int16), axis=1))[0]
        np.testing.assert_array_equal(target, features[start: start + 10].astype(np.float32))


def test_semantic_loss_is_cosine_distance_to_the_standardized_target_over_frames_that_have_one():
    head = SemanticHead(code_dim=3, dim=2)
    head.fit_targets(np.array([[1.0, 10.0], [3.0, 30.0]]), every=1)  # mean (2, 20), std (1.41, 14.1)
    head.forward = lambda values: torch.tensor([[[1.0, 1.0], [1.0, 1.0], [5.0, -5.0]]])
    target = torch.tensor([[[3.0, 30.0], [1.0, 30.0], [0.0, 0.0]]])  # standardized: (+,+), (-,+); then padding
    assert head.loss(torch.zeros(1, 3, 3), target).item() == pytest.approx(0.5)  # (0 + 1) / 2


def test_semantic_training_logs_the_loss_and_resumes_with_its_head(speech_path, tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": str(speech_path), "text": "x", "speaker": "s"}) + "\n")
    data = read_manifest(manifest)
    cfg = dict(run_dir=str(tmp_path / "run"), steps=8, batch_size=2, crop_frames=8, lr=3e-3, warmup=1,
               checkpoint_every=4, val_every=4, threads=1, semantic_weight=1.0, codec=tiny_codec_config())
    train_codec(TrainConfig(**cfg, stop_at=4), data, data, cache_dir=str(tmp_path / "cache"))
    head = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["heads"]
    train_codec(TrainConfig(**cfg), data, data, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 9))
    assert all(0 < r["semantic"] < 2 for r in log)
    assert log[-1]["val_semantic"] < log[3]["val_semantic"]  # the codes learned to predict the teacher
    resumed = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["heads"]
    assert any(not torch.equal(head[k], resumed[k]) for k in head)
