import json

import numpy as np
import pytest
import torch

from gepard.codec.dataset import RandomCrops, build_audio_cache
from gepard.codec.lm_values import build_lm_value_cache, load_lm_values, with_lm_values
from gepard.codec.model import Codec
from gepard.codec.render import mean_values
from gepard.codec.train import TrainConfig, train_codec
from gepard.data.manifests import read_manifest
from gepard.data.prepare import prepare_shards, read_shards
from gepard.engine.base import TOP_CODES
from gepard.lm.speech_lm import SpeechLM
from gepard.lm.teacher_forced import audio_logits
from tests.conftest import tiny_codec_config, tiny_speech_lm


@pytest.fixture
def clips(tiny_codec, speech_path, tmp_path):
    """Two clips of one speaker, plus one the token shards do not hold: (manifest utterances, shard folder)."""
    rows = [{"audio": str(speech_path), "text": text, "speaker": "cathy", "id": uid}
            for uid, text in (("a", "hello there"), ("b", "see you at nine"))]
    (tmp_path / "shards.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    prepare_shards(tiny_codec, read_manifest(tmp_path / "shards.jsonl"), tmp_path / "shards")
    rows.append({"audio": str(speech_path), "text": "yes", "speaker": "cathy", "id": "c"})
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return read_manifest(tmp_path / "train.jsonl"), tmp_path / "shards"


def test_the_cache_holds_each_clips_teacher_forced_mean_values_frame_aligned(clips, tiny_codec, tiny_lm_dir,
                                                                              tmp_path):
    utterances, shards = clips
    audio = build_audio_cache(utterances, tmp_path / "cache")
    build = lambda: build_lm_value_cache(audio, shards, tiny_lm_dir, tiny_codec.fsq, 640, tiny_codec.fingerprint())
    folder = build()
    values, offsets, frame_samples = load_lm_values(folder)
    spans = json.loads((audio / "index.json").read_text())["spans"]
    dim = len(tiny_codec.fsq.levels)
    assert frame_samples == 640 and values.shape == (sum(-(-n // 640) for _, _, n in spans), dim + 1)
    model, true = SpeechLM.from_pretrained(tiny_lm_dir), {uid: c for uid, _, _, c in read_shards(shards)}
    for (uid, _, n), first, text in zip(spans, offsets, ("hello there", "see you at nine")):
        other = true["b" if uid == "a" else "a"]  # the reference: the speaker's other clip
        logits = audio_logits(model, text, torch.from_numpy(true[uid]), torch.from_numpy(other[:100]))
        top = logits.topk(TOP_CODES, -1)
        expected = mean_values(tiny_codec.fsq, top.indices, top.values).numpy()
        np.testing.assert_allclose(values[first: first + len(expected), :dim], expected, atol=1e-6)
        assert values[first: first + len(expected), dim].all()
    assert not values[offsets[2]:].any()  # "c" is not in the shards: no LM values, its encoder values stay
    assert build() == folder
    crops = RandomCrops(audio, 8 * 640, seed=0, frame_targets={"lm": load_lm_values(folder)})
    _, aligned = crops.batch(3, augment=False)
    assert aligned["lm"].shape == (3, 8, dim + 1) and aligned["lm"].dtype == torch.float32


def test_the_cache_refuses_an_lm_of_another_codec(clips, tiny_codec, tmp_path):
    utterances, shards = clips
    model = tiny_speech_lm()
    model.codec_fingerprint = "0" * 16
    model.save_pretrained(tmp_path / "lm")
    with pytest.raises(ValueError, match="another codec"):
        build_lm_value_cache(build_audio_cache(utterances, tmp_path / "cache"), shards, tmp_path / "lm",
                             tiny_codec.fsq, 640, tiny_codec.fingerprint())


def test_a_share_of_the_items_takes_the_lm_values_where_there_are_some(tiny_codec):
    fsq = tiny_codec.fsq
    values = fsq.index_to_values(torch.randint(0, 60, (64, 5)))
    lm = torch.cat([torch.rand(64, 5, values.shape[-1]) * 2 - 1, torch.ones(64, 5, 1)], -1)
    lm[:, 3:] = 0  # past the clip's codes: keep the encoder's
    mixed = with_lm_values(values, lm, 0.5, torch.Generator().manual_seed(0))
    took = (mixed[:, :3] == lm[:, :3, :-1]).flatten(1).all(1)
    kept = (mixed == values).flatten(1).all(1)
    assert torch.equal(mixed[:, 3:], values[:, 3:])
    assert torch.all(took ^ kept) and 16 < took.sum() < 48
    assert torch.equal(with_lm_values(values, lm, 0.0), values)


def test_decoder_training_on_lm_values_needs_a_frozen_encoder_and_keeps_every_code(clips, tiny_lm_dir, tmp_path):
    utterances, shards = clips
    torch.manual_seed(0)
    Codec(tiny_codec_config()).save_pretrained(tmp_path / "init", dtype=torch.float32)  # the shards' codec
    cfg = dict(run_dir=str(tmp_path / "run"), steps=2, batch_size=2, crop_frames=8, warmup=1, val_every=2,
               threads=1, init=str(tmp_path / "init"), codec=tiny_codec_config(), lm_values=str(shards),
               lm_model=str(tiny_lm_dir), lm_share=1.0)
    with pytest.raises(ValueError, match="freeze-encoder"):
        train_codec(TrainConfig(**cfg), utterances, utterances, cache_dir=str(tmp_path / "cache"))
    model = train_codec(TrainConfig(**cfg, freeze_encoder=True), utterances, utterances,
                        cache_dir=str(tmp_path / "cache"))
    assert model.fingerprint() == Codec.from_pretrained(tmp_path / "init").fingerprint()
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and np.isfinite(log[-1]["val_loss"])
