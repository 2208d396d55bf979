"""The merged vocabulary and the token layout of one utterance, with short-register text repetition.

Vocabulary: [text tokens | <pad> <sot> <eot> <sos> <eos> | audio codes].
Sequence:   [voice prefix x K] [<sot> text <eot>] x (R-1) [<sot> text <eot> <sos>] audio ... <eos>
The voice prefix is K embeddings (not tokens); only audio and <eos> are trained (context copies and the
voiced copy's text are masked from the loss).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SPECIAL_TOKENS = ("<pad>", "<sot>", "<eot>", "<sos>", "<eos>")
IGNORE = -100  # label of positions outside the loss


@dataclass(frozen=True)
class Vocab:
    text_size: int
    codebook_size: int

    def special(self, name: str) -> int:
        return self.text_size + SPECIAL_TOKENS.index(name)

    @property
    def audio_offset(self) -> int:
        return self.text_size + len(SPECIAL_TOKENS)

    @property
    def size(self) -> int:
        return self.audio_offset + self.codebook_size

    def audio_tokens(self, codes: list[int]) -> list[int]:
        return [self.audio_offset + int(c) for c in codes]

    def codes(self, tokens: list[int]) -> list[int]:
        """Audio tokens -> codec codes; raises on anything that is not an audio token."""
        out = [t - self.audio_offset for t in tokens]
        if any(not 0 <= c < self.codebook_size for c in out):
            raise ValueError("not an audio token")
        return out


@dataclass(frozen=True)
class Repetition:
    """Text repetition for short texts (GEPARD's short-register fix); stamped into the checkpoint."""

    below: int = 13  # apply to texts of fewer tokens than this
    target: int = 16  # aim for this many text tokens in total
    max_copies: int = 8
    keep_unrepeated: float = 0.25  # share of short training rows left with one copy

    def copies(self, n_text_tokens: int) -> int:
        if n_text_tokens <= 0:
            raise ValueError("the text has no tokens")
        if n_text_tokens >= self.below:
            return 1
        return max(1, min(self.max_copies, math.ceil(self.target / n_text_tokens)))

    def training_copies(self, n_text_tokens: int, rng: random.Random) -> int:
        copies = self.copies(n_text_tokens)
        return 1 if copies > 1 and rng.random() < self.keep_unrepeated else copies


def prompt_tokens(text_ids: list[int], vocab: Vocab, copies: int) -> list[int]:
    """[<sot> text <eot>] x (copies-1) + [<sot> text <eot> <sos>]: what generation starts from."""
    block = [vocab.special("<sot>"), *text_ids, vocab.special("<eot>")]
    return block * copies + [vocab.special("<sos>")]


def training_sequence(text_ids: list[int], codes: list[int], vocab: Vocab, copies: int) -> tuple[list[int], list[int]]:
    """(input ids, labels) for teacher forcing; labels are the next token, IGNORE outside audio and <eos>."""
    prompt = prompt_tokens(text_ids, vocab, copies)
    target = vocab.audio_tokens(codes) + [vocab.special("<eos>")]
    ids = prompt + target[:-1]
    labels = [IGNORE] * (len(prompt) - 1) + target
    return ids, labels
