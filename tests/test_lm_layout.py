import random

import pytest

from gepard.lm.layout import IGNORE, Repetition, Vocab, prompt_tokens, training_sequence

VOCAB = Vocab(text_size=100, codebook_size=64000)


def test_vocabulary_is_text_then_specials_then_audio():
    assert [VOCAB.special(s) for s in ("<pad>", "<sot>", "<eot>", "<sos>", "<eos>")] == [100, 101, 102, 103, 104]
    assert VOCAB.audio_offset == 105 and VOCAB.size == 105 + 64000
    assert VOCAB.codes(VOCAB.audio_tokens([0, 63999])) == [0, 63999]
    with pytest.raises(ValueError):
        VOCAB.codes([VOCAB.special("<eos>")])


@pytest.mark.parametrize("n, copies", [(1, 8), (2, 8), (3, 6), (5, 4), (6, 3), (8, 2), (12, 2), (13, 1), (40, 1)])
def test_paper_defaults_for_repetition(n, copies):
    assert Repetition().copies(n) == copies


def test_a_quarter_of_short_rows_stay_unrepeated_in_training():
    rng, rep = random.Random(0), Repetition()
    draws = [rep.training_copies(2, rng) for _ in range(4000)]
    assert abs(draws.count(1) / 4000 - 0.25) < 0.03 and set(draws) == {1, 8}
    assert {rep.training_copies(20, rng) for _ in range(100)} == {1}


def test_layout_of_a_repeated_short_text():
    sot, eot, sos, eos = (VOCAB.special(s) for s in ("<sot>", "<eot>", "<sos>", "<eos>"))
    assert prompt_tokens([7, 8], VOCAB, 3) == [sot, 7, 8, eot] * 3 + [sos]
    ids, labels = training_sequence([7, 8], [5, 6], VOCAB, 3)
    a5, a6 = VOCAB.audio_tokens([5, 6])
    assert ids == [sot, 7, 8, eot] * 3 + [sos, a5, a6]
    # labels predict the next token; every text copy is outside the loss
    assert labels == [IGNORE] * 12 + [a5, a6, eos]
    assert len(ids) == len(labels)
