"""New training sentences: novel, never held out, bounded, reproducible."""

import pytest
from typer.testing import CliRunner

from gepard.cli import app
from gepard.data.sentences import markov_sentences, pool_sentences
from gepard.paths import shared_data_dir

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


@pytest.mark.skipif(shared_data_dir() is None, reason="the shared corpus (../shared/data) is absent")
def test_pool_option_writes_the_pools_training_texts_and_nothing_held_out(tmp_path):
    training, held_out = pool_sentences(shared_data_dir())
    out = tmp_path / "new_folder" / "pool.txt"  # its folder is made
    r = CliRunner().invoke(app, ["data", "sentences", str(out), "--pool"])
    assert r.exit_code == 0, r.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines == training and not set(lines) & held_out
    assert any(len(line.split()) <= 2 for line in lines)  # the short replies come along
