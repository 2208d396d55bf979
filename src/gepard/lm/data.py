"""LM training batches from token shards: text + codes of one utterance, reference from another of its speaker."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from gepard.data.prepare import read_shards
from gepard.lm.layout import Repetition, Vocab, pad_sequences, training_sequence, voiced_span


@dataclass
class Utterance:
    text_ids: list[int]
    codes: np.ndarray  # (J,) int64
    speaker: str


class LMDataset:
    """All transcribed utterances of some shard folders, held in memory (codes are small)."""

    def __init__(self, shard_dirs: list[str | Path], encode: Callable[[str], list[int]], vocab: Vocab,
                 repetition: Repetition, max_frames: int = 500, ref_frames: tuple[int, int] = (50, 150),
                 null_text_ids: list[int] | None = None):
        """encode: a shard's text -> text token ids (SpeechLM.encode_training_text); null_text_ids: what the
        unconditional branch of text CFG reads (SpeechLM.null_text), for rows whose text is dropped."""
        self.vocab, self.repetition, self.ref_frames = vocab, repetition, ref_frames
        self.null_text_ids = null_text_ids
        rows = [(text, speaker, codes) for folder in shard_dirs for _, text, speaker, codes in read_shards(folder)
                if text.strip() and 0 < len(codes) <= max_frames]
        self.items = [Utterance(encode(text), codes, speaker)
                      for text, speaker, codes in tqdm(rows, desc="reading texts", unit="utt", leave=False)]
        if not self.items:
            raise ValueError(f"no transcribed utterances in {', '.join(map(str, shard_dirs))}")
        self.by_speaker: dict[str, list[int]] = defaultdict(list)
        for i, u in enumerate(self.items):
            self.by_speaker[u.speaker].append(i)
        self.speaker_ids = {s: n for n, s in enumerate(sorted(self.by_speaker))}

        self.by_length = sorted(range(len(self.items)), key=lambda i: len(self.items[i].codes))
        self.sorted_lengths = [len(self.items[i].codes) for i in self.by_length]

    def __len__(self) -> int:
        return len(self.items)

    def sample(self, max_tokens: int, rng: random.Random) -> list[int]:
        """Neighbours in length order up to `max_tokens` padded frames: little padding, and since the first
        is drawn in proportion to its length, every utterance is drawn about equally often."""
        lengths = self.sorted_lengths
        first = rng.choices(range(len(lengths)), weights=lengths)[0]
        last = first + 1
        while last < len(lengths) and lengths[last] * (last + 1 - first) <= max_tokens:
            last += 1
        while first > 0 and lengths[last - 1] * (last - first + 1) <= max_tokens:
            first -= 1
        return self.by_length[first:last]

    def in_order(self, max_tokens: int) -> list[list[int]]:
        """Every utterance once, in batches of length-order neighbours up to `max_tokens` padded frames."""
        lengths, batches, first = self.sorted_lengths, [], 0
        while first < len(lengths):
            last = first + 1
            while last < len(lengths) and lengths[last] * (last + 1 - first) <= max_tokens:
                last += 1
            batches.append(self.by_length[first:last])
            first = last
        return batches

    def reference(self, index: int, rng: random.Random) -> np.ndarray:
        """A crop of another utterance of the same speaker (the same one if the speaker has only one)."""
        pool = [j for j in self.by_speaker[self.items[index].speaker] if j != index] or [index]
        codes = self.items[rng.choice(pool)].codes
        n = min(len(codes), rng.randint(*self.ref_frames))
        start = rng.randint(0, len(codes) - n)
        return codes[start: start + n]

    def batch(self, indices: list[int], rng: random.Random, null_prob: float = 0.15,
              text_dropout: float = 0.0) -> dict[str, torch.Tensor]:
        """Right-padded tensors: ids/labels (B, L), ref_codes (B, R), ref_lengths (B,), use_null (B,),
        speakers (B,) ids, spans (B, 4) of the voiced text and the audio in ids (`voiced_span`), and
        text_dropped (B,): rows that read the null text once instead of their own (a share `text_dropout`)."""
        if text_dropout > 0 and self.null_text_ids is None:
            raise ValueError("text dropout needs the dataset's null_text_ids")
        seqs, refs, spans, dropped = [], [], [], []
        for i in indices:
            u = self.items[i]
            dropped.append(text_dropout > 0 and rng.random() < text_dropout)  # no draw when off: same stream
            text = self.null_text_ids if dropped[-1] else u.text_ids
            copies = 1 if dropped[-1] else self.repetition.training_copies(len(text), rng)
            seqs.append(training_sequence(text, u.codes.tolist(), self.vocab, copies))
            spans.append(voiced_span(len(text), copies, len(u.codes)))
            refs.append(self.reference(i, rng))
        ref_codes = torch.zeros((len(seqs), max(len(r) for r in refs)), dtype=torch.long)
        for b, ref in enumerate(refs):
            ref_codes[b, : len(ref)] = torch.from_numpy(ref)
        return {
            **pad_sequences(seqs, self.vocab),
            "ref_codes": ref_codes, "ref_lengths": torch.tensor([len(r) for r in refs]),
            "use_null": torch.tensor([rng.random() < null_prob for _ in indices]),
            "speakers": torch.tensor([self.speaker_ids[self.items[i].speaker] for i in indices]),
            "spans": torch.tensor(spans),
            "text_dropped": torch.tensor(dropped, dtype=torch.bool),
        }
