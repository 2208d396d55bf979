"""New training sentences: novel, never held out, bounded, reproducible."""

import pytest

from gepard.data.sentences import markov_sentences

CORPUS = ["the cat sat on the mat today", "a dog sat on the rug today", "the cat ran to the rug at noon",
          "a bird sat on the mat at noon", "the dog ran to the mat today"]


def test_sentences_are_new_distinct_and_bounded():
    held_out = {"the cat sat on the rug today"}
    out = markov_sentences(CORPUS, 8, held_out, seed=3, min_words=4, max_words=12)
    assert len(out) == len(set(out)) == 8
    assert not set(out) & (set(CORPUS) | held_out)
    assert all(4 <= len(s.split()) <= 12 for s in out)
    vocabulary = {w for s in CORPUS for w in s.split()}
    assert all(set(s.split()) <= vocabulary for s in out)


def test_sentences_are_reproducible():
    assert markov_sentences(CORPUS, 5, seed=1) == markov_sentences(CORPUS, 5, seed=1)
    assert markov_sentences(CORPUS, 5, seed=1) != markov_sentences(CORPUS, 5, seed=2)


def test_too_small_a_corpus_says_so():
    with pytest.raises(ValueError, match="only .* new sentences"):
        markov_sentences(CORPUS[:1], 3)
