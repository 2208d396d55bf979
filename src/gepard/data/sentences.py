"""`gepard data sentences`: new training sentences, recombined from the shared pool's training text.

The LM memorizes its few thousand training sentences instead of learning to read (NLL 5.0 on training
utterances, 8.2 on held-out ones: docs/results/alignment.md). Sentences it has never seen, spoken by the
teachers (`gepard data synthesize --texts`), give it text that cannot be memorized. A word-level Markov
chain over the pool's training split recombines its sentences into new ones with the pool's vocabulary,
spelled-out numbers and punctuation. Held-out sentences never come out of it.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

START, END = "<s>", "</s>"


def pool_sentences(data: Path) -> tuple[list[str], set[str]]:
    """(training sentences, held-out sentences: test and short register) of the shared pool."""
    lines = (data / "text" / "pool.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r["text"] for r in rows if r["split"] == "train"], {r["text"] for r in rows if r["split"] != "train"}


def markov_sentences(corpus: list[str], count: int, held_out: set[str] = frozenset(), seed: int = 0,
                     order: int = 2, min_words: int = 3, max_words: int = 30) -> list[str]:
    """`count` distinct sentences from an order-`order` word Markov chain over `corpus`.

    None is a corpus sentence or a `held_out` one; each has min_words..max_words words. Raises a
    ValueError when the corpus is too small to give that many.
    """
    chain: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for sentence in corpus:
        words = [START] * order + sentence.split() + [END]
        for i in range(order, len(words)):
            chain[tuple(words[i - order: i])].append(words[i])
    rng = random.Random(seed)
    seen, out = set(corpus) | set(held_out), []
    for _ in range(count * 50):
        state, words = (START,) * order, []
        while len(words) <= max_words and (word := rng.choice(chain[state])) != END:
            words.append(word)
            state = (*state[1:], word)
        sentence = " ".join(words)
        if min_words <= len(words) <= max_words and sentence not in seen:
            seen.add(sentence)
            out.append(sentence)
            if len(out) == count:
                return out
    raise ValueError(f"only {len(out)} new sentences came out of {len(corpus)} corpus sentences, {count} asked")
