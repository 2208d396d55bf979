"""Guided alignment: the tapped attention is the model's own, the loss matches a hand computation, spans point
at the voiced text and the audio."""

import math

import numpy as np
import torch

from tests.conftest import tiny_speech_lm
from gepard.eval.alignment_report import reading_scores, text_attention
from gepard.lm.alignment import AttentionTap, alignment_loss, diagonal_prior, frame_level_spans
from gepard.lm.layout import Vocab, training_sequence, voiced_span


def test_tapped_attention_equals_the_models_eager_attention():
    model = tiny_speech_lm()
    model.lm.config._attn_implementation = "eager"
    tap = AttentionTap(model.lm.model.layers[1].self_attn)
    ids = torch.randint(0, 300, (2, 9))
    mask = torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
    with torch.no_grad():
        out = model.lm.model(input_ids=ids, attention_mask=mask, output_attentions=True)
        probs = tap.probabilities(1, mask.sum(1))
    expected = out.attentions[1][:, :1]
    assert torch.allclose(probs[0], expected[0], atol=1e-5)
    assert torch.allclose(probs[1, :, :6, :6], expected[1, :, :6, :6], atol=1e-5)  # padded queries are unused
    tap.remove()


def test_alignment_loss_by_hand():
    # one row, one head: text of 2 tokens at positions 0-1, 2 frames queried at positions 2-3
    probs = torch.zeros(1, 1, 4, 4)
    probs[0, 0, 2, 0] = 1.0  # frame 0 reads token 0
    probs[0, 0, 3, :2] = 0.5  # frame 1 reads both tokens
    spans = torch.tensor([[0, 2, 2, 2]])
    off_diagonal = math.exp(-0.25 / (2 * 0.5**2))  # centres 1/4 and 3/4 apart by 1/2, sigma 1/2
    expected = -(math.log(1 + 1e-6) + math.log(0.5 * off_diagonal + 0.5 + 1e-6)) / 2
    assert math.isclose(alignment_loss(probs, spans, 0.5).item(), expected, rel_tol=1e-6)
    assert torch.allclose(diagonal_prior(2, 2, 0.5), torch.tensor([[1, off_diagonal], [off_diagonal, 1]]))


def test_a_frame_level_track_is_read_one_token_per_frame():
    # a track of 4 tokens (2 phones + 2 padding) at positions 0-3, 2 frames queried at positions 4-5
    probs = torch.zeros(1, 1, 6, 6)
    probs[0, 0, 4, 0] = probs[0, 0, 5, 1] = 1.0  # frame j reads token j
    spans = frame_level_spans(torch.tensor([[0, 4, 4, 2]]))
    assert spans.tolist() == [[0, 2, 4, 2]]
    assert alignment_loss(probs, spans, 0.1).item() < 1e-5
    probs[0, 0, 5] = 0.0
    probs[0, 0, 5, 3] = 1.0  # frame 1 reads padding
    assert alignment_loss(probs, spans, 0.1).item() > 5


def test_voiced_span_points_at_the_last_text_copy_and_the_audio():
    vocab = Vocab(text_size=10, codebook_size=20)
    text, codes = [3, 4, 5], [7, 8, 9, 1]
    for copies in (1, 3):
        ids, labels = training_sequence(text, codes, vocab, copies)
        t0, n, sos, frames = voiced_span(len(text), copies, len(codes))
        assert ids[t0: t0 + n] == text and ids[t0 - 1] == vocab.special("<sot>")
        assert ids[sos] == vocab.special("<sos>")
        assert labels[sos: sos + frames] == vocab.audio_tokens(codes)


def test_reading_scores_tell_a_reading_head_from_one_that_stares():
    attention = torch.zeros(1, 2, 6, 3)
    for j in range(6):
        attention[0, 0, j, j // 2] = 1.0  # reads token 0, 1, 2 in turn
    attention[0, 1] = 0.5 / 3  # half its attention spread evenly over the text, the whole time
    share, correlation = reading_scores(attention)
    assert np.allclose(share, [[1.0, 0.5]]) and np.isclose(correlation[0, 0], np.corrcoef(np.arange(6), np.arange(6) // 2)[0, 1])
    assert np.isclose(correlation[0, 1], 0.0)


def test_text_attention_covers_every_layer_head_frame_and_token():
    model = tiny_speech_lm()
    codes = torch.tensor([1, 5, 7, 2, 9])
    attention = text_attention(model, "hello there", codes, model.voice.null(1))
    n_text = len(model.encode_text("hello there"))
    assert attention.shape == (2, 2, 5, n_text)
    assert (attention.sum(-1) <= 1 + 1e-6).all() and (attention >= 0).all()
    assert not model.lm.model.layers[0].self_attn._forward_pre_hooks  # the taps are gone
