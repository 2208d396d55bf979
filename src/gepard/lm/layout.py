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

import torch

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


def voiced_span(n_text_tokens: int, copies: int, n_frames: int) -> tuple[int, int, int, int]:
    """Where the voiced text copy and the audio sit in the ids of `prompt_tokens` + audio: (text start,
    text length, position of <sos> (the input that predicts the first frame), frames)."""
    return (copies - 1) * (n_text_tokens + 2) + 1, n_text_tokens, copies * (n_text_tokens + 2), n_frames


def training_sequence(text_ids: list[int], codes: list[int], vocab: Vocab, copies: int,
                      stopped: bool = True) -> tuple[list[int], list[int]]:
    """(input ids, labels) for teacher forcing; labels are the next token, IGNORE outside audio and <eos>.
    stopped=False: the audio was cut off (a runaway rollout), so no <eos> follows it."""
    prompt = prompt_tokens(text_ids, vocab, copies)
    target = vocab.audio_tokens(codes) + ([vocab.special("<eos>")] if stopped else [])
    ids = prompt + target[:-1]
    labels = [IGNORE] * (len(prompt) - 1) + target
    return ids, labels


def pad_sequences(seqs: list[tuple[list[int], list[int]]], vocab: Vocab) -> dict[str, torch.Tensor]:
    """(ids, labels) pairs -> right-padded ids/labels (B, L) and lengths (B,)."""
    length = max(len(ids) for ids, _ in seqs)
    ids = torch.full((len(seqs), length), vocab.special("<pad>"))
    labels = torch.full((len(seqs), length), IGNORE)
    for b, (seq_ids, seq_labels) in enumerate(seqs):
        ids[b, : len(seq_ids)] = torch.tensor(seq_ids)
        labels[b, : len(seq_labels)] = torch.tensor(seq_labels)
    return {"ids": ids, "labels": labels, "lengths": torch.tensor([len(s[0]) for s in seqs])}
