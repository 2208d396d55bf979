"""Training-only regularizers: dropout hooks leave evaluation untouched, corruption touches audio inputs only."""

import torch

from tests.conftest import tiny_speech_lm
from gepard.lm.layout import Vocab
from gepard.lm.regularize import corrupt_audio_inputs, residual_dropout


def test_residual_dropout_acts_in_training_only():
    model = tiny_speech_lm()
    ids = torch.randint(0, 300, (1, 12))
    with torch.no_grad():
        before = model.lm(input_ids=ids).logits
        handles = residual_dropout(model.lm, 0.5)
        assert torch.equal(model.lm(input_ids=ids).logits, before)  # eval mode: no dropout
        model.lm.train()
        assert not torch.allclose(model.lm(input_ids=ids).logits, before)
        for h in handles:
            h.remove()
        model.lm.train()
        assert torch.allclose(model.lm(input_ids=ids).logits, before, atol=1e-6)


def test_corruption_replaces_about_p_of_the_audio_inputs_with_audio_codes():
    vocab = Vocab(text_size=10, codebook_size=1000)
    ids = torch.cat([torch.randint(0, 15, (4, 50)), vocab.audio_offset + torch.randint(0, 1000, (4, 500))], dim=1)
    out = corrupt_audio_inputs(ids, vocab, 0.2, torch.Generator().manual_seed(0))
    assert torch.equal(out[:, :50], ids[:, :50])  # text and special tokens untouched
    changed = (out[:, 50:] != ids[:, 50:]).float().mean().item()
    assert 0.17 < changed < 0.23
    assert (out[:, 50:] >= vocab.audio_offset).all() and (out < vocab.size).all()
