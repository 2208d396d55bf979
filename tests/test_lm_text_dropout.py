"""Text dropout: dropped rows read the null text once (text CFG's unconditional prompt) and leave the
alignment loss; with it off, batches are the ones drawn before it existed."""

import random

import torch

from tests.test_lm_train import tiny_config, write_shards
from gepard.lm.alignment import AttentionTap, alignment_loss
from gepard.lm.data import LMDataset
from gepard.lm.layout import prompt_tokens
from gepard.lm.train import build, guided_alignment


def tiny_data(tmp_path):
    write_shards(tmp_path / "shards")
    cfg = tiny_config(tmp_path / "run", tmp_path / "shards", steps=1)
    model = build(cfg, ["yes", "no thanks", "see you at nine tomorrow", "okay", "the cat sat on the mat today"])
    data = LMDataset(cfg.shards, model.encode_training_text, model.vocab, model.repetition,
                     null_text_ids=model.null_text())
    return cfg, model, data


def test_dropped_rows_read_the_null_text_once(tmp_path):
    _, model, data = tiny_data(tmp_path)
    indices = list(range(8))
    batch = data.batch(indices, random.Random(0), text_dropout=1.0)
    assert batch["text_dropped"].all()
    prompt = prompt_tokens(model.null_text(), model.vocab, 1)
    for b, i in enumerate(indices):
        audio = model.vocab.audio_tokens(data.items[i].codes.tolist())
        assert batch["ids"][b, : batch["lengths"][b]].tolist() == prompt + audio


def test_without_text_dropout_the_batches_are_unchanged(tmp_path):
    _, _, data = tiny_data(tmp_path)
    plain = data.batch(list(range(8)), random.Random(3))
    off = data.batch(list(range(8)), random.Random(3), text_dropout=0.0)
    assert not off["text_dropped"].any()
    assert all(torch.equal(plain[k], off[k]) for k in plain)
    some = data.batch(list(range(24)), random.Random(3), text_dropout=0.5)
    assert 0 < some["text_dropped"].sum() < 24


def test_dropped_rows_leave_the_alignment_loss(tmp_path):
    cfg, model, data = tiny_data(tmp_path)
    tap = AttentionTap(model.lm.model.layers[cfg.alignment.layer].self_attn)
    batch = data.batch(list(range(6)), random.Random(1))
    batch["text_dropped"] = torch.tensor([True, False, True, False, False, True])
    prefix_len = model.voice.config.prefix_len
    model(batch)
    probs = tap.probabilities(cfg.alignment.heads, batch["lengths"] + prefix_len)
    model(batch)
    loss = guided_alignment(tap, cfg.alignment, batch, prefix_len)
    spans = batch["spans"] + torch.tensor([prefix_len, 0, prefix_len, 0])
    kept = ~batch["text_dropped"]
    assert torch.allclose(loss, alignment_loss(probs[kept], spans[kept], cfg.alignment.sigma))
    batch["text_dropped"][:] = True
    model(batch)
    nothing = guided_alignment(tap, cfg.alignment, batch, prefix_len)
    assert nothing.item() == 0 and nothing.requires_grad
