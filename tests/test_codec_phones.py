import json

import numpy as np
import pytest
import torch

from gepard.audio import load_audio
from gepard.codec.dataset import RandomCrops, build_audio_cache
from gepard.codec.phones import PhoneHead, build_phone_cache, load_phones, phone_labels
from gepard.codec.train import TrainConfig, train_codec
from gepard.data.manifests import read_manifest
from gepard.lm.track import PHONES, padded_track
from tests.conftest import tiny_codec_config


def speech_track(speech_path) -> list[str]:
    """A made-up phone per codec frame of the speech fixture: "aa" in its first half, "s" after."""
    frames = -(-len(load_audio(speech_path, 16000)) // 640)
    return ["aa" if j < frames // 2 else "s" for j in range(frames)]


def phone_manifest(speech_path, tmp_path) -> list:
    manifest = tmp_path / "m.jsonl"
    row = {"audio": str(speech_path), "text": padded_track(speech_track(speech_path)), "speaker": "s"}
    manifest.write_text(json.dumps(row) + "\n")
    return read_manifest(manifest)


def test_labels_number_the_phones_from_one_and_leave_padding_and_missing_frames_at_zero():
    labels = phone_labels("pau hh ah _ _", 6)
    assert labels.tolist() == [1, 1 + PHONES.index("hh"), 1 + PHONES.index("ah"), 0, 0, 0]
    with pytest.raises(ValueError, match="phone-track manifests"):
        phone_labels("hello there", 2)


def test_crops_come_with_the_phones_of_their_own_frames(speech_path, tmp_path):
    utts = phone_manifest(speech_path, tmp_path)
    folder = build_phone_cache(build_audio_cache(utts, tmp_path), utts, 640)
    labels, offsets, frame_samples = load_phones(folder)
    expected = [1 + PHONES.index(p) for p in speech_track(speech_path)]
    assert offsets == [0] and frame_samples == 640 and labels.tolist() == expected

    cached = np.memmap(folder / "audio.int16", dtype=np.int16, mode="r")
    audio, targets = RandomCrops(folder, 10 * 640, seed=1, frame_targets={"phones": load_phones(folder)}).batch(
        4, augment=False)
    assert targets["phones"].shape == (4, 10)
    for clip, target in zip(audio.numpy(), targets["phones"].numpy()):
        start = np.flatnonzero(np.all(np.lib.stride_tricks.sliding_window_view(
            cached, len(clip))[::640] == np.round(clip * 32767).astype(np.int16), axis=1))[0]
        assert target.tolist() == expected[start: start + 10]


def test_phone_loss_and_accuracy_count_only_frames_with_a_phone():
    head = PhoneHead(code_dim=3)
    logits = torch.full((1, 3, 1 + len(PHONES)), -30.0)
    logits[0, 0, 2] = logits[0, 1, 5] = logits[0, 2, 7] = 30.0  # confident: phone 2, phone 5, phone 7
    head.forward = lambda values: logits
    target = torch.tensor([[2, 4, 0]])  # right, wrong, no phone
    assert head.accuracy(torch.zeros(1, 3, 3), target) == 0.5
    assert head.loss(torch.zeros(1, 3, 3), target).item() == pytest.approx(60.0 / 2, rel=1e-4)  # (0 + 60) / 2


def test_phone_training_teaches_the_codes_the_phones_and_resumes_with_its_head(speech_path, tmp_path):
    data = phone_manifest(speech_path, tmp_path)
    cfg = dict(run_dir=str(tmp_path / "run"), steps=8, batch_size=2, crop_frames=8, lr=3e-3, warmup=1,
               checkpoint_every=4, val_every=4, threads=1, phone_weight=1.0, codec=tiny_codec_config())
    train_codec(TrainConfig(**cfg, stop_at=4), data, data, cache_dir=str(tmp_path / "cache"))
    head = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["heads"]
    train_codec(TrainConfig(**cfg), data, data, cache_dir=str(tmp_path / "cache"))
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 9))
    assert log[-1]["val_phones"] < log[3]["val_phones"]
    assert all(0 <= r["val_phone_accuracy"] <= 1 for r in (log[3], log[-1]))  # 8 steps on one clip: the commonest phone
    resumed = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)["heads"]
    assert head.keys() == resumed.keys() and any(not torch.equal(head[k], resumed[k]) for k in head)
